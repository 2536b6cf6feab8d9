"""The file search index (issue 19) over a generated tree, each figure against the bare work in the same run.

  index_build_100k     the SearchService's first build of a 100,000-file tree, from start() until its root is no
                       longer `building` (the service's own generation event), against one `rg -l` over the same
                       tree for a word it does not hold (rg reads what the index reads: every text file, every
                       binary file's head). Reported.
  index_size_100k      the index files (search-index.db and its WAL) after that build, against the bytes of the
                       tree's text files; the tree's whole size in `extra`. Reported.
  search_p50_100k      the search tool, invoked in-process as the pipeline does, for five queries from 20 to 2,000
                       matching files, against `rg --no-config -l -i -F` of the same words over the same tree.
                       Target: the issue's, a median under 20 ms.
  search_vs_rg_100k    the same rounds judged on their ratio. Target: the issue's, at least 10x faster (<= 0.1x).
  recent_files_100k    the recent_files tool (the last 7 days, newest 100 of ~2% of the files) against
                       `find ROOT -type f -newermt @EPOCH` run as a subprocess. Target: a median under 20 ms.
  new_file_findable    a file with a new word created, until the search tool finds it (waiting on the service's
                       generation event between searches, never sleeping), against one `rg -l` of such a file's
                       word over the tree. Target: a median under 2 s (the maximum is the row's high).

    .venv/bin/python -m bench.file_search [--quick]      (from the repository root)

The tree: 100,000 files (10,000 in quick mode) in 10 x 10 x 10 nested directories, a quarter one level up. 20% are
text (.py, .md, .txt, .json, .js, .csv, .html, .yaml, 128 B - 32 KiB of words drawn by Zipf's law, query words
planted), the rest binary of assorted kinds (PNG, JPEG, GIF, PDF, MP4, MP3, WAV, ZIP, ELF, raw data behind their
signatures, 256 B - 32 KiB, 0.2% of them 256 KiB - 2 MiB). Modification times spread over the past year. The
service is made as the server makes it (SearchService.from_config, default settings but a rescan every hour so
that no rescan lands in the rounds), the tools run with a ToolServices holding it. Warm page cache throughout.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import os
import random
import secrets
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.harness import Figure, Target, interleave_async, run_standalone
from toolhost_server.config import Config
from toolhost_server.sanitize import LearningRedactor, Redactor
from toolhost_server.search.index_store import FILE_NAME
from toolhost_server.search.service import SearchService
from toolhost_server.tools.base import Tool, ToolContext, ToolOutput, ToolServices
from toolhost_server.tools.file_search import RecentFilesTool, SearchTool

COMMAND = 'make bench BENCH_ARGS="--only file_search"'
MIB = 1024 * 1024
DAY = 86_400.0

# Planted words. The vocabulary has neither q nor z, so none of them occurs in a file by chance, even as a
# substring (which is what rg -F matches).
RARE = "zebracorn"  # in 20 text files
MEDIUM = "quillfeather"  # in 1% of the text files, and in 5 of RARE's
COMMON = "quartzlantern"  # in 10% of the text files
ABSENT = "zyzzyvaquux"  # nowhere: rg's full scan for the build's baseline
QUERIES: tuple[tuple[str, ...], ...] = ((RARE,), ("zebrac",), (MEDIUM,), (MEDIUM, RARE), (COMMON,))

TEXT_EXTENSIONS = (".py", ".md", ".txt", ".json", ".js", ".csv", ".html", ".yaml")
BINARY_HEADS: tuple[tuple[str, bytes], ...] = (
    (".png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"),
    (".jpg", b"\xff\xd8\xff\xe0\x00\x10JFIF\x00"),
    (".gif", b"GIF89a"),
    (".pdf", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"),
    (".mp4", b"\x00\x00\x00\x18ftypmp42"),
    (".mp3", b"ID3\x03\x00\x00\x00"),
    (".wav", b"RIFF\x24\x00\x00\x00WAVEfmt "),
    (".zip", b"PK\x03\x04\x14\x00"),
    (".so", b"\x7fELF\x02\x01\x01\x00"),
    (".bin", b""),
)


@dataclass(frozen=True)
class Plan:
    files: int
    build_rounds: int  # fresh builds, each into an empty data directory
    rounds: int  # rounds of the search and recent_files figures
    calls: int  # consecutive tool calls per query and round; the round's figure is their median
    fresh_rounds: int  # new files made findable, per side


FULL = Plan(files=100_000, build_rounds=3, rounds=9, calls=5, fresh_rounds=9)
QUICK = Plan(files=10_000, build_rounds=2, rounds=3, calls=3, fresh_rounds=3)


@dataclass(frozen=True)
class Tree:
    root: Path
    files: int
    text_files: int
    tree_bytes: int
    text_bytes: int
    directories: list[Path]  # the leaf directories (new files go there)


# -- the tree -------------------------------------------------------------------------------------------------


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    letters = "abcdefghijklmnoprstuvwxy"  # no q, no z: see RARE
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 10))) for _ in range(size)]


def _line_pool(rng: random.Random, lines: int) -> list[str]:
    """Lines of 4-14 words drawn by Zipf's law from 20,000 pseudo-words, as natural text's words are."""
    words = _vocabulary(rng, 20_000)
    weights = list(itertools.accumulate(1.0 / rank for rank in range(1, len(words) + 1)))
    return [" ".join(rng.choices(words, cum_weights=weights, k=rng.randint(4, 14))) for _ in range(lines)]


def _log_uniform(rng: random.Random, low: int, high: int) -> int:
    return int(math.exp(rng.uniform(math.log(low), math.log(high))))


def make_tree(root: Path, files: int) -> Tree:
    rng = random.Random(19)
    leaves = [root / f"d{a}" / f"s{b}" / f"t{c}" for a in range(10) for b in range(10) for c in range(10)]
    for leaf in leaves:
        leaf.mkdir(parents=True, exist_ok=True)
    text_indexes = rng.sample(range(files), files // 5)
    text_set = set(text_indexes)
    planted: dict[int, list[str]] = {}
    for index in rng.sample(text_indexes, 20):
        planted.setdefault(index, []).append(RARE)
    rare_holders = [index for index, words in planted.items() if RARE in words]
    for index in rare_holders[:5]:
        planted[index].append(MEDIUM)
    for index in rng.sample([i for i in text_indexes if i not in planted], max(1, len(text_indexes) // 100) - 5):
        planted.setdefault(index, []).append(MEDIUM)
    for index in rng.sample(text_indexes, len(text_indexes) // 10):
        planted.setdefault(index, []).append(COMMON)
    pool = _line_pool(rng, 40_000)
    noise = os.urandom(4 * MIB)  # binary bodies are slices of this: no NUL-free file by accident
    now = time.time()
    tree_bytes = text_bytes = 0
    for index in range(files):
        directory = leaves[index % len(leaves)]
        if index % 4 == 3:
            directory = directory.parent
        if index in text_set:
            size = _log_uniform(rng, 128, 32 * 1024)
            start = rng.randrange(len(pool))
            lines: list[str] = []
            held = 0
            while held < size:
                line = pool[(start + len(lines)) % len(pool)]
                lines.append(line)
                held += len(line) + 1
            for word in planted.get(index, ()):
                at = rng.randrange(len(lines))
                lines[at] = f"{lines[at]} {word}"
            data = ("\n".join(lines) + "\n").encode()
            path = directory / f"f{index:06}{rng.choice(TEXT_EXTENSIONS)}"
            text_bytes += len(data)
        else:
            extension, head = rng.choice(BINARY_HEADS)
            size = (_log_uniform(rng, 256 * 1024, 2 * MIB) if rng.random() < 0.002
                    else _log_uniform(rng, 256, 32 * 1024))
            body = bytearray()
            while len(body) < size - len(head):
                offset = rng.randrange(len(noise) - 1024)
                body += noise[offset:offset + size - len(head) - len(body)]
            data = head + bytes(body)
            path = directory / f"f{index:06}{extension}"
        path.write_bytes(data)
        tree_bytes += len(data)
        modified = now - rng.uniform(0, 365 * DAY)
        os.utime(path, (modified, modified))
    os.sync()  # the tree's writeback out of the way before the first round
    return Tree(root, files, len(text_indexes), tree_bytes, text_bytes, leaves)


# -- the service and its tools --------------------------------------------------------------------------------


def make_service(tree: Tree, data: Path) -> SearchService:
    """The service as the server makes it (app.py), with the default settings but for the rescan."""
    config = Config(search_roots=(str(tree.root),), data_dir=str(data), search_rescan_seconds=3600.0)
    service = SearchService.from_config(config, LearningRedactor(Redactor(extra_secret_keys=config.redact_keys)))
    assert service is not None
    return service


async def until_built(service: SearchService) -> None:
    """Until no root is `building`: the service's own event (its generation), no polling on a clock."""
    seen = service.generation
    while any(status.state == "building" for status in service.status()):
        seen = await service.changed(seen)


async def until_watching(service: SearchService) -> None:
    seen = service.generation
    while not all(status.watching for status in service.status()):
        if any(status.degraded_reason for status in service.status()):
            raise RuntimeError(f"the tree is not watched: {service.status()}")
        seen = await service.changed(seen)


def index_bytes(data: Path) -> int:
    return sum(path.stat().st_size for path in data.glob(f"{FILE_NAME}*") if not path.name.endswith("-shm"))


def tool_runner(service: SearchService) -> Callable[[type[Tool], dict[str, Any]], Awaitable[ToolOutput]]:
    """A tool's class invoked as the pipeline invokes it, with the service in its ToolServices."""
    services = ToolServices(search=service)
    logger = logging.getLogger("bench.file_search")

    async def invoke(tool: type[Tool], arguments: dict[str, Any]) -> ToolOutput:
        output = await tool().run(arguments, ToolContext("bench", tool.name, 120.0, logger, services=services))
        assert isinstance(output, ToolOutput)
        return output

    return invoke


async def command_lines(*argv: str) -> list[str]:
    process = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE)
    stdout, _ = await process.communicate()
    if process.returncode not in (0, 1):  # rg: 1 is "nothing found"
        raise RuntimeError(f"{argv[:3]} exited with {process.returncode}")
    return stdout.decode().splitlines()


async def rg_files(rg: str, words: Sequence[str], root: Path) -> set[str]:
    """The files holding every word (case-insensitive, as a substring): rg -l over the tree for the first word,
    then over the files it listed for each next one."""
    found = await command_lines(rg, "--no-config", "-l", "-i", "-F", "-e", words[0], "--", str(root))
    for word in words[1:]:
        if not found:
            break
        found = await command_lines(rg, "--no-config", "-l", "-i", "-F", "-e", word, "--", *found)
    return set(found)


async def seconds(action: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await action()
    return time.perf_counter() - started


def ms(samples: Sequence[float]) -> list[float]:
    return [sample * 1e3 for sample in samples]


# -- the figures ----------------------------------------------------------------------------------------------


async def measure_build(plan: Plan, tree: Tree, scratch: Path, rg: str) -> tuple[list[Figure], SearchService]:
    """Fresh builds against rg's full scan, interleaved; the last build's service stays open for the others."""
    builds: list[float] = []
    scans: list[float] = []
    sizes: list[int] = []
    kept: SearchService | None = None

    async def build(round_index: int) -> None:
        nonlocal kept
        if kept is not None:
            await kept.close()
        data = scratch / f"data{round_index}"
        shutil.rmtree(scratch / f"data{round_index - 1}", ignore_errors=True)
        service = make_service(tree, data)
        started = time.perf_counter()
        await service.start()
        async with asyncio.timeout(1800):  # a builder that died leaves the root building
            await until_built(service)
        builds.append(time.perf_counter() - started)
        sizes.append(index_bytes(data))
        [status] = service.status()
        assert status.files == tree.files, f"{status.files} files indexed of {tree.files}"
        kept = service

    async def scan() -> None:
        scans.append(await seconds(lambda: rg_files(rg, (ABSENT,), tree.root)))

    await scan()  # the page cache warmed with the whole tree, once, outside the rounds
    scans.clear()
    for round_index in range(plan.build_rounds):  # B first on odd rounds, as harness.interleave does
        if round_index % 2:
            await scan()
        await build(round_index)
        if not round_index % 2:
            await scan()
    assert kept is not None
    label = f"{tree.files:,}-file tree"
    text_mb = tree.text_bytes / 1e6
    figures = [
        Figure.from_rounds(
            key="index_build_100k", title=f"search index, first build of a {label}", unit="s",
            measured=builds, baseline=scans, baseline_name=f"rg --no-config -l -i -F over the tree ({ABSENT})",
            target=None, command=COMMAND,
            note=(f"SearchService.start() until its root is no longer building (its generation event), an empty "
                  f"data directory each time; the tree: {tree.text_files:,} text files ({text_mb:.0f} MB) and "
                  f"{tree.files - tree.text_files:,} binary ones, {tree.tree_bytes / 1e6:.0f} MB in all; rg reads "
                  f"the same bytes (text files whole, binary heads) with 2 threads, the builder with one; "
                  f"{plan.build_rounds} interleaved rounds, warm page cache")),
        Figure.from_rounds(
            key="index_size_100k", title=f"search index size, {label}", unit="MB",
            measured=[size / 1e6 for size in sizes], baseline=[text_mb] * len(sizes),
            baseline_name="the text files' bytes", target=None, command=COMMAND,
            note=(f"search-index.db and its WAL after each build; the whole tree is {tree.tree_bytes / 1e6:.0f} MB, "
                  f"so the index is {statistics.median(sizes) / tree.tree_bytes:.1%} of it"),
            extra={"tree_bytes": tree.tree_bytes, "text_bytes": tree.text_bytes, "index_bytes": sizes}),
    ]
    return figures, kept


async def measure_search(plan: Plan, tree: Tree, service: SearchService, rg: str) -> list[Figure]:
    invoke = tool_runner(service)
    expected: dict[tuple[str, ...], set[str]] = {}
    by_query: dict[tuple[str, ...], list[float]] = {query: [] for query in QUERIES}

    async def search(query: tuple[str, ...]) -> list[str]:
        output = await invoke(SearchTool, {"query": " ".join(query), "scope": str(tree.root), "limit": 100})
        return [entry["path"] for entry in output.structured["results"]]

    for query in QUERIES:  # what each query must answer, checked once; also warms both sides
        expected[query] = await rg_files(rg, query, tree.root)
        found = await search(query)
        assert len(found) == min(100, len(expected[query])) and set(found) <= expected[query], (query, found[:3])

    async def tool_round() -> float:
        medians = []
        for query in QUERIES:
            samples = []
            for _ in range(plan.calls):
                started = time.perf_counter()
                found = await search(query)
                samples.append(time.perf_counter() - started)
                assert len(found) == min(100, len(expected[query]))
            by_query[query] += samples
            medians.append(statistics.median(samples))
        return statistics.median(medians)

    async def rg_round() -> float:
        times = []
        for query in QUERIES:
            started = time.perf_counter()
            found = await rg_files(rg, query, tree.root)
            times.append(time.perf_counter() - started)
            assert found == expected[query]
        return statistics.median(times)

    measured, baseline = await interleave_async(plan.rounds, tool_round, rg_round)
    every_call = [sample for samples in by_query.values() for sample in samples]
    per_query = {" ".join(query): round(statistics.median(samples) * 1e3, 2) for query, samples in by_query.items()}
    counts = {" ".join(query): len(files) for query, files in expected.items()}
    slowest = max(per_query, key=lambda query: per_query[query])
    label = f"{tree.files:,}-file tree"
    described = ", ".join(f"`{query}` ({counts[query]:,} files, {per_query[query]:g} ms)" for query in per_query)
    extra = {"per_query_p50_ms": per_query, "matching_files": counts,
             "all_calls_p50_ms": statistics.median(every_call) * 1e3, "all_calls_max_ms": max(every_call) * 1e3}
    how = (f"the search tool invoked in-process (arguments, scope check, the service's query, each result checked "
           f"to be there still), limit 100, for 5 queries: {described}; a round's figure is the median over the "
           f"queries of {plan.calls} consecutive calls each; rg: one run per query (a second rg over the files the "
           f"first listed for the two-word query), the median over the queries; {plan.rounds} interleaved rounds, "
           f"warm page cache; all {len(every_call)} calls: p50 {statistics.median(every_call) * 1e3:.1f} ms, max "
           f"{max(every_call) * 1e3:.1f} ms, slowest query `{slowest}`")

    def figure(key: str, title: str, target: Target, note: str) -> Figure:
        return Figure.from_rounds(key=key, title=title, unit="ms", measured=ms(measured), baseline=ms(baseline),
                                  baseline_name="rg --no-config -l -i -F, same words", target=target,
                                  command=COMMAND, note=note, extra=extra)

    return [
        figure("search_p50_100k", f"search tool p50 over a {label}", Target.value_at_most(20.0), how),
        figure("search_vs_rg_100k", f"search tool against rg -l over a {label}: ≥ 10× faster",
               Target.ratio_at_most(0.1), "the rounds of `search_p50_100k`, judged on their ratio to rg (0.1× is "
               "10× faster)"),
    ]


async def measure_recent(plan: Plan, tree: Tree, service: SearchService) -> Figure:
    invoke = tool_runner(service)
    find = shutil.which("find")
    assert find is not None, "the bench needs find (findutils)"
    since = datetime.now(UTC).replace(microsecond=0) - timedelta(days=7)
    arguments = {"scope": str(tree.root), "since": since.isoformat().replace("+00:00", "Z"), "limit": 100}
    listed: set[str] = set()

    async def tool() -> None:
        output = await invoke(RecentFilesTool, arguments)
        found = [entry["path"] for entry in output.structured["results"]]
        modified = [entry["modified"] for entry in output.structured["results"]]
        assert len(found) == min(100, len(listed)) and set(found) <= listed and modified == sorted(modified,
                                                                                                  reverse=True)

    async def direct() -> None:
        found = await command_lines(find, str(tree.root), "-type", "f", "-newermt", f"@{since.timestamp():.0f}")
        listed.update(found)

    await direct()
    matching = len(listed)
    await tool()
    measured, baseline = await interleave_async(
        plan.rounds, lambda: median_seconds(plan.calls, tool), lambda: median_seconds(plan.calls, direct))
    return Figure.from_rounds(
        key="recent_files_100k", title=f"recent_files tool p50 over a {tree.files:,}-file tree", unit="ms",
        measured=ms(measured), baseline=ms(baseline), baseline_name="find ROOT -type f -newermt DATE (a subprocess)",
        target=Target.value_at_most(20.0), command=COMMAND,
        note=(f"the files modified in the last 7 days ({matching:,} of {tree.files:,}), the newest 100 returned, "
              f"the tool invoked in-process; find lists them all, unsorted, fork and exec included; "
              f"{plan.rounds} interleaved rounds of {plan.calls} consecutive runs per side, each round's median"))


async def median_seconds(runs: int, action: Callable[[], Awaitable[object]]) -> float:
    return statistics.median([await seconds(action) for _ in range(runs)])


async def measure_new_file(plan: Plan, tree: Tree, service: SearchService, rg: str) -> Figure:
    """A new file with a word of its own, until a search finds it: the index's watcher, debounce and update."""
    invoke = tool_runner(service)
    rng = random.Random(1919)
    await until_watching(service)

    def create(side: str, round_index: int) -> tuple[str, Path]:
        word = f"fresh{side}{round_index}x{secrets.token_hex(4)}"
        path = rng.choice(tree.directories) / f"new_{word}.txt"
        path.write_text(f"a new note about {word}\n")
        return word, path

    async def indexed() -> float:
        started = time.perf_counter()
        word, path = create("i", len(found_after))
        async with asyncio.timeout(60):
            while True:
                seen = service.generation  # read before the search: a change applied meanwhile is not missed
                output = await invoke(SearchTool, {"query": word, "scope": str(tree.root), "limit": 10})
                if [entry["path"] for entry in output.structured["results"]] == [str(path)]:
                    break
                await service.changed(seen)
        found_after.append(time.perf_counter() - started)
        return found_after[-1]

    async def scanned() -> float:
        started = time.perf_counter()
        word, path = create("r", len(scans))
        assert await rg_files(rg, (word,), tree.root) == {str(path)}
        scans.append(time.perf_counter() - started)
        return scans[-1]

    found_after: list[float] = []
    scans: list[float] = []
    measured, baseline = await interleave_async(plan.fresh_rounds, indexed, scanned)
    return Figure.from_rounds(
        key="new_file_findable", title="a new file findable by search", unit="ms",
        measured=ms(measured), baseline=ms(baseline), baseline_name="one rg -l over the tree, which finds it at once",
        target=Target.value_at_most(2000.0), command=COMMAND,
        note=(f"a file with a word of its own written into a directory of the {tree.files:,}-file tree, timed from "
              f"before the write until the search tool returns it, searching again at each step of the service's "
              f"generation (watch_debounce_ms {service.debounce_ms}); the target is judged on the median, the "
              f"maximum of {plan.fresh_rounds} rounds is {max(measured) * 1e3:.0f} ms; the baseline is the cost of "
              f"finding such a file without an index: one rg over the whole tree"))


def run(quick: bool) -> list[Figure]:
    plan = QUICK if quick else FULL
    rg = shutil.which("rg")
    assert rg is not None, "the bench needs ripgrep"
    scratch = Path(tempfile.mkdtemp(prefix="toolhost-bench-search-"))
    try:
        tree = make_tree(scratch / "tree", plan.files)

        async def measure_all() -> list[Figure]:
            figures, service = await measure_build(plan, tree, scratch, rg)
            try:
                figures += await measure_search(plan, tree, service, rg)
                figures.append(await measure_recent(plan, tree, service))
                figures.append(await measure_new_file(plan, tree, service, rg))
            finally:
                await service.close()
            return figures

        return asyncio.run(measure_all())
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(scratch)


if __name__ == "__main__":
    run_standalone("file_search", run, __doc__)
