"""Local costs of three server parts, each against the bare work in the same run, in interleaved rounds.

  process_runner_true  one call of a process tool running `true` through the process runner, built from a tool
                       definition and invoked as the pipeline does, against asyncio.create_subprocess_exec("true")
                       + wait; both as this user. Per-call medians. When run as root, also both as the root
                       server's default process_user (nobody), in `extra`.
  log_tail_1gib        the last 200 records of a 1 GiB JSON log through the file log reader, against the same
                       query on a 1 MiB log. Also a curve of the tail time over 1 MiB ... 1 GiB.
  redaction_1mb        redact_value of a ~1 MB nested tool output with a few secrets, through the per-call
                       redactor the pipeline derives (LearningRedactor.learn), in MB/s of the structure's JSON
                       text, against json.dumps of the same structure.

    .venv/bin/python -m bench.local_costs [--quick]      (from the repository root)

Quick mode runs fewer rounds and a 64 MiB log instead of 1 GiB.
"""

from __future__ import annotations

import asyncio
import functools
import json
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import Figure, Target, interleave, interleave_async, run_standalone, timed
from toolhost_server.config import Config
from toolhost_server.logs.file_reader import FileLogReader
from toolhost_server.logs.query import LogQuery
from toolhost_server.model import ToolSource, ToolSpec
from toolhost_server.runners import Invocation, Runner, RunnerSettings, build_runner
from toolhost_server.sanitize import LearningRedactor, Redactor
from toolhost_server.schema import derive_input_schema

COMMAND = 'make bench BENCH_ARGS="--only local_costs"'
MIB = 1024 * 1024


@dataclass(frozen=True)
class Plan:
    rounds: int
    rounds_runner: int
    runner_calls: int  # consecutive calls per round and side
    tail_reads: int  # reads per round and side
    log_bytes: int  # the big log: the last size of the curve
    curve_bytes: tuple[int, ...]  # the sizes of the tail curve (the small log is the first)
    redaction_runs: int  # runs per round and side


FULL = Plan(rounds=7, rounds_runner=40, runner_calls=8, tail_reads=15, log_bytes=1024 * MIB,
            curve_bytes=(MIB, 16 * MIB, 256 * MIB, 1024 * MIB), redaction_runs=5)
QUICK = Plan(rounds=3, rounds_runner=12, runner_calls=5, tail_reads=5, log_bytes=64 * MIB,
             curve_bytes=(MIB, 16 * MIB, 64 * MIB), redaction_runs=2)


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


def by_round(samples: list[float], rounds: int, scale: Callable[[list[float]], float] = median_ms) -> list[float]:
    """`samples` cut into `rounds` consecutive rounds, each reduced by `scale` (default: its median in ms)."""
    size = len(samples) // rounds
    return [scale(samples[i * size:(i + 1) * size]) for i in range(rounds)]


def alternating(rounds: int, each: int, a: Callable[[], object], b: Callable[[], object]) -> tuple[
        list[float], list[float]]:
    """Seconds of `rounds * each` runs of `a` and of `b`, alternating run by run (harness.interleave): the
    noise of a machine shared with other benchmarks then hits both sides alike, even within a round."""
    return interleave(rounds * each, lambda: timed(a, 1)[0], lambda: timed(b, 1)[0])


# --- process runner -------------------------------------------------------------------------------------------

def true_tool() -> ToolSpec:
    return ToolSpec(name="true", description="Runs true.", input_schema=derive_input_schema(()),
                    runner={"type": "process", "argv": ["true"]}, source=ToolSource.CATALOG, origin="bench")


async def _calls_ms(calls: int, call: Callable[[], Awaitable[object]]) -> float:
    """The median milliseconds of `calls` consecutive awaits of `call()`."""
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - started)
    return median_ms(samples)


async def _runner_rounds(plan: Plan, identity: tuple[int, int] | None) -> tuple[list[float], list[float]]:
    """Per-round medians (ms) of the runner's and of bare asyncio's calls running `true` as `identity` (None: this
    user). A round is `runner_calls` consecutive calls of each: what a call leaves to the runner's worker thread
    (removing its directory) is then paid by the next runner call, not by a bare one."""
    tool = true_tool()
    runner: Runner = build_runner(tool, RunnerSettings(process_identity=identity))
    user = {} if identity is None else {"user": identity[0], "group": identity[1], "extra_groups": []}

    async def via_runner() -> None:
        outcome = await runner.run(Invocation(tool, {}, "bench-call", 30.0))
        assert outcome.failure is None and outcome.exit_code == 0, outcome

    async def bare() -> None:
        process = await asyncio.create_subprocess_exec("true", **user)
        assert await process.wait() == 0

    for _ in range(5):  # warm up: imports, the child watcher, the subreaper setting
        await via_runner()
        await bare()
    return await interleave_async(plan.rounds_runner, functools.partial(_calls_ms, plan.runner_calls, via_runner),
                                  functools.partial(_calls_ms, plan.runner_calls, bare))


def process_runner(plan: Plan) -> Figure:
    measured, baseline = asyncio.run(_runner_rounds(plan, None))
    extra: dict[str, Any] = {}
    # A root server runs process tools as `nobody` (process_user): measured too, against bare asyncio doing the
    # same user switch, which costs both a fork() where vfork() served (CPython uses no vfork to switch users).
    nobody = Config().process_identity()
    if nobody is not None and plan is not QUICK:
        as_user, bare_as_user = asyncio.run(_runner_rounds(plan, nobody))
        ratios = [a / b for a, b in zip(as_user, bare_as_user, strict=True)]
        extra["as_process_user"] = {"uid": nobody[0], "toolhost_ms": round(statistics.median(as_user), 3),
                                    "baseline_ms": round(statistics.median(bare_as_user), 3),
                                    "ratio": round(statistics.median(ratios), 3)}
    return Figure.from_rounds(
        key="process_runner_true", title="Process runner call of `true`, per call", unit="ms",
        measured=measured, baseline=baseline, baseline_name='asyncio.create_subprocess_exec("true") + wait',
        target=Target.ratio_at_most(1.5), command=COMMAND,
        note=(f"median of {plan.runner_calls} consecutive calls per round and side, {plan.rounds_runner} "
              "interleaved rounds; the runner call includes its temporary directory, output pipes and "
              "leftover check; both as the server's own user (a non-root server, or run_as_server_user); "
              "extra.as_process_user: both as the root server's default process_user, where CPython forks "
              "instead of vforking"),
        extra=extra)


# --- log tail --------------------------------------------------------------------------------------------------

LOGGERS = ("toolhost.calls", "toolhost.audit", "toolhost.reload", "toolhost.api", "toolhost.runners.process")
TOOLS = ("echo", "dns_lookup", "tcp_port_check", "disk_free", "http_get", "ping")


def log_block(rng: random.Random, size: int) -> bytes:
    """About `size` bytes of JSON log lines as the server writes them, newest last."""
    lines = []
    total = 0
    second = 0
    while total < size:
        second += rng.randrange(3)
        moment = f"2025-03-01T{(second // 3600) % 24:02d}:{(second // 60) % 60:02d}:{second % 60:02d}." \
                 f"{rng.randrange(10**6):06d}Z"
        tool = rng.choice(TOOLS)
        entry: dict[str, Any] = {
            "time": moment, "level": rng.choice(("INFO", "INFO", "INFO", "DEBUG", "WARNING")),
            "logger": rng.choice(LOGGERS),
            "message": f"call {tool} finished in {rng.randrange(1, 900)} ms with status "
                       f"{rng.choice(('OK', 'OK', 'TIMEOUT'))}",
            "trace_id": f"{rng.getrandbits(128):032x}", "span_id": f"{rng.getrandbits(64):016x}",
            "tool": tool, "call_id": f"{rng.getrandbits(64):016x}", "caller": rng.choice(("agent-1", "ci", "ops")),
        }
        line = (json.dumps(entry) + "\n").encode()
        lines.append(line)
        total += len(line)
    return b"".join(lines)


def grow(path: Path, block: bytes, size: int) -> None:
    """Append whole blocks of log lines to `path` until it holds at least `size` bytes."""
    with open(path, "ab") as handle:
        while handle.tell() < size:
            handle.write(block)


def tail_reader(path: Path, readers: list[FileLogReader]) -> Callable[[], object]:
    """The read of the last 200 records of `path`, by a reader added to `readers` (to close)."""
    reader = FileLogReader([str(path)])
    readers.append(reader)

    def read() -> object:
        result = reader.read(LogQuery(limit=200))
        assert len(result.records) == 200, len(result.records)
        return result

    return read


def log_tail(plan: Plan) -> Figure:
    rng = random.Random(11)
    block = log_block(rng, MIB)
    directory = Path(tempfile.mkdtemp(prefix="toolhost-bench-logs-"))
    readers: list[FileLogReader] = []
    writing = 0.0
    try:
        small, big = directory / "small.log", directory / "big.log"
        grow(small, block, plan.curve_bytes[0])
        read_small = tail_reader(small, readers)
        curve: dict[str, list[float]] = {"x": [], "toolhost": [], "baseline": []}
        for size in plan.curve_bytes:
            started = time.perf_counter()
            grow(big, block, size)
            writing += time.perf_counter() - started
            read_big = tail_reader(big, readers)
            read_big(), read_small()  # warm up: open both
            a, b = alternating(1, plan.tail_reads, read_big, read_small)
            curve["x"].append(size / MIB)
            curve["toolhost"].append(round(median_ms(a), 3))
            curve["baseline"].append(round(median_ms(b), 3))
        a, b = alternating(plan.rounds, plan.tail_reads, read_big, read_small)
        measured, baseline = by_round(a, plan.rounds), by_round(b, plan.rounds)
        big_size = big.stat().st_size
    finally:
        for reader in readers:
            reader.close()
        shutil.rmtree(directory, ignore_errors=True)
    label = f"{big_size / MIB / 1024:.0f} GiB" if big_size >= 1024 * MIB else f"{big_size / MIB:.0f} MiB"
    quick = " (quick mode: 64 MiB, not 1 GiB)" if plan.log_bytes < 1024 * MIB else ""
    return Figure.from_rounds(
        key="log_tail_1gib", title=f"Last 200 records of a {label} log file", unit="ms",
        measured=measured, baseline=baseline, baseline_name="the same query on a 1 MiB log",
        target=Target.ratio_at_most(2.0), command=COMMAND,
        note=(f"FileLogReader.read(LogQuery(limit=200)), median of {plan.tail_reads} reads per round, "
              f"{plan.rounds} rounds, big and small alternating read by read{quick}; JSON lines as the server "
              f"writes them, a 1 MiB block repeated; page cache warm (the files were just written, in "
              f"{writing:.2f} s)"),
        extra={"file_bytes": big_size, "curve": {**curve, "x_label": "log file size (MiB)",
                                                 "y_label": "tail of 200 records (ms)"}})


# --- redaction -------------------------------------------------------------------------------------------------

KNOWN = "s3cr3t-canary-value"
WORDS = [
    "status", "ready", "primary", "index", "value", "count", "result", "item", "name", "user", "email",
    "description", "latency", "http", "response", "server", "client", "request", "the", "quick", "brown",
    "fox", "jumps", "over", "lazy", "dog", "ok", "error", "warning", "info", "debug", "cache", "hit", "miss",
    "region", "zone", "node", "pod", "container", "image", "tag", "deploy", "build",
]


def tool_output(rng: random.Random, records: int, secrets: bool) -> list[dict[str, Any]]:
    """Structured tool output as an AI tool server sees it: records with counts, ids, texts, nested metadata,
    keys that merely mention secret words (max_tokens, primary_key), and with `secrets` one record in 200
    holding a password key, a URL with a password and the call's credential."""
    data = []
    for i in range(records):
        record: dict[str, Any] = {
            "id": i,
            "name": f"{rng.choice(WORDS)}-{i}",
            "status": rng.choice(WORDS),
            "max_tokens": 1024,
            "token_count": rng.randrange(5000),
            "description": " ".join(rng.choice(WORDS) for _ in range(10)),
            "tags": [rng.choice(WORDS) for _ in range(3)],
            "metadata": {"primary_key": i, "sort_key": f"k{i:06d}", "score": round(rng.random(), 4),
                         "enabled": i % 2 == 0, "owner": None},
        }
        if secrets and i % 200 == 0:
            record["metadata"]["DB_PASSWORD"] = "hunter2hunter2"
            record["description"] += f" connect with postgres://app:pw{i}@db/app using {KNOWN}"
        data.append(record)
    return data


def call_redactor() -> Redactor:
    """The redactor a call gets in the pipeline: the server's, having learned the call's credential."""
    return LearningRedactor(Redactor()).learn([KNOWN])


def redaction(plan: Plan) -> Figure:
    rng = random.Random(7)
    redactor = call_redactor()
    data = tool_output(rng, 3300, secrets=True)
    clean = tool_output(rng, 3300, secrets=False)
    megabytes = len(json.dumps(data).encode()) / 1e6
    clean_megabytes = len(json.dumps(clean).encode()) / 1e6
    result = redactor.redact_value(data)
    text = json.dumps(result.value)
    assert result.redacted and KNOWN not in text and "hunter2hunter2" not in text and ":pw0@" not in text
    assert redactor.redact_value(clean).value is clean

    def speed(size: float) -> Callable[[list[float]], float]:
        return lambda seconds: size / statistics.median(seconds)

    for _ in range(2):  # warm up
        redactor.redact_value(data), json.dumps(data)
    a, b = alternating(plan.rounds, plan.redaction_runs, functools.partial(redactor.redact_value, data),
                       functools.partial(json.dumps, data))
    measured, baseline = by_round(a, plan.rounds, speed(megabytes)), by_round(b, plan.rounds, speed(megabytes))
    clean_seconds, _ = alternating(plan.rounds, plan.redaction_runs, functools.partial(redactor.redact_value, clean),
                                   functools.partial(json.dumps, clean))
    return Figure.from_rounds(
        key="redaction_1mb", title=f"Redaction of a {megabytes:.2f} MB nested tool output", unit="MB/s",
        measured=measured, baseline=baseline, baseline_name="json.dumps of the same structure",
        target=Target.value_at_least(60), command=COMMAND,
        note=(f"3,300 records, 17 of them with a secret key, a URL password and the call's credential; MB are "
              f"bytes of the structure's JSON text; median of {plan.redaction_runs} runs per round, {plan.rounds} "
              f"rounds, redaction and json.dumps alternating run by run; ratio is redaction speed / json.dumps "
              f"speed"),
        extra={"no_secrets_mb_s": round(clean_megabytes / statistics.median(clean_seconds), 1)})


def run(quick: bool) -> list[Figure]:
    plan = QUICK if quick else FULL
    return [process_runner(plan), log_tail(plan), redaction(plan)]


if __name__ == "__main__":
    run_standalone("local_costs", run, __doc__)
