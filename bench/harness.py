"""What every benchmark shares: interleaved A/B rounds, medians with spreads, and the Figure each one reports.

A benchmark module exposes `run(quick: bool) -> list[Figure]`. Each Figure pairs a measurement with a baseline
taken in the same run, alternating A, B, A, B... so that this noisy 2-core machine slows both alike; the ratio
is computed per round (A_i / B_i) and its median and spread are what the verdict reads.

    figures = [
        Figure.from_rounds(
            key="call_qps_8_sampled10", title="CallTool(echo) QPS, 8 in flight", unit="QPS",
            measured=toolhost_samples, baseline=bare_samples, baseline_name="bare grpc.aio echo",
            target=Target.ratio_at_least(0.8), command='make bench BENCH_ARGS="--only call_path"',
        )
    ]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
LISTENING = re.compile(r"serving gRPC on 127\.0\.0\.1:(\d+)")


@dataclass(frozen=True)
class Spread:
    """Median and range of a list of samples."""

    median: float
    low: float
    high: float
    samples: list[float]

    @classmethod
    def of(cls, samples: Sequence[float]) -> Spread:
        if not samples:
            raise ValueError("no samples")
        return cls(statistics.median(samples), min(samples), max(samples), [float(s) for s in samples])


@dataclass(frozen=True)
class Target:
    """What a figure must reach. `on` says which number is judged: the ratio to the baseline, or the
    measurement's own median in the figure's unit."""

    on: Literal["ratio", "value"]
    at_least: float | None = None
    at_most: float | None = None

    @classmethod
    def ratio_at_least(cls, bound: float) -> Target:
        return cls("ratio", at_least=bound)

    @classmethod
    def ratio_at_most(cls, bound: float) -> Target:
        return cls("ratio", at_most=bound)

    @classmethod
    def value_at_least(cls, bound: float) -> Target:
        return cls("value", at_least=bound)

    @classmethod
    def value_at_most(cls, bound: float) -> Target:
        return cls("value", at_most=bound)

    def met_by(self, number: float) -> bool:
        if self.at_least is not None and number < self.at_least:
            return False
        return self.at_most is None or number <= self.at_most

    def describe(self, unit: str) -> str:
        suffix = "\u00d7" if self.on == "ratio" else f" {unit}"
        if self.at_least is not None:
            return f"≥ {self.at_least:g}{suffix}"
        return f"≤ {self.at_most:g}{suffix}"


@dataclass(frozen=True)
class Figure:
    """One line of the report: a measurement, its same-run baseline, their ratio and the verdict."""

    key: str
    title: str
    unit: str
    measured: Spread
    baseline: Spread
    baseline_name: str
    ratio: Spread
    target: Target | None
    command: str
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_rounds(
        cls,
        *,
        key: str,
        title: str,
        unit: str,
        measured: Sequence[float],
        baseline: Sequence[float],
        baseline_name: str,
        target: Target | None,
        command: str,
        note: str = "",
        extra: dict[str, Any] | None = None,
    ) -> Figure:
        """`measured[i]` and `baseline[i]` must come from the same round; their ratio is taken per round."""
        if len(measured) != len(baseline):
            raise ValueError(f"{key}: {len(measured)} measured rounds against {len(baseline)} baseline rounds")
        ratios = [m / b for m, b in zip(measured, baseline, strict=True)]
        return cls(key, title, unit, Spread.of(measured), Spread.of(baseline), baseline_name, Spread.of(ratios),
                   target, command, note, extra or {})

    @property
    def judged(self) -> float:
        if self.target is None:
            return self.ratio.median
        return self.ratio.median if self.target.on == "ratio" else self.measured.median

    @property
    def verdict(self) -> str:
        if self.target is None:
            return "reported"
        return "met" if self.target.met_by(self.judged) else "MISSED"

    def as_json(self) -> dict[str, Any]:
        document = asdict(self)
        document["target"] = None if self.target is None else {
            **asdict(self.target), "text": self.target.describe(self.unit)}
        document["verdict"] = self.verdict
        return document


def run_standalone(group: str, run: Callable[[bool], list[Figure]], description: str | None) -> None:
    """`python -m bench.<group> [--quick]`: one group's figures as JSON on stdout, its time on stderr."""
    parser = argparse.ArgumentParser(prog=f"python -m bench.{group}",
                                     description=(description or "").splitlines()[0] if description else None)
    parser.add_argument("--quick", action="store_true", help="fewer rounds and smaller inputs: a smoke run")
    quick = parser.parse_args().quick
    started = time.monotonic()
    figures = run(quick)
    print(json.dumps([figure.as_json() for figure in figures], indent=2, ensure_ascii=False))
    print(f"{group}: {time.monotonic() - started:.1f} s", file=sys.stderr)


def interleave(rounds: int, measure_a: Callable[[], float], measure_b: Callable[[], float]) -> tuple[
        list[float], list[float]]:
    """Runs A then B `rounds` times (B first on odd rounds, so neither always runs on a warmer machine)."""
    a: list[float] = []
    b: list[float] = []
    for i in range(rounds):
        if i % 2:
            b.append(measure_b())
            a.append(measure_a())
        else:
            a.append(measure_a())
            b.append(measure_b())
    return a, b


async def interleave_async(rounds: int, measure_a: Callable[[], Awaitable[float]],
                           measure_b: Callable[[], Awaitable[float]]) -> tuple[list[float], list[float]]:
    """`interleave` for coroutines."""
    a: list[float] = []
    b: list[float] = []
    for i in range(rounds):
        if i % 2:
            b.append(await measure_b())
            a.append(await measure_a())
        else:
            a.append(await measure_a())
            b.append(await measure_b())
    return a, b


def percentile(samples: Sequence[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def timed(action: Callable[[], object], repeat: int) -> list[float]:
    """Seconds each of `repeat` runs of `action` took."""
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return samples


# -- processes ------------------------------------------------------------------------------------------------

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used so far (all threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def rss_bytes(pid: int) -> int:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE


class ServerProcess:
    """A server started as its own process that logs `serving gRPC on 127.0.0.1:PORT` when ready.

    The log keeps being drained in a thread so a chatty server never blocks on a full pipe.
    """

    def __init__(self, argv: Sequence[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
                 ready: re.Pattern[str] = LISTENING, timeout: float = 60.0) -> None:
        self.argv = list(argv)
        self._process = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                         env=env, cwd=cwd)
        self.tail: list[str] = []
        found = self._wait_ready(ready, timeout)
        self.port = int(found.group(1))
        self.target = f"127.0.0.1:{self.port}"

    def _wait_ready(self, ready: re.Pattern[str], timeout: float) -> re.Match[str]:
        assert self._process.stderr is not None
        deadline = time.monotonic() + timeout
        for line in self._process.stderr:
            self.tail = [*self.tail[-19:], line]
            found = ready.search(line)
            if found:
                threading.Thread(target=self._drain, daemon=True).start()
                return found
            if time.monotonic() > deadline:
                break
        self.stop()
        raise RuntimeError(f"{self.argv[:3]} did not start:\n{''.join(self.tail)}")

    def _drain(self) -> None:
        assert self._process.stderr is not None
        for line in self._process.stderr:
            self.tail = [*self.tail[-19:], line]

    @property
    def pid(self) -> int:
        return self._process.pid

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def rss_bytes(self) -> int:
        return rss_bytes(self.pid)

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def toolhost_argv(*args: str) -> list[str]:
    """`toolhost serve` on a free port with its HTTP endpoint on a free port too, run by this interpreter."""
    import sys

    return [sys.executable, "-m", "toolhost_server.cli", "serve", "--grpc-address", "127.0.0.1:0",
            "--http-address", "127.0.0.1:0", *args]


def quiet_env(**overrides: str) -> dict[str, str]:
    """This environment without OTEL_* settings of the caller's, plus `overrides`.

    BENCH_SERVER_PATH, when set, is put first on the servers' PYTHONPATH: the way to measure another version of
    the server with today's harness (a before/after), e.g. from
    `mkdir -p /tmp/old && git archive <commit> server | tar -x -C /tmp/old` and BENCH_SERVER_PATH=/tmp/old/server.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    other_server = os.environ.get("BENCH_SERVER_PATH")
    if other_server:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [other_server, env.get("PYTHONPATH", "")]))
    env.update(overrides)
    return env
