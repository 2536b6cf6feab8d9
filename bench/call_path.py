"""CallTool(echo) through toolhost against a bare grpc.aio echo server with the same messages.

Figures:

- `call_qps_8_sampled10`, `call_qps_32_sampled10`: requests per second with 8 (32) in flight from ghz (one
  HTTP/2 connection, its own process), toolhost exporting spans over OTLP to a receiver in this process with a
  parent-based 10% sampler. Target ≥ 0.8 of the bare server.
- `call_qps_8_all_sampled`: the same with every call sampled and exported. Target ≥ 0.65.
- `call_cpu`: the server's CPU time (all threads, /proc) per call over the `call_qps_8_sampled10` rounds,
  against the bare server's. Target ≤ 200 µs.
- `call_latency_python_client`: p50 of sequential calls from the Python client (toolhost's `AsyncClient`) against
  the generated stub on the bare server: what an agent in Python waits per call. Reported.

Each figure's rounds alternate toolhost and bare (A, B, B, A...). Every toolhost success is checked against its
own /metrics counter; the receiver must have received the spans the sampler promised.

    make bench BENCH_ARGS="--only call_path"        # or: .venv/bin/python -m bench.call_path [--quick]
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from bench.ghz_load import (
    GHZ,
    TEXT,
    TOOLHOST_HTTP,
    BareTarget,
    Load,
    ToolhostTarget,
    build_protoset,
    recording_qps,
    wait_for_line,
)
from bench.harness import (
    BENCH,
    ROOT,
    Figure,
    ServerProcess,
    Target,
    interleave,
    interleave_async,
    quiet_env,
    run_standalone,
    toolhost_argv,
)
from toolhost import AsyncClient
from toolhost.v1 import tool_service_pb2, tool_service_pb2_grpc

COMMAND = 'make bench BENCH_ARGS="--only call_path"'
QUICK_COMMAND = 'make bench BENCH_ARGS="--only call_path --quick"'
BARE = "bare grpc.aio echo (bench/bare_server.py)"
EXPORTED = 1.5  # seconds after which the spans of the calls so far have reached the receiver


class SpanReceiver(trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
    """An OTLP/gRPC trace receiver that counts the spans it is sent, as a collector would receive them."""

    def __init__(self) -> None:
        self.spans = 0

    async def Export(self, request: Any, context: Any) -> Any:
        self.spans += sum(len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans)
        return trace_service_pb2.ExportTraceServiceResponse()


class ReceiverThread:
    """The receiver's own grpc.aio server on its own event loop, in a thread of this process."""

    def __init__(self) -> None:
        self.receiver = SpanReceiver()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.port = 0
        self._thread = threading.Thread(target=self._run, name="otlp-receiver", daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the OTLP receiver did not start")

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._start())
        self._loop.run_forever()

    async def _start(self) -> None:
        self._server = grpc.aio.server()
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self.receiver, self._server)
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        await self._server.start()
        self._ready.set()

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._server.stop(0), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def tracing_env(receiver_port: int, sampler: str, ratio: str = "") -> dict[str, str]:
    # A 1 s export delay (the SDK's default is 5 s) so that counting the spans that arrived needs short waits;
    # under load the batch processor exports whenever 512 spans wait anyway.
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver_port}", "OTEL_TRACES_SAMPLER": sampler,
           "OTEL_EXPORTER_OTLP_INSECURE": "true", "OTEL_BSP_SCHEDULE_DELAY": "1000"}
    if ratio:
        env["OTEL_TRACES_SAMPLER_ARG"] = ratio
    return env


def start_toolhost(data_dir: Path, env: dict[str, str], protoset: Path) -> ToolhostTarget:
    server = ServerProcess(toolhost_argv("--watch-catalog", "false"),
                           env=quiet_env(TOOLHOST_DATA_DIR=str(data_dir), **env), cwd=ROOT)
    port = wait_for_line(server, TOOLHOST_HTTP).group(1)
    target = ToolhostTarget(server, f"http://127.0.0.1:{port}/metrics", protoset)
    target.check_echo()
    return target


def qps_figure(key: str, title: str, toolhost: ToolhostTarget, bare: BareTarget, concurrency: int, rounds: int,
               seconds: float, target: Target, note: str) -> tuple[Figure, dict[str, list[Load]]]:
    runs: dict[str, list[Load]] = {"toolhost": [], "bare": []}
    measured, baseline = interleave(rounds, recording_qps(runs["toolhost"], toolhost, concurrency, seconds),
                                    recording_qps(runs["bare"], bare, concurrency, seconds))
    extra = {
        "concurrency": concurrency, "seconds_per_round": seconds,
        "server_cpu_us_per_call": {name: [round(r.cpu_us_per_call, 1) for r in rs] for name, rs in runs.items()},
        "loadgen_cores_busy": {name: [round(r.loadgen_cpu / r.seconds, 2) for r in rs] for name, rs in runs.items()},
    }
    return Figure.from_rounds(key=key, title=title, unit="QPS", measured=measured, baseline=baseline,
                              baseline_name=BARE, target=target, command=COMMAND, note=note, extra=extra), runs


async def python_client_figure(toolhost: ToolhostTarget, bare: BareTarget, rounds: int, calls: int) -> Figure:
    async with AsyncClient(toolhost.server.target) as client, \
            grpc.aio.insecure_channel(bare.server.target) as channel:
        stub = tool_service_pb2_grpc.ToolServiceStub(channel)
        request = tool_service_pb2.CallToolRequest(name="echo", arguments_json=json.dumps({"text": TEXT}))

        async def toolhost_round() -> float:
            samples = []
            for _ in range(calls):
                started = time.perf_counter()
                result = await client.call_tool("echo", {"text": TEXT})
                samples.append(time.perf_counter() - started)
                if result.output != TEXT:
                    raise RuntimeError(f"toolhost echo answered {result}")
            return statistics.median(samples) * 1e6

        async def bare_round() -> float:
            samples = []
            for _ in range(calls):
                started = time.perf_counter()
                await stub.CallTool(request)
                samples.append(time.perf_counter() - started)
            return statistics.median(samples) * 1e6

        await toolhost_round()
        await bare_round()
        measured, baseline = await interleave_async(rounds, toolhost_round, bare_round)
    return Figure.from_rounds(
        key="call_latency_python_client", title="CallTool(echo) p50 latency from the Python client, one at a time",
        unit="µs", measured=measured, baseline=baseline, baseline_name=f"{BARE}, generated stub", target=None,
        command=COMMAND, note=f"{calls} sequential calls per round from this process; tracing sampled at 10%.")


def run(quick: bool) -> list[Figure]:
    if not Path(GHZ).exists():
        raise RuntimeError(f"{GHZ} is missing: `make bench` installs it (or set GHZ)")
    rounds = 2 if quick else 5
    seconds = 0.5 if quick else 2.0
    with tempfile.TemporaryDirectory(prefix="call-path-") as scratch:
        root = Path(scratch)
        protoset = root / "toolhost.protoset"
        build_protoset(protoset)
        receiver = ReceiverThread()
        bare_server = ServerProcess([sys.executable, str(BENCH / "bare_server.py"), "10"], cwd=ROOT)
        toolhosts: list[ToolhostTarget] = []
        try:
            bare = BareTarget(bare_server, protoset)
            sampled = start_toolhost(root / "sampled", tracing_env(receiver.port, "parentbased_traceidratio", "0.1"),
                                     protoset)
            toolhosts.append(sampled)
            for target in (sampled, bare):  # connections, caches and lazily built paths warm before round one
                target.load(8, seconds / 2)
            time.sleep(EXPORTED)
            figures = []
            curve: dict[str, list[float]] = {"toolhost": [], "baseline": []}
            for concurrency in (8, 32):
                spans_before = receiver.receiver.spans
                figure, runs = qps_figure(
                    f"call_qps_{concurrency}_sampled10",
                    f"CallTool(echo) QPS, {concurrency} in flight, 10% of calls traced", sampled, bare,
                    concurrency, rounds, seconds, Target.ratio_at_least(0.8),
                    "toolhost as configured by default plus OTEL_TRACES_SAMPLER=parentbased_traceidratio, "
                    "OTEL_TRACES_SAMPLER_ARG=0.1 and an OTLP/gRPC exporter to a receiver in the bench process.")
                time.sleep(EXPORTED)
                calls = sum(r.server_calls for r in runs["toolhost"])
                figures.append(dataclasses.replace(figure, extra={
                    **figure.extra, "spans_received_per_call": round((receiver.receiver.spans - spans_before)
                                                                     / max(calls, 1), 3)}))
                curve["toolhost"].append(figure.measured.median)
                curve["baseline"].append(figure.baseline.median)
                if concurrency == 8:
                    figures.append(Figure.from_rounds(
                        key="call_cpu", title="Server CPU per CallTool(echo), 8 in flight, 10% traced",
                        unit="µs", measured=[r.cpu_us_per_call for r in runs["toolhost"]],
                        baseline=[r.cpu_us_per_call for r in runs["bare"]], baseline_name=BARE,
                        target=Target.value_at_most(200), command=COMMAND,
                        note=("user + system CPU of the whole server process (/proc/PID/stat) over each "
                              "call_qps_8_sampled10 round, divided by the calls the server counted. The bare "
                              "server's own figure is what grpc.aio costs per call on this machine.")))
            first = figures[0]
            figures[0] = dataclasses.replace(first, extra={**first.extra, "curve": {
                "x": [8, 32], "x_label": "calls in flight", "y_label": "CallTool(echo) QPS", **curve}})
            always = start_toolhost(root / "always", tracing_env(receiver.port, "always_on"), protoset)
            toolhosts.append(always)
            always.load(8, seconds / 2)
            time.sleep(EXPORTED)
            spans_before = receiver.receiver.spans
            figure, runs = qps_figure(
                "call_qps_8_all_sampled", "CallTool(echo) QPS, 8 in flight, every call traced and exported",
                always, bare, 8, rounds, seconds, Target.ratio_at_least(0.65),
                "OTEL_TRACES_SAMPLER=always_on, OTLP/gRPC exporter (batch processor) to a receiver in the bench "
                "process; spans_received_per_call counts what arrived during the rounds.")
            time.sleep(EXPORTED)
            calls = sum(r.server_calls for r in runs["toolhost"])
            figures.append(dataclasses.replace(figure, extra={
                **figure.extra, "spans_received_per_call": round((receiver.receiver.spans - spans_before)
                                                                 / max(calls, 1), 3)}))
            always.server.stop()
            figures.append(asyncio.run(python_client_figure(sampled, bare, rounds, 100 if quick else 300)))
        finally:
            for toolhost in toolhosts:
                toolhost.server.stop()
            bare_server.stop()
            receiver.stop()
    return [dataclasses.replace(f, command=QUICK_COMMAND) for f in figures] if quick else figures


if __name__ == "__main__":
    run_standalone("call_path", run, __doc__)
