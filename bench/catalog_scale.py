"""The catalog at scale: ListTools, Reload and memory with 10,000 YAML tools, each against a same-run baseline.

One `toolhost serve` process serves a generated catalog directory of 10,000 YAML files (1,000 with --quick),
another serves an empty one (the memory baseline), and a bare grpc.aio server returns, prebuilt, the very page
toolhost answers (the ListTools baseline). The client is this process, over grpc.aio; A and B alternate round
by round (harness.interleave_async) and each figure is the median of the rounds.

- list_10000_page_100: p50 of ListTools(tags=[group_3], page_size=100), the first page of the 1,000 tools
  (one in ten) carrying that tag, against the bare server returning the same 100 tools.
- reload_10000_cold: Reload RPC after every file was rewritten with content the server has never seen (a new
  description in each), so each file is read, parsed, validated and compiled again and every tool changes;
  against opening and reading the same files in this process.
- reload_10000_one_changed: Reload RPC after one file's description changed, against reading that one file.
- rss_10000_tools: resident memory of the server holding the tools (sampled in the one-changed rounds; the
  figure after the cold rounds is in its extra), against the server with an empty catalog directory.

The ListTools and Reload figures also carry a scaling curve at 1,000, 3,000 and 10,000 tools.

    .venv/bin/python -m bench.catalog_scale [--quick]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import grpc

from toolhost.v1 import tool_service_pb2, tool_service_pb2_grpc

from .harness import BENCH, Figure, ServerProcess, Target, interleave_async, quiet_env, run_standalone, toolhost_argv

CATEGORIES = ("network", "system", "files", "text", "data", "cloud", "security", "dev")
FILTER_TAG = "group_3"  # one tool in ten carries it
PAGE_SIZE = 100
CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]
RELOAD = tool_service_pb2.ReloadRequest()
_STARTED = time.perf_counter()


def progress(text: str) -> None:
    """A line on stderr as each part ends: the run takes a minute or more."""
    print(f"catalog_scale {time.perf_counter() - _STARTED:6.1f}s {text}", file=sys.stderr, flush=True)


def tool_yaml(index: int, variant: int) -> str:
    """A catalog file in the shape of the README's example: runner, two parameters, tags, an example.
    The text parameter's description names the tool, so no two tools have the same input schema."""
    return (
        f"name: tool_{index:05d}\n"
        f"display_name: Tool {index:05d}\n"
        f"description: Generated tool {index} (catalog variant {variant}); echoes its text.\n"
        f"category: {CATEGORIES[index % len(CATEGORIES)]}\n"
        "platform: linux\n"
        "version: 1.0.0\n"
        'runner: {type: process, argv: ["echo", "{text}"]}\n'
        "parameters:\n"
        f"  - {{name: text, type: string, description: The text tool {index} echoes., required: true}}\n"
        "  - {name: count, type: integer, description: How many times., default: 1, minimum: 1, "
        f"maximum: {10 + index % 5}}}\n"
        "timeout_seconds: 10\n"
        f"tags: [generated, group_{index % 10}]\n"
        "examples:\n"
        "  - {description: Say hello, parameters: {text: hello}}\n"
        "annotations: {read_only: true, idempotent: true}\n"
    )


def tool_path(directory: Path, index: int) -> Path:
    return directory / f"tool_{index:05d}.yaml"


def write_catalog(directory: Path, count: int, variant: int) -> None:
    """`count` tools, variant `variant` of each; files of higher numbers left by a larger catalog go."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    for index in range(count):
        descriptor = os.open(tool_path(directory, index), flags, 0o644)
        try:
            os.write(descriptor, tool_yaml(index, variant).encode())
        finally:
            os.close(descriptor)
    for extra in directory.glob("tool_*.yaml"):
        if int(extra.stem.removeprefix("tool_")) >= count:
            extra.unlink()


def read_files(paths: list[Path]) -> float:
    """Seconds to open and read each file: the floor under any reload of them."""
    started = time.perf_counter()
    for path in paths:
        with open(path, "rb") as handle:
            handle.read()
    return time.perf_counter() - started


async def list_p50_ms(stub: tool_service_pb2_grpc.ToolServiceStub, calls: int) -> float:
    request = tool_service_pb2.ListToolsRequest(tags=[FILTER_TAG], page_size=PAGE_SIZE)
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        response = await stub.ListTools(request)
        samples.append(time.perf_counter() - started)
        assert len(response.tools) == PAGE_SIZE, len(response.tools)
    return statistics.median(samples) * 1e3


class Catalog:
    """The served catalog directory and the variant each file holds."""

    def __init__(self, directory: Path, count: int) -> None:
        self.directory = directory
        self.count = count
        self.variant = 0
        write_catalog(directory, count, self.variant)

    def paths(self) -> list[Path]:
        return [tool_path(self.directory, i) for i in range(self.count)]

    def resize(self, count: int) -> None:
        self.count = count
        self.variant += 1
        write_catalog(self.directory, count, self.variant)

    def rewrite_all(self) -> None:
        self.variant += 1
        write_catalog(self.directory, self.count, self.variant)

    def change_one(self, index: int) -> Path:
        self.variant += 1
        path = tool_path(self.directory, index)
        path.write_text(tool_yaml(index, self.variant))
        return path


async def reload_seconds(stub: tool_service_pb2_grpc.ToolServiceStub, expect_changed: int,
                         server: ServerProcess, cpu: list[float]) -> float:
    """Wall seconds of one Reload RPC; the CPU seconds the server spent meanwhile go to `cpu` (a figure less
    sensitive than wall time to the other work on this machine)."""
    cpu_before = server.cpu_seconds()
    started = time.perf_counter()
    response = await stub.Reload(RELOAD, timeout=120)
    seconds = time.perf_counter() - started
    cpu.append(server.cpu_seconds() - cpu_before)
    assert response.success and not response.errors, (response.success, list(response.errors)[:3])
    assert len(response.changed) == expect_changed, (len(response.changed), expect_changed)
    return seconds


async def measure(quick: bool, work: Path, command: str) -> list[Figure]:
    count = 1_000 if quick else 10_000
    rounds = 3 if quick else 5
    list_calls = 100 if quick else 300
    scale = "" if count == 10_000 else f" Quick run: {count:,} tools, not 10,000."
    catalog_dir, empty_dir = work / "catalog", work / "empty"
    catalog_dir.mkdir()
    empty_dir.mkdir()
    catalog = Catalog(catalog_dir, count)

    def serve(directory: Path, name: str) -> tuple[list[str], dict[str, str]]:
        data = work / f"data-{name}"
        data.mkdir()
        return toolhost_argv("--catalog-dir", str(directory), "--watch-catalog", "false"), quiet_env(
            TOOLHOST_DATA_DIR=str(data))

    with ExitStack() as stack:
        argv, env = serve(catalog_dir, "full")
        started = time.perf_counter()
        toolhost = stack.enter_context(ServerProcess(argv, env=env, timeout=300))
        start_seconds = time.perf_counter() - started
        progress(f"server started with {count} tools in {start_seconds:.1f} s")
        fresh_rss_mb = toolhost.rss_bytes() / 1e6
        argv, env = serve(empty_dir, "empty")
        empty = stack.enter_context(ServerProcess(argv, env=env))

        async with grpc.aio.insecure_channel(toolhost.target, options=CHANNEL_OPTIONS) as channel:
            stub = tool_service_pb2_grpc.ToolServiceStub(channel)
            await channel.channel_ready()  # the first call below is timed without the connection
            first_started = time.perf_counter()
            page = await stub.ListTools(tool_service_pb2.ListToolsRequest(tags=[FILTER_TAG], page_size=PAGE_SIZE))
            first_list_ms = (time.perf_counter() - first_started) * 1e3
            page_file = work / "page.bin"
            page_file.write_bytes(page.SerializeToString())
            bare = stack.enter_context(ServerProcess(
                [sys.executable, str(BENCH / "bare_server.py"), "0", "--page-file", str(page_file)]))
            async with grpc.aio.insecure_channel(bare.target, options=CHANNEL_OPTIONS) as bare_channel:
                bare_stub = tool_service_pb2_grpc.ToolServiceStub(bare_channel)
                for each in (stub, bare_stub):  # connections, caches, the filter's first evaluation
                    await list_p50_ms(each, 30)

                async def toolhost_list() -> float:
                    return await list_p50_ms(stub, list_calls)

                async def bare_list() -> float:
                    return await list_p50_ms(bare_stub, list_calls)

                list_toolhost, list_bare = await interleave_async(rounds, toolhost_list, bare_list)
                progress(f"ListTools p50 ms: toolhost {list_toolhost}, bare {list_bare}")

                # One file changed: a different one each round.
                changed_paths: Iterator[int] = iter(range(7, count, max(1, count // (rounds + 1))))
                last_changed: list[Path] = [tool_path(catalog_dir, 0)]

                one_cpu: list[float] = []
                rss_samples: list[float] = []
                empty_rss_samples: list[float] = []

                async def one_changed() -> float:
                    last_changed[0] = catalog.change_one(next(changed_paths))
                    seconds = await reload_seconds(stub, 1, toolhost, one_cpu)
                    rss_samples.append(toolhost.rss_bytes() / 1e6)
                    empty_rss_samples.append(empty.rss_bytes() / 1e6)
                    return seconds

                async def read_one() -> float:
                    return read_files(last_changed)

                await reload_seconds(stub, 0, toolhost, [])  # a reload with nothing to do first
                one_toolhost, one_read = await interleave_async(rounds, one_changed, read_one)
                progress(f"Reload, one file changed, s: {one_toolhost}; server CPU s {one_cpu}; RSS MB {rss_samples}")

                # Cold: every file rewritten with a variant the server has never seen.
                cold_cpu: list[float] = []
                cold_rss: list[float] = []

                async def cold() -> float:
                    catalog.rewrite_all()
                    seconds = await reload_seconds(stub, count, toolhost, cold_cpu)
                    cold_rss.append(toolhost.rss_bytes() / 1e6)
                    return seconds

                async def read_all() -> float:
                    return read_files(catalog.paths())

                cold_toolhost, cold_read = await interleave_async(rounds, cold, read_all)
                progress(f"Reload, all files new, s: {cold_toolhost}; server CPU s {cold_cpu}; read {cold_read}; "
                         f"RSS MB {cold_rss}")

                # The scaling curve: the same measurements at smaller sizes (fewer rounds), largest first.
                curve_counts = [c for c in (3_000, 1_000) if c < count]
                curve_list: dict[int, tuple[float, float]] = {
                    count: (statistics.median(list_toolhost), statistics.median(list_bare))}
                curve_reload: dict[int, tuple[float, float]] = {
                    count: (statistics.median(cold_toolhost), statistics.median(cold_read))}
                for size in curve_counts:
                    served = catalog.count
                    catalog.resize(size)
                    response = await stub.Reload(RELOAD, timeout=120)
                    assert response.success and len(response.removed) == served - size, len(response.removed)
                    count_now = size

                    async def cold_at_size(expected: int = count_now) -> float:
                        catalog.rewrite_all()
                        return await reload_seconds(stub, expected, toolhost, [])

                    sized_cold, sized_read = await interleave_async(3, cold_at_size, read_all)
                    await list_p50_ms(stub, 10)
                    sized_list, sized_bare = await interleave_async(3, toolhost_list, bare_list)
                    curve_list[size] = (statistics.median(sized_list), statistics.median(sized_bare))
                    curve_reload[size] = (statistics.median(sized_cold), statistics.median(sized_read))
                    progress(f"{size} tools: ListTools {curve_list[size]}, Reload {curve_reload[size]}")

    def curve(points: dict[int, tuple[float, float]], y_label: str) -> dict[str, object]:
        xs = sorted(points)
        return {"x": xs, "toolhost": [round(points[x][0], 4) for x in xs],
                "baseline": [round(points[x][1], 4) for x in xs], "x_label": "tools in the catalog",
                "y_label": y_label}

    return [
        Figure.from_rounds(
            key="list_10000_page_100", title=f"ListTools over {count:,} tools, tag filter, page of 100, p50",
            unit="ms", measured=list_toolhost, baseline=list_bare,
            baseline_name="bare grpc.aio server returning the same page, prebuilt",
            target=Target.value_at_most(2.0), command=command,
            note=(f"Each round is the median of {list_calls} sequential ListTools(tags=[{FILTER_TAG}], "
                  f"page_size=100) calls: the first page of the {count // 10:,} matching tools. The filter's "
                  "name list is cached per snapshot, so these are warm calls; the server's first ListTools "
                  f"after start (the filter's first scan, and whatever a first call costs) took "
                  f"{first_list_ms:.1f} ms.{scale}"),
            extra={"curve": curve(curve_list, "ListTools p50 (ms)"), "first_call_ms": round(first_list_ms, 2)},
        ),
        Figure.from_rounds(
            key="reload_10000_cold", title=f"Reload RPC, {count:,} YAML files all new", unit="s",
            measured=cold_toolhost, baseline=cold_read,
            baseline_name="opening and reading the same files (this process)",
            target=Target.value_at_most(1.5), command=command,
            note=("Cold: before each Reload every file was rewritten with a description the server has never "
                  "seen, so each is read, parsed, validated and compiled and every tool is reported changed "
                  "(the server process itself is warm). Timed at the client, the 10,000-name ReloadResponse "
                  f"included. Server start with the catalog (first load, imports) took {start_seconds:.1f} s."
                  f"{scale}"),
            extra={"curve": curve(curve_reload, "Reload, every file new (s)"),
                   "server_cpu_s": round(statistics.median(cold_cpu), 3),
                   "server_start_s": round(start_seconds, 2)},
        ),
        Figure.from_rounds(
            key="reload_10000_one_changed", title=f"Reload RPC, 1 of {count:,} YAML files changed", unit="ms",
            measured=[s * 1e3 for s in one_toolhost], baseline=[s * 1e3 for s in one_read],
            baseline_name="opening and reading the one changed file (this process)",
            target=Target.value_at_most(100.0), command=command,
            note=("Before each Reload one file's description changed (a different file each round); the "
                  "server stats every file, re-reads and re-parses only the changed one, and swaps in a "
                  f"generation with that one tool changed.{scale}"),
            extra={"server_cpu_ms": round(statistics.median(one_cpu) * 1e3, 1)},
        ),
        Figure.from_rounds(
            key="rss_10000_tools", title=f"Server RSS with {count:,} tools", unit="MB",
            measured=rss_samples, baseline=empty_rss_samples,
            baseline_name="the same server with an empty catalog directory",
            target=Target.value_at_most(200.0), command=command,
            note=("Resident set of the serving process holding the catalog, sampled after each one-file reload "
                  "round, against the server with an empty catalog directory at the same moment. Freshly "
                  f"started it held {fresh_rss_mb:.0f} MB; after the cold rounds (every tool replaced {rounds} "
                  f"times, two generations alive during each) {statistics.median(cold_rss):.0f} MB: freed "
                  f"memory the allocator keeps.{scale}"),
            extra={"fresh_start_mb": round(fresh_rss_mb, 1),
                   "after_cold_reloads_mb": round(statistics.median(cold_rss), 1)},
        ),
    ]


def run(quick: bool) -> list[Figure]:
    command = 'make bench BENCH_ARGS="--only catalog_scale' + (' --quick"' if quick else '"')
    with tempfile.TemporaryDirectory(prefix="catalog-scale-") as work:
        return asyncio.run(measure(quick, Path(work), command))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    run_standalone("catalog_scale", run, __doc__)
