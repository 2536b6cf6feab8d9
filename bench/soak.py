"""`make soak`: one `toolhost serve` under 20 minutes of mixed calls, checked for growth and for failed calls.

What it proves: a server that keeps serving echo, a process tool, streamed calls of it, ListTools, QueryLogs and
a call refused on purpose, with a catalog edit and a Reload every 10 s, holds steady. After the warm-up (the
first 5 minutes) none of its resident memory, open descriptors, threads or log-ring bytes grows by 5 % or more,
and no call fails.

Three fifths into the warm-up, bursts of concurrent QueryLogs start every thread of the server's default executor,
a bounded pool that otherwise grows whenever calls first overlap enough, at any minute.

How it samples: every `--sample-seconds` (a minute) the load pauses until no call is in flight, then /proc/<pid>
is read three times 0.1 s apart (VmRSS and Threads of `status`, the entries of `fd`; the smallest of each) and
`toolhost_log_ring_bytes` is scraped from /metrics. Pausing keeps what a running call holds (a process tool's
pipes, the thread asyncio waits for its exit in) out of the figures: at a sample, anything held is held for good.

Threads are judged without the surplus of gRPC's event-engine pool (its threads above the idle server's count):
gRPC starts those while all of its threads are busy and ends each after 20 s idle, so whether a sample finds one
depends on the last seconds' load. That they are elastic is checked: after the load they must be gone within
40 s, or the verdict fails.

The rule, for each quantity: growth = (the largest of the last 3 samples) / (the first sample at or after the
warm-up) - 1, which must stay under 5 %. The largest, not the last alone: a leak shows in every late sample, and a
dip of the allocator in the very last one must not hide it. A failed call is any call that raised or came back
other than designed: a result with success=false, wrong output, any gRPC status except the INVALID_ARGUMENT the
refused call is built to get, a Reload that failed or did not see the catalog edit.

    .venv/bin/python -m bench.soak [--minutes 20] [--sample-seconds 60] [--results bench/results] [--no-docs]

A full run (20 minutes or more) writes bench/results/soak.json and renders the soak's section of
docs/benchmarks.md (bench/report.py) from it and the figures of bench/results/latest.json. A shorter run is a
smoke run: it writes soak-quick.json and leaves the page alone; its warm-up is a quarter of its length, and the
log ring's record bound shrinks in proportion, so that the ring fills within the warm-up as the default one does
in a full run. The exit status is 0 when the verdict is passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.ghz_load import TOOLHOST_HTTP, wait_for_line
from bench.harness import BENCH, ROOT, ServerProcess, quiet_env, toolhost_argv
from bench.report import SOAK_QUICK_RESULTS, SOAK_RESULTS, write_markdown
from bench.run import machine
from toolhost import AsyncClient, InvalidArgumentError, OutputChunk, ToolResult

FULL_MINUTES = 20.0
WARMUP_MINUTES = 5.0
GROWTH_LIMIT = 0.05
TAIL_SAMPLES = 3
QUANTITIES = ("rss_bytes", "open_fds", "steady_threads", "ring_bytes")
# gRPC's event engine runs a reserve of threads and starts more while all are busy; each of those ends after 20 s
# idle (kIdleThreadLimit, grpc's work_stealing_thread_pool.cc). Threads of that name above the idle server's count
# are counted apart, and must be gone this long after the load stops.
GRPC_POOL_THREAD = "event_engine"
GRPC_SURPLUS_DRAIN_SECONDS = 40.0
SERVER_RING_RECORDS = 10_000  # the server's default log_memory_records
# When the bursts that fill the server's thread pool start, as a share of the warm-up (the ring is full by then, so
# that each QueryLogs keeps its thread busy a while), and how many bursts at most.
FILL_AT = 0.6
FILL_BURSTS = 12
PROCESS_COUNT = 50  # lines the process tool prints per call
STREAM_COUNT = 2_000  # lines of a streamed call: several output chunks
# Each client's round of calls, in order (each client starts at another place in it): half echo, the rest the
# heavier kinds, and one call refused on purpose.
ROUND = ("echo", "process", "echo", "stream", "echo", "list_tools", "echo", "process", "echo", "query_logs", "echo",
         "refused")

CATALOG = {
    "count_to.yaml": """\
name: count_to
description: Prints the numbers from 1 to count, one a line (the soak's process tool).
runner: {type: process, argv: ["seq", "1", "{count}"]}
parameters:
  - name: count
    type: integer
    description: The last number.
    required: true
timeout_seconds: 30
annotations: {read_only: true, idempotent: true}
""",
}
RELOADED_FILE = "soak_reloaded.yaml"
RELOADED_TOOL = "soak_reloaded"


def reloaded_tool_yaml(edit: int) -> str:
    """The catalog file each reload rewrites: a new description each time, so that the Reload changes a tool."""
    return (f"name: {RELOADED_TOOL}\ndescription: Rewritten by the soak before reload {edit}.\n"
            'runner: {type: process, argv: ["true"]}\n')


@dataclass(frozen=True)
class Settings:
    minutes: float = FULL_MINUTES
    sample_seconds: float = 60.0
    warmup_minutes: float = WARMUP_MINUTES
    clients: int = 4
    calls_per_second: float = 100.0
    reload_seconds: float = 10.0
    ring_records: int = SERVER_RING_RECORDS

    @classmethod
    def for_run(cls, minutes: float, sample_seconds: float = 60.0, clients: int = 4,
                calls_per_second: float = 100.0, reload_seconds: float = 10.0) -> Settings:
        """A full run keeps the server's defaults; a shorter one scales the warm-up and the ring with its length."""
        share = min(1.0, minutes / FULL_MINUTES)
        return cls(minutes=minutes, sample_seconds=sample_seconds, warmup_minutes=WARMUP_MINUTES * share,
                   clients=clients, calls_per_second=calls_per_second, reload_seconds=reload_seconds,
                   ring_records=max(200, round(SERVER_RING_RECORDS * share)))

    @property
    def full(self) -> bool:
        return self.minutes >= FULL_MINUTES


# -- the verdict ------------------------------------------------------------------------------------------------


def judge(samples: list[dict[str, Any]], warmup_minutes: float, failures: int, *, limit: float = GROWTH_LIMIT,
          tail: int = TAIL_SAMPLES, problems: Sequence[str] = ()) -> dict[str, Any]:
    """The verdict on `samples` (dicts with `minute` and each of QUANTITIES): each quantity's growth from the first
    sample at or after the warm-up to the largest of the last `tail` samples is under `limit`, no call failed, and
    the run found none of `problems`."""
    reasons: list[str] = list(problems)
    after = [sample for sample in samples if sample["minute"] >= warmup_minutes - 1e-9]
    growth: dict[str, Any] = {}
    if len(after) < 2:
        reasons.append(f"{len(after)} sample(s) at or after the {warmup_minutes:g}-minute warm-up: at least 2 are "
                       "needed (a longer run or a shorter --sample-seconds)")
    else:
        baseline_sample, last = after[0], after[1:][-tail:]
        for quantity in QUANTITIES:
            baseline = baseline_sample[quantity]
            end = max(sample[quantity] for sample in last)
            change = (end / baseline - 1) if baseline else (0.0 if end == 0 else None)
            ok = change is not None and change < limit
            growth[quantity] = {"baseline": baseline, "baseline_minute": baseline_sample["minute"], "end": end,
                                "growth": change, "ok": ok}
            if not ok:
                shown = "from nothing" if change is None else f"{change:+.1%}"
                reasons.append(f"{quantity} grew {shown} ({baseline:,} at minute {baseline_sample['minute']:g} to "
                               f"{end:,}), the limit is {limit:.0%}")
    if failures:
        reasons.append(f"{failures} failed call(s)")
    return {"rule": f"largest of the last {tail} samples against the first at or after minute {warmup_minutes:g}, "
                    f"each under +{limit:.0%}; zero failed calls",
            "growth": growth, "failures": failures, "verdict": "FAILED" if reasons else "passed", "reasons": reasons}


# -- /proc and /metrics -------------------------------------------------------------------------------------------


def process_status(pid: int) -> tuple[int, int]:
    """VmRSS in bytes and Threads, from /proc/<pid>/status; ProcessLookupError when the process has exited."""
    try:
        status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    except FileNotFoundError:
        raise ProcessLookupError(pid) from None
    if status["State"].split()[0] in ("Z", "X"):  # exited, not yet reaped
        raise ProcessLookupError(pid)
    return int(status["VmRSS"].split()[0]) * 1024, int(status["Threads"])


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def grpc_pool_threads(pid: int) -> int:
    """The threads of gRPC's event-engine pool (by their name in /proc/<pid>/task/*/comm)."""
    count = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(FileNotFoundError):  # the thread ended meanwhile
            count += Path(f"/proc/{pid}/task/{task}/comm").read_text().strip() == GRPC_POOL_THREAD
    return count


def scrape_ring_bytes(metrics_url: str) -> int:
    with urllib.request.urlopen(metrics_url, timeout=10) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith("toolhost_log_ring_bytes "):
                return int(float(line.split()[1]))
    raise RuntimeError(f"{metrics_url} has no toolhost_log_ring_bytes: is the server older than the soak?")


# -- the load -----------------------------------------------------------------------------------------------------


class CallCheckError(Exception):
    """A call came back, but not as designed."""


class Load:
    """The clients' calls and the reloads, counted; `pause()` holds new calls back until none is in flight."""

    def __init__(self, client: AsyncClient, settings: Settings, catalog: Path) -> None:
        self.client = client
        self.settings = settings
        self.catalog = catalog
        self._open = asyncio.Event()
        self._open.set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._in_flight = 0
        self.calls: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()
        self.failure_examples: list[dict[str, Any]] = []
        self.started = time.monotonic()
        self._edits = 0
        self._operations: dict[str, Callable[[], Awaitable[None]]] = {
            "echo": self._echo, "process": self._process, "stream": self._stream, "list_tools": self._list_tools,
            "query_logs": self._query_logs, "refused": self._refused, "reload": self._reload}

    async def pause(self) -> None:
        self._open.clear()
        await self._idle.wait()

    def resume(self) -> None:
        self._open.set()

    async def run(self, kind: str) -> None:
        """One call of `kind` (a key of ROUND, or "reload"), counted; a failure is recorded, not raised."""
        await self._open.wait()
        # No await between the gate and the count: a pause that finds no call in flight finds none starting.
        self._in_flight += 1
        self._idle.clear()
        try:
            await self._operations[kind]()
        except Exception as exc:
            self.failed[kind] += 1
            if len(self.failure_examples) < 20:
                self.failure_examples.append({"kind": kind, "minute": round((time.monotonic() - self.started) / 60, 2),
                                              "error": f"{type(exc).__name__}: {exc}"[:500]})
        finally:
            self.calls[kind] += 1
            self._in_flight -= 1
            if not self._in_flight:
                self._idle.set()

    async def client_loop(self, index: int) -> None:
        """One client: the ROUND of calls from its own place, each started on its pace (no catching up)."""
        interval = self.settings.clients / self.settings.calls_per_second
        next_start = time.monotonic() + index * interval / self.settings.clients
        position = index * len(ROUND) // self.settings.clients
        while True:
            await asyncio.sleep(max(0.0, next_start - time.monotonic()))
            await self.run(ROUND[position % len(ROUND)])
            position += 1
            next_start = max(next_start + interval, time.monotonic())

    async def fill_pools(self, delay: float, server_threads: Callable[[], int]) -> None:
        """After `delay` seconds, bursts of four times as many QueryLogs at once as the server's default executor
        may have threads (each reads the ring in that executor), until three bursts in a row start no thread.

        The pool is bounded (min(32, cores + 4) threads) but starts a thread only when a job finds none idle, so
        under the steady load its last threads appear at random, whenever calls first overlap that much (see
        bench/findings/soak.md). Filled during the warm-up, it is part of the baseline, and a thread that appears
        after it is one more than any bounded pool of the server holds.
        """
        await asyncio.sleep(delay)
        width = 4 * min(32, (os.cpu_count() or 1) + 4)
        most, calm = server_threads(), 0
        for _ in range(FILL_BURSTS):
            await asyncio.gather(*(self.run("query_logs") for _ in range(width)))
            threads = server_threads()
            calm = calm + 1 if threads <= most else 0
            most = max(most, threads)
            if calm == 3:
                return

    async def reload_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.reload_seconds)
            await self.run("reload")

    # The calls. Each checks what came back; CallCheckError when it is not what the call is built to get.

    async def _echo(self) -> None:
        text = f"soak {self.calls['echo']}"
        _expect_success(await self.client.call_tool("echo", text=text), text)

    async def _process(self) -> None:
        _expect_success(await self.client.call_tool("count_to", count=PROCESS_COUNT), _numbers(PROCESS_COUNT))

    async def _stream(self) -> None:
        chunks: list[bytes] = []
        result: ToolResult | None = None
        async with self.client.stream_call("count_to", count=STREAM_COUNT) as stream:
            async for event in stream:
                if isinstance(event, OutputChunk) and event.stream == "stdout":
                    chunks.append(event.data)
                elif isinstance(event, ToolResult):
                    result = event
        if result is None:
            raise CallCheckError("the stream ended without a result")
        _expect_success(result, None)
        if b"".join(chunks).decode() != _numbers(STREAM_COUNT):
            raise CallCheckError(f"the streamed chunks ({sum(map(len, chunks))} bytes) are not seq's output")

    async def _list_tools(self) -> None:
        names = {tool.name async for tool in self.client.list_tools()}
        missing = {"echo", "count_to", RELOADED_TOOL} - names
        if missing:
            raise CallCheckError(f"ListTools lacks {sorted(missing)}")

    async def _query_logs(self) -> None:
        # Echo is half the calls: its audit lines are always in the ring, the first one before any client starts.
        page = await self.client.query_logs_page(text="call tool=echo", page_size=20)
        if not page.records:
            raise CallCheckError("QueryLogs found no audit line of echo in the ring")

    async def _refused(self) -> None:
        try:
            result = await self.client.call_tool("echo", text=5)
        except InvalidArgumentError:
            return
        raise CallCheckError(f"echo(text=5) was not refused with INVALID_ARGUMENT: success={result.success}")

    async def _reload(self) -> None:
        self._edits += 1
        await asyncio.to_thread((self.catalog / RELOADED_FILE).write_text, reloaded_tool_yaml(self._edits))
        report = await self.client.reload()
        if not report.success or report.errors:
            raise CallCheckError(f"Reload failed: {[str(error) for error in report.errors]}")
        if RELOADED_TOOL not in report.changed:
            raise CallCheckError(f"Reload did not see the edit of {RELOADED_FILE} (changed: {report.changed})")


def _numbers(count: int) -> str:
    return "".join(f"{n}\n" for n in range(1, count + 1))


def _expect_success(result: ToolResult, output: str | None) -> None:
    if not result.success:
        raise CallCheckError(f"{result.tool}: success=false, {result.error}")
    if output is not None and result.output != output:
        raise CallCheckError(f"{result.tool}: unexpected output {result.output[:80]!r}")


# -- the run ------------------------------------------------------------------------------------------------------


async def _sample(load: Load, server: ServerProcess, metrics_url: str, grpc_reserve: int | None) -> dict[str, int]:
    """The quantities with the load paused: of three reads 0.1 s apart, the smallest of each. `grpc_reserve` is
    the idle server's count of gRPC pool threads (None: this is the idle server's sample)."""
    await load.pause()
    try:
        reads: list[tuple[int, int, int, int]] = []
        for attempt in range(3):
            if attempt:
                await asyncio.sleep(0.1)
            try:
                rss, threads = process_status(server.pid)
                reads.append((rss, open_fds(server.pid), threads, grpc_pool_threads(server.pid)))
            except (ProcessLookupError, FileNotFoundError):
                raise RuntimeError(f"the server exited during the soak:\n{''.join(server.tail)}") from None
        # After /proc: the scrape's own connection must not be counted among the descriptors.
        ring = await asyncio.to_thread(scrape_ring_bytes, metrics_url)
    finally:
        load.resume()
    _, _, threads, grpc_threads = min(reads, key=lambda read: read[2])
    surplus = 0 if grpc_reserve is None else max(0, grpc_threads - grpc_reserve)
    return {"rss_bytes": min(r[0] for r in reads), "open_fds": min(r[1] for r in reads), "threads": threads,
            "grpc_pool_threads": grpc_threads, "grpc_surplus_threads": surplus, "steady_threads": threads - surplus,
            "ring_bytes": ring}


async def wait_for_grpc_reserve(pid: int, reserve: int) -> float | None:
    """Seconds until gRPC's pool is back to `reserve` threads with no load; None when it is not within
    GRPC_SURPLUS_DRAIN_SECONDS."""
    started = time.monotonic()
    while grpc_pool_threads(pid) > reserve:
        if time.monotonic() - started > GRPC_SURPLUS_DRAIN_SECONDS:
            return None
        await asyncio.sleep(0.5)
    return round(time.monotonic() - started, 1)


@dataclass
class Run:
    """What drive() saw: the samples, the load's counts, and how long gRPC's surplus threads took to end."""

    samples: list[dict[str, Any]]
    load: Load
    grpc_reserve: int
    grpc_surplus_drained_seconds: float | None


async def drive(settings: Settings, server: ServerProcess, metrics_url: str, catalog: Path,
                progress: Callable[[str], None]) -> Run:
    """Run the load for `settings.minutes`, sampling every `settings.sample_seconds` from the start (minute 0,
    before the first call) to the end; then wait for gRPC's pool to end the threads it started for the load."""
    count = max(1, round(settings.minutes * 60 / settings.sample_seconds))
    samples: list[dict[str, Any]] = []
    grpc_reserve: int | None = None
    async with AsyncClient(server.target, timeout=30) as client:
        load = Load(client, settings, catalog)
        tasks: list[asyncio.Task[None]] = []
        started = time.monotonic()
        seen_calls, seen_failed = 0, 0
        try:
            for index in range(count + 1):
                await asyncio.sleep(max(0.0, started + index * settings.sample_seconds - time.monotonic()))
                quantities = await _sample(load, server, metrics_url, grpc_reserve)
                if grpc_reserve is None:
                    grpc_reserve = quantities["grpc_pool_threads"]
                calls, failed = sum(load.calls.values()), sum(load.failed.values())
                sample = {"minute": round(index * settings.sample_seconds / 60, 4),
                          "elapsed_seconds": round(time.monotonic() - started, 1), **quantities,
                          "calls": calls - seen_calls, "failures": failed - seen_failed,
                          "cpu_seconds": round(server.cpu_seconds(), 2)}
                seen_calls, seen_failed = calls, failed
                samples.append(sample)
                progress(f"soak: minute {sample['minute']:g}: RSS {sample['rss_bytes'] / 2**20:.1f} MiB, "
                         f"{sample['open_fds']} fds, {sample['threads']} threads ({sample['grpc_surplus_threads']} "
                         f"gRPC surplus), ring {sample['ring_bytes']:,} B, "
                         f"{sample['calls']} calls, {sample['failures']} failed")
                if not tasks:  # the load starts after the idle server's sample
                    load.started = time.monotonic()
                    await load.run("echo")
                    tasks = [asyncio.create_task(load.client_loop(i)) for i in range(settings.clients)]
                    tasks.append(asyncio.create_task(load.reload_loop()))
                    tasks.append(asyncio.create_task(load.fill_pools(
                        FILL_AT * settings.warmup_minutes * 60,
                        lambda: process_status(server.pid)[1] - grpc_pool_threads(server.pid))))
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    assert grpc_reserve is not None  # the first sample sets it
    drained = await wait_for_grpc_reserve(server.pid, grpc_reserve)
    progress(f"soak: gRPC's pool back to {grpc_reserve} threads "
             + (f"{drained} s after the load" if drained is not None
                else f"NOT within {GRPC_SURPLUS_DRAIN_SECONDS:g} s after the load"))
    return Run(samples, load, grpc_reserve, drained)


def run_soak(settings: Settings, progress: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """Start a server with a catalog of its own, drive it, and return the result document."""
    with tempfile.TemporaryDirectory(prefix="toolhost-soak-") as scratch:
        catalog = Path(scratch) / "catalog"
        catalog.mkdir()
        for name, text in CATALOG.items():
            (catalog / name).write_text(text)
        (catalog / RELOADED_FILE).write_text(reloaded_tool_yaml(0))
        # The watcher off: the Reload RPC every reload_seconds is what reads the edited file.
        env = quiet_env(TOOLHOST_DATA_DIR=str(Path(scratch) / "data"),
                        TOOLHOST_LOG_MEMORY_RECORDS=str(settings.ring_records))
        with ServerProcess(toolhost_argv("--catalog-dir", str(catalog), "--watch-catalog", "false"), env=env,
                           cwd=ROOT) as server:
            metrics_url = f"http://127.0.0.1:{wait_for_line(server, TOOLHOST_HTTP).group(1)}/metrics"
            started = time.monotonic()
            run = asyncio.run(drive(settings, server, metrics_url, catalog, progress))
            seconds = time.monotonic() - started
    samples, load = run.samples, run.load
    failures = sum(load.failed.values())
    problems = [] if run.grpc_surplus_drained_seconds is not None else [
        f"gRPC's event-engine threads were not back to the idle server's {run.grpc_reserve} within "
        f"{GRPC_SURPLUS_DRAIN_SECONDS:g} s after the load: its surplus is not the elastic kind the rule leaves out"]
    verdict = judge(samples, settings.warmup_minutes, failures, problems=problems)
    return {
        "written": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "make soak" if settings.minutes == FULL_MINUTES else f"make soak SOAK_MINUTES={settings.minutes:g}",
        "seconds": round(seconds, 1),
        "machine": machine(),
        "settings": asdict(settings),
        "grpc_reserve_threads": run.grpc_reserve,
        "grpc_surplus_drained_seconds": run.grpc_surplus_drained_seconds,
        "samples": samples,
        "calls": {"total": sum(load.calls.values()), "by_kind": dict(sorted(load.calls.items())),
                  "failed_by_kind": dict(sorted(load.failed.items())), "failure_examples": load.failure_examples},
        **verdict,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES") or FULL_MINUTES),
                        help=f"how long the load runs (default SOAK_MINUTES or {FULL_MINUTES:g}); shorter than "
                             f"{FULL_MINUTES:g} is a smoke run")
    parser.add_argument("--sample-seconds", type=float, default=60.0, help="time between samples (default 60)")
    parser.add_argument("--clients", type=int, default=4, help="concurrent clients (default 4)")
    parser.add_argument("--calls-per-second", type=float, default=100.0,
                        help="the clients' pace, all together (default 100)")
    parser.add_argument("--reload-seconds", type=float, default=10.0,
                        help="time between catalog edits with a Reload (default 10)")
    parser.add_argument("--results", type=Path, default=BENCH / "results", help="where the JSON result goes")
    parser.add_argument("--no-docs", action="store_true", help="do not render docs/benchmarks.md (full runs)")
    args = parser.parse_args(argv)
    numbers = (args.minutes, args.sample_seconds, args.clients, args.calls_per_second, args.reload_seconds)
    if not all(math.isfinite(number) and number > 0 for number in numbers):
        parser.error("--minutes, --sample-seconds, --clients, --calls-per-second and --reload-seconds must be "
                     "positive numbers")
    settings = Settings.for_run(args.minutes, args.sample_seconds, args.clients, args.calls_per_second,
                                args.reload_seconds)
    print(f"soak: {settings.minutes:g} minutes, a sample every {settings.sample_seconds:g} s, warm-up "
          f"{settings.warmup_minutes:g} minutes, {settings.clients} clients at {settings.calls_per_second:g} "
          "calls/s", file=sys.stderr, flush=True)
    document = run_soak(settings, lambda line: print(line, file=sys.stderr, flush=True))
    args.results.mkdir(parents=True, exist_ok=True)
    out = args.results / (SOAK_RESULTS if settings.full else SOAK_QUICK_RESULTS)
    out.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    print(f"soak: wrote {out}", file=sys.stderr)
    if settings.full and not args.no_docs:
        render_page(document, args.results)
    for reason in document["reasons"]:
        print(f"soak: {reason}", file=sys.stderr)
    print(f"soak: {document['calls']['total']:,} calls, verdict {document['verdict']}", file=sys.stderr)
    return 0 if document["verdict"] == "passed" else 1


def render_page(soak: dict[str, Any], results: Path) -> None:
    """docs/benchmarks.md again, from the benchmark figures of `results`/latest.json and this soak; the plot is
    left as `make bench` drew it."""
    latest = results / "latest.json"
    if not latest.exists():
        print(f"soak: {latest} is missing (run `make bench`): docs/benchmarks.md left alone", file=sys.stderr)
        return
    page = ROOT / "docs" / "benchmarks.md"
    plot = page.with_suffix(".png")
    write_markdown(json.loads(latest.read_text()), page, plot if plot.exists() else None, soak)
    print(f"soak: wrote {page}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
