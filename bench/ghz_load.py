"""Driving a gRPC server with ghz, the pinned Go load generator, and checking what it got.

    protoset = build_protoset(scratch / "toolhost.protoset")
    load = ToolhostTarget(server, metrics_url, protoset).load(concurrency=8, seconds=2.5)
    load.qps, load.cpu_us_per_call
    BareTarget(bare_server, protoset).load(8, 2.5)          # the same, checked by ghz's status codes alone
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import resource
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import grpc

from bench.harness import ROOT, ServerProcess
from toolhost.v1 import tool_service_pb2, tool_service_pb2_grpc

GHZ = os.environ.get("GHZ", str(ROOT / ".tools/bin/ghz-v0.93.0"))
TEXT = "hello"
ECHO_COUNTER = re.compile(r'^toolhost_tool_calls_total\{([^}]*)\} ([0-9.e+]+)$', re.MULTILINE)
TOOLHOST_HTTP = re.compile(r"serving HTTP\b.* on 127\.0\.0\.1:(\d+)")
# ghz ends a -z run by closing the connection under the calls still in flight; those come back UNAVAILABLE
# "transport is closing" or CANCELLED, about one per call in flight (a few more were seen: calls starting as the
# connection closes), so up to twice the concurrency is accepted. Any other status is a failure.
CUT_SHORT = ("Unavailable", "Canceled")


@dataclasses.dataclass(frozen=True)
class Load:
    """One load-generator run: successes, wall seconds, and what the server and generator spent on it."""

    ok: int
    seconds: float
    server_calls: int
    server_cpu: float
    loadgen_cpu: float

    @property
    def qps(self) -> float:
        return self.ok / self.seconds

    @property
    def cpu_us_per_call(self) -> float:
        # Per call the server completed, which may exceed `ok` by the few in flight when the generator stopped.
        return self.server_cpu / self.server_calls * 1e6


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_loadgen(argv: list[str]) -> tuple[str, float]:
    """Runs a load generator to completion; its stdout and the CPU seconds it used."""
    before = children_cpu()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{Path(argv[0]).name} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout, children_cpu() - before


def build_protoset(path: Path) -> None:
    # ghz's own .proto parser rejects proto3 `optional`; a compiled descriptor set does not have that problem.
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-Iproto", "--include_imports",
                    f"--descriptor_set_out={path}", "proto/toolhost/v1/tool_service.proto"],
                   cwd=ROOT, check=True)


def wait_for_line(server: ServerProcess, pattern: re.Pattern[str], timeout: float = 15.0) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in server.tail:
            found = pattern.search(line)
            if found:
                return found
        time.sleep(0.05)
    raise RuntimeError(f"no line matching {pattern.pattern!r}:\n{''.join(server.tail)}")


class ToolhostTarget:
    def __init__(self, server: ServerProcess, metrics_url: str, protoset: Path) -> None:
        self.server = server
        self.metrics_url = metrics_url
        self.protoset = protoset

    def check_echo(self) -> None:
        """One echo call read back, so a server that answers without echoing fails loudly (and the echo counter
        exists before the first load compares it)."""
        with grpc.insecure_channel(self.server.target) as channel:
            reply = tool_service_pb2_grpc.ToolServiceStub(channel).CallTool(
                tool_service_pb2.CallToolRequest(name="echo", arguments_json=json.dumps({"text": TEXT})), timeout=10)
        if not reply.success or reply.output != TEXT:
            raise RuntimeError(f"toolhost echo answered {reply}")

    def echo_outcomes(self) -> dict[str, float]:
        """toolhost's own count of echo calls by outcome, from /metrics (read outside the CPU window)."""
        with urllib.request.urlopen(self.metrics_url, timeout=10) as response:
            text = response.read().decode()
        outcomes: dict[str, float] = {}
        for labels, value in ECHO_COUNTER.findall(text):
            pairs = dict(re.findall(r'(\w+)="([^"]*)"', labels))
            if pairs.get("tool") == "echo":
                outcomes[pairs.get("outcome", "?")] = outcomes.get(pairs.get("outcome", "?"), 0.0) + float(value)
        if not outcomes:
            raise RuntimeError(f"no toolhost_tool_calls_total{{tool=\"echo\"}} at {self.metrics_url}")
        return outcomes

    def load(self, concurrency: int, seconds: float) -> Load:
        before = self.echo_outcomes()
        cpu = self.server.cpu_seconds()
        codes, wall, loadgen_cpu = ghz_echo(self.server.target, self.protoset, concurrency, seconds)
        cpu = self.server.cpu_seconds() - cpu
        after = self.echo_outcomes()
        ok = codes.get("OK", 0)
        failures = sum(n for code, n in codes.items() if code not in ("OK", *CUT_SHORT))
        unavailable = sum(codes.get(code, 0) for code in CUT_SHORT)
        server_ok = int(after.get("OK", 0) - before.get("OK", 0))
        server_bad = int(sum(after.values()) - sum(before.values())) - server_ok
        if failures or unavailable > 2 * concurrency or server_bad or server_ok < ok or ok == 0:
            raise RuntimeError(f"toolhost echo calls failed: ghz {codes}, server outcomes {before} -> {after}")
        return Load(ok, wall, server_ok, cpu, loadgen_cpu)


def ghz_echo(target: str, protoset: Path, concurrency: int, seconds: float) -> tuple[dict[str, int], float, float]:
    """ghz CallTool(echo) against `target` for `seconds`: status counts, wall seconds, ghz's CPU seconds."""
    out, loadgen_cpu = run_loadgen([
        GHZ, "--insecure", "--protoset", str(protoset), "--call", "toolhost.v1.ToolService.CallTool",
        "-d", json.dumps({"name": "echo", "arguments_json": json.dumps({"text": TEXT})}),
        "-c", str(concurrency), "--connections", "1", "-z", f"{seconds}s", "-O", "json", target])
    report = json.loads(out)
    return dict(report.get("statusCodeDistribution") or {}), report["total"] / 1e9, loadgen_cpu


class BareTarget:
    """A server without call counters (bench/bare_server.py): ghz's status codes are the check."""

    def __init__(self, server: ServerProcess, protoset: Path) -> None:
        self.server = server
        self.protoset = protoset

    def load(self, concurrency: int, seconds: float) -> Load:
        cpu = self.server.cpu_seconds()
        codes, wall, loadgen_cpu = ghz_echo(self.server.target, self.protoset, concurrency, seconds)
        cpu = self.server.cpu_seconds() - cpu
        ok = codes.get("OK", 0)
        failures = sum(n for code, n in codes.items() if code not in ("OK", *CUT_SHORT))
        if failures or ok == 0 or sum(codes.get(code, 0) for code in CUT_SHORT) > 2 * concurrency:
            raise RuntimeError(f"bare echo calls failed: ghz {codes}")
        return Load(ok, wall, ok, cpu, loadgen_cpu)


class Loadable(Protocol):
    def load(self, concurrency: int, seconds: float) -> Load: ...


def recording_qps(runs: list[Load], side: Loadable, concurrency: int, seconds: float) -> Callable[[], float]:
    """One round of `side` for `interleave`: returns its QPS and keeps the whole Load (for CPU figures)."""
    def measure() -> float:
        runs.append(side.load(concurrency, seconds))
        return runs[-1].qps
    return measure
