"""toolhost against the official MCP Python SDK (`mcp`, MCPServer over streamable HTTP) on the same machine.

Figures:

- `mcp_call_qps_8`, `mcp_call_qps_32`: CallTool(echo) requests per second with 8 (32) in flight, each side
  driven by a Go load generator in its own process: ghz for toolhost's gRPC, hey for MCP's HTTP POSTs of
  JSON-RPC `tools/call`. Target: toolhost ≥ 5 times the SDK.
- `mcp_call_cpu`: server CPU time (user + system, all threads, from /proc) per call during the 8-in-flight
  rounds. Target: toolhost ≤ 1/3 of the SDK's.
- `mcp_http_call_qps_8`, `mcp_http_call_qps_32`, `mcp_http_call_cpu`: toolhost's own /mcp against the SDK, the
  same hey command, body and headers at each (bench/mcp_load.py), protocol 2026-07-28; QPS reported, CPU per
  call judged. Target: toolhost ≤ 1.3 times the SDK's CPU per call (issue 23).
- `mcp_http_legacy_call_qps_8`, `mcp_http_legacy_call_cpu`: the same at 2025-11-25, the handshake era most hosts
  speak (no `_meta` envelope, no Mcp-Method/Mcp-Name headers, no initialize: both servers are stateless).
- `mcp_list_1000`: p50 latency of listing 1,000 tools (toolhost ListTools FULL view, page_size 1000; MCP
  `tools/list`), sequential calls from this process. Target: toolhost p50 ≤ 5 ms; the ratio is reported.

Every call is checked: the servers' own counters (toolhost's `toolhost_tool_calls_total`, bench/mcp_server.py's
`/stats`) must have run the tool at least as often as the load generator saw successes, with no failed
outcome, and one call of each (per endpoint and era) is read back before the rounds: hey counts HTTP statuses
only, and a JSON-RPC error comes in a 200. Rounds alternate toolhost, MCP, MCP, toolhost...

    make bench BENCH_ARGS="--only mcp_compare"          # or: .venv/bin/python -m bench.mcp_compare [--quick]
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.metadata
import json
import os
import re
import statistics
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import httpx

from bench.ghz_load import (
    GHZ,
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
from bench.mcp_load import HANDSHAKE, HEY, MODERN, EchoCall, EchoCounts, McpHttpTarget, mcp_headers, mcp_request
from toolhost.v1 import tool_pb2, tool_service_pb2, tool_service_pb2_grpc

COMMAND = 'make bench BENCH_ARGS="--only mcp_compare"'
QUICK_COMMAND = 'make bench BENCH_ARGS="--only mcp_compare --quick"'
TOOLS = 1000
MCP_BASELINE = "MCP Python SDK {version} MCPServer, streamable HTTP stateless + JSON responses, protocol {protocol}"
MCP_READY = re.compile(r"serving MCP on 127\.0\.0\.1:(\d+) (.*)")


# -- toolhost ---------------------------------------------------------------------------------------------------

def write_catalog(directory: Path, count: int) -> None:
    """`count` catalog tools like the MCP server's: one required string parameter, the built-in echo's runner.
    Their own category lets ListTools return exactly them, without the server's built-in tools."""
    for i in range(count):
        (directory / f"tool_{i:05d}.yaml").write_text(
            f"name: tool_{i:05d}\ndescription: Generated tool {i}.\ncategory: bench\nimplementation: echo\n"
            "parameters: [{name: text, type: string, required: true}]\n")


def toolhost_mcp(toolhost: ToolhostTarget, http_port: str, call: EchoCall, scratch: Path) -> McpHttpTarget:
    """toolhost's own /mcp, checked by its toolhost_tool_calls_total{tool="echo"} as the gRPC rounds are."""
    def counts() -> EchoCounts:
        outcomes = toolhost.echo_outcomes()
        ok = outcomes.get("OK", 0.0)
        return EchoCounts(int(ok), int(sum(outcomes.values()) - ok))

    return McpHttpTarget(toolhost.server, f"http://127.0.0.1:{http_port}/mcp", call,
                         scratch / f"toolhost-echo-{call.protocol}.json", counts)


# -- MCP SDK ------------------------------------------------------------------------------------------------------

class Mcp:
    """bench/mcp_server.py: the SDK's MCPServer, and its endpoint for each protocol era."""

    def __init__(self, server: ServerProcess, scratch: Path) -> None:
        self.server = server
        self.url = f"http://{server.target}/mcp"
        # The HTTP parser and event loop uvicorn runs on, as the server reported them: httptools and uvloop are
        # the SDK's best, h11 and asyncio what it falls back to when they are not installed.
        self.server_description = wait_for_line(server, MCP_READY).group(2)
        self.modern = self.endpoint(EchoCall.at(MODERN), scratch)

    def baseline_name(self, protocol: str = MODERN) -> str:
        return (MCP_BASELINE.format(version=importlib.metadata.version("mcp"), protocol=protocol)
                + f", uvicorn {self.server_description}")

    def endpoint(self, call: EchoCall, scratch: Path) -> McpHttpTarget:
        return McpHttpTarget(self.server, self.url, call, scratch / f"sdk-echo-{call.protocol}.json",
                             self.echo_counts)

    def echo_counts(self) -> EchoCounts:
        # echo returns its argument and cannot fail: every run is a success.
        with urllib.request.urlopen(f"http://{self.server.target}/stats", timeout=10) as response:
            return EchoCounts(int(json.load(response)["echo_calls"]), 0)

    def load(self, concurrency: int, seconds: float) -> Load:
        return self.modern.load(concurrency, seconds)


# -- the figures --------------------------------------------------------------------------------------------------

def verify_once(toolhost: ToolhostTarget, endpoints: list[McpHttpTarget]) -> None:
    """One echo call read back from each, so a server that answers without echoing fails loudly."""
    toolhost.check_echo()
    for endpoint in endpoints:
        endpoint.check_reply()


def call_figures(toolhost: ToolhostTarget, mcp: Mcp, rounds: int, seconds: float,
                 concurrencies: tuple[int, ...]) -> list[Figure]:
    # A short unrecorded run each: connections, caches and lazily built paths are warm before round one.
    toolhost.load(8, seconds / 4)
    mcp.load(8, seconds / 4)
    figures = []
    for concurrency in concurrencies:
        runs: dict[str, list[Load]] = {"toolhost": [], "mcp": []}
        measured, baseline = interleave(rounds, recording_qps(runs["toolhost"], toolhost, concurrency, seconds),
                                        recording_qps(runs["mcp"], mcp, concurrency, seconds))
        extra = {**load_extra(runs, concurrency, seconds), "mcp_server": mcp.server_description}
        figures.append(Figure.from_rounds(
            key=f"mcp_call_qps_{concurrency}", title=f"CallTool(echo) QPS against the MCP SDK, {concurrency} in flight",
            unit="QPS", measured=measured, baseline=baseline, baseline_name=mcp.baseline_name(),
            target=Target.ratio_at_least(5), command=COMMAND,
            note=(f"ghz (1 HTTP/2 connection) against toolhost as configured by default; hey ({concurrency} "
                  "keep-alive connections) POSTing JSON-RPC tools/call to the SDK; every success checked against "
                  "the server's own call counter."),
            extra=extra))
        if concurrency == 8:
            figures.append(Figure.from_rounds(
                key="mcp_call_cpu", title="Server CPU per CallTool(echo) against the MCP SDK, 8 in flight",
                unit="µs/call", measured=[r.cpu_us_per_call for r in runs["toolhost"]],
                baseline=[r.cpu_us_per_call for r in runs["mcp"]], baseline_name=mcp.baseline_name(),
                target=Target.ratio_at_most(round(1 / 3, 3)), command=COMMAND,
                note=("user + system CPU of the whole server process (all threads, /proc/PID/stat) over each "
                      "mcp_call_qps_8 round, divided by the calls the server itself counted."),
                extra={"mcp_server": mcp.server_description}))
    return figures


def load_extra(runs: dict[str, list[Load]], concurrency: int, seconds: float) -> dict[str, Any]:
    """What each side spent in each round, for a figure's `extra`."""
    return {
        "concurrency": concurrency,
        "seconds_per_round": seconds,
        "server_cpu_us_per_call": {name: [round(r.cpu_us_per_call, 1) for r in rs] for name, rs in runs.items()},
        # The generators' own CPU against the wall time: on this 2-core machine a generator near a full core
        # (1.0) would be the bottleneck; far below it, the server is.
        "server_cores_busy": {name: [round(r.server_cpu / r.seconds, 2) for r in rs] for name, rs in runs.items()},
        "loadgen_cores_busy": {name: [round(r.loadgen_cpu / r.seconds, 2) for r in rs] for name, rs in runs.items()},
        "loadgen_cpu_us_per_call": {name: round(statistics.median(r.loadgen_cpu / r.ok * 1e6 for r in rs), 1)
                                    for name, rs in runs.items()},
    }


# The target for /mcp: toolhost's CPU per tools/call at most 1.3 times the SDK's, in the same run.
HTTP_CPU_RATIO = 1.3
ERA_NAMES = {MODERN: "", HANDSHAKE: "legacy_"}


def http_call_figures(toolhost: McpHttpTarget, sdk: McpHttpTarget, mcp: Mcp, rounds: int, seconds: float,
                      concurrencies: tuple[int, ...]) -> list[Figure]:
    """toolhost's /mcp against the SDK's MCPServer: the same hey command, body and headers at each, in
    alternating rounds; QPS per concurrency and, at 8 in flight, server CPU per call."""
    protocol = toolhost.call.protocol
    era = ERA_NAMES[protocol]
    toolhost.load(8, seconds / 4)  # warm-up, unrecorded
    sdk.load(8, seconds / 4)
    replies = {"toolhost": f"{toolhost.reply_content_type}, {toolhost.reply_bytes} bytes",
               "mcp": f"{sdk.reply_content_type}, {sdk.reply_bytes} bytes"}
    how = (f"hey POSTing the same JSON-RPC tools/call(echo) body with the same headers (protocol {protocol}) to "
           "toolhost's /mcp (run as `make run` runs it: no auth file) and to the SDK's MCPServer, in alternating "
           "rounds; every 200 checked against the server's own count of successful echo calls, one reply of "
           "each read back first.")
    figures = []
    for concurrency in concurrencies:
        runs: dict[str, list[Load]] = {"toolhost": [], "mcp": []}
        measured, baseline = interleave(rounds, recording_qps(runs["toolhost"], toolhost, concurrency, seconds),
                                        recording_qps(runs["mcp"], sdk, concurrency, seconds))
        extra = {**load_extra(runs, concurrency, seconds), "replies": replies, "mcp_server": mcp.server_description}
        figures.append(Figure.from_rounds(
            key=f"mcp_http_{era}call_qps_{concurrency}",
            title=f"/mcp tools/call(echo) QPS against the MCP SDK, protocol {protocol}, {concurrency} in flight",
            unit="QPS", measured=measured, baseline=baseline, baseline_name=mcp.baseline_name(protocol),
            target=None, command=COMMAND, note=how, extra=extra))
        if concurrency == 8:
            figures.append(Figure.from_rounds(
                key=f"mcp_http_{era}call_cpu",
                title=f"Server CPU per /mcp tools/call(echo) against the MCP SDK, protocol {protocol}, 8 in flight",
                unit="µs/call", measured=[r.cpu_us_per_call for r in runs["toolhost"]],
                baseline=[r.cpu_us_per_call for r in runs["mcp"]], baseline_name=mcp.baseline_name(protocol),
                target=Target.ratio_at_most(HTTP_CPU_RATIO), command=COMMAND,
                note=(f"user + system CPU of the whole server process (all threads, /proc/PID/stat) over each "
                      f"mcp_http_{era}call_qps_8 round, divided by the echo calls the server itself counted."),
                extra={"replies": replies, "mcp_server": mcp.server_description}))
    return figures


FULL_LIST = tool_service_pb2.ListToolsRequest(category="bench", page_size=TOOLS, view=tool_pb2.TOOL_VIEW_FULL)
BASIC_LIST = tool_service_pb2.ListToolsRequest(category="bench", page_size=TOOLS, view=tool_pb2.TOOL_VIEW_BASIC)
LIST_CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 64 << 20)]


async def list_figure(toolhost: ToolhostTarget, mcp: Mcp, rounds: int, samples: int, scratch: Path) -> Figure:
    """toolhost's FULL list against MCP's tools/list. Each toolhost round also times bench/bare_server.py
    answering with the very page toolhost sent (parsed from its bytes, serialized by grpc on each call): what the
    gRPC transport and the client's decoding cost without toolhost."""
    page_file = scratch / "full-page.bin"
    async with grpc.aio.insecure_channel(toolhost.server.target, options=LIST_CHANNEL_OPTIONS) as channel:
        page = await tool_service_pb2_grpc.ToolServiceStub(channel).ListTools(FULL_LIST)
    page_file.write_bytes(page.SerializeToString())

    with ServerProcess([sys.executable, str(BENCH / "bare_server.py"), "0", "--page-file", str(page_file)],
                       cwd=ROOT) as bare_server:
        return await _list_rounds(toolhost, bare_server, mcp, rounds, samples)


async def _list_rounds(toolhost: ToolhostTarget, bare_server: ServerProcess, mcp: Mcp, rounds: int,
                       samples: int) -> Figure:
    body = json.dumps(mcp_request("tools/list", {})).encode()
    headers = mcp_headers(MODERN, "tools/list")
    basic_p50: list[float] = []
    bare_p50: list[float] = []
    sizes: dict[str, int] = {}

    async with grpc.aio.insecure_channel(toolhost.server.target, options=LIST_CHANNEL_OPTIONS) as channel, \
            grpc.aio.insecure_channel(bare_server.target, options=LIST_CHANNEL_OPTIONS) as bare_channel, \
            httpx.AsyncClient(timeout=30) as client:
        stub = tool_service_pb2_grpc.ToolServiceStub(channel)
        bare_stub = tool_service_pb2_grpc.ToolServiceStub(bare_channel)

        async def grpc_list(request: tool_service_pb2.ListToolsRequest,
                            on: tool_service_pb2_grpc.ToolServiceStub = stub) -> float:
            started = time.perf_counter()
            response = await on.ListTools(request)
            elapsed = time.perf_counter() - started
            if len(response.tools) != TOOLS:
                raise RuntimeError(f"ListTools listed {len(response.tools)} tools, not {TOOLS}")
            if on is stub:
                sizes[f"toolhost_{tool_pb2.ToolView.Name(request.view)}_bytes"] = response.ByteSize()
            return elapsed

        async def mcp_list() -> float:
            # Decoding the JSON is part of it, as the protobuf decoding is on the gRPC side.
            started = time.perf_counter()
            response = await client.post(mcp.url, content=body, headers=headers)
            tools = response.json()["result"]["tools"]
            elapsed = time.perf_counter() - started
            if response.status_code != 200 or len(tools) != TOOLS:
                raise RuntimeError(f"MCP tools/list: HTTP {response.status_code}, {len(tools)} tools")
            sizes["mcp_bytes"] = len(response.content)
            return elapsed

        async def toolhost_round() -> float:
            basic_p50.append(statistics.median([await grpc_list(BASIC_LIST) for _ in range(samples)]) * 1e3)
            bare_p50.append(statistics.median([await grpc_list(FULL_LIST, bare_stub) for _ in range(samples)]) * 1e3)
            return statistics.median([await grpc_list(FULL_LIST) for _ in range(samples)]) * 1e3

        async def mcp_round() -> float:
            return statistics.median([await mcp_list() for _ in range(samples)]) * 1e3

        for _ in range(3):  # warm-up, unrecorded
            await grpc_list(FULL_LIST)
            await grpc_list(FULL_LIST, bare_stub)
            await grpc_list(BASIC_LIST)
            await mcp_list()
        measured, baseline = await interleave_async(rounds, toolhost_round, mcp_round)
    return Figure.from_rounds(
        key="mcp_list_1000", title="List 1,000 tools (p50) against the MCP SDK's tools/list", unit="ms",
        measured=measured, baseline=baseline, baseline_name=mcp.baseline_name(), target=Target.value_at_most(5),
        command=COMMAND,
        note=("toolhost ListTools in the FULL view (input schemas included, as MCP's tools/list always has them), "
              f"page_size 1000, one catalog category; {samples} sequential calls per round from the bench process, "
              "decoding included; the BASIC view's p50 is in extra, and the p50 of bench/bare_server.py answering "
              "with toolhost's FULL page (the transport and decoding without toolhost)."),
        extra={"toolhost_basic_p50_ms": [round(v, 2) for v in basic_p50],
               "bare_same_page_p50_ms": [round(v, 2) for v in bare_p50], **sizes, "samples_per_round": samples,
               "mcp_server": mcp.server_description})


def ceiling_figure(protoset: Path, mcp: Mcp, rounds: int, seconds: float) -> Figure:
    """The bare grpc.aio echo server against the SDK: what any Python gRPC server can reach here, whatever it
    does per call. If this ratio is below a target, the target is out of reach for toolhost on this stack."""
    with ServerProcess([sys.executable, str(BENCH / "bare_server.py"), "10"], cwd=ROOT) as server:
        bare = BareTarget(server, protoset)
        bare.load(8, seconds / 4)
        runs: dict[str, list[Load]] = {"bare": [], "mcp": []}
        measured, baseline = interleave(rounds, recording_qps(runs["bare"], bare, 8, seconds),
                                        recording_qps(runs["mcp"], mcp, 8, seconds))
    cpu = {name: [round(r.cpu_us_per_call, 1) for r in rs] for name, rs in runs.items()}
    return Figure.from_rounds(
        key="mcp_ceiling_bare_qps_8", title="The ceiling: a bare grpc.aio echo server against the MCP SDK, 8 in "
        "flight", unit="QPS", measured=measured, baseline=baseline, baseline_name=mcp.baseline_name(), target=None,
        command=COMMAND,
        note=("bench/bare_server.py (grpc.aio, no toolhost logic) driven by ghz like toolhost: the most any Python "
              "grpc.aio server reaches against the SDK here; server CPU per call of each in extra."),
        extra={"server_cpu_us_per_call": cpu,
               "cpu_ratio_median": round(statistics.median(b / m for b, m in zip(cpu["bare"], cpu["mcp"],
                                                                                  strict=True)), 3)})


def start_servers(root: Path) -> tuple[ServerProcess, ServerProcess]:
    """toolhost on the catalog in `root`, and the MCP server, started at once (startup is seconds of imports)."""
    with ThreadPoolExecutor(2) as pool:
        starting = [
            pool.submit(ServerProcess,
                        toolhost_argv("--catalog-dir", str(root / "catalog"), "--watch-catalog", "false"),
                        env=quiet_env(TOOLHOST_DATA_DIR=str(root / "data")), cwd=ROOT),
            pool.submit(ServerProcess, [sys.executable, str(BENCH / "mcp_server.py"), "--tools", str(TOOLS)],
                        env=quiet_env(), cwd=ROOT, ready=MCP_READY),
        ]
    failed = [future.exception() for future in starting if future.exception() is not None]
    if failed:
        for future in starting:  # the one that did start must not outlive the run
            if future.exception() is None:
                future.result().stop()
        raise RuntimeError("a server did not start") from failed[0]
    return starting[0].result(), starting[1].result()


def run(quick: bool) -> list[Figure]:
    for binary in (GHZ, HEY):
        if not os.access(binary, os.X_OK):
            raise RuntimeError(f"{binary} is missing: `make bench` installs it (or set GHZ / HEY)")
    rounds = 2 if quick else 5
    seconds = 0.5 if quick else 2.5
    concurrencies = (8, 32)
    with tempfile.TemporaryDirectory(prefix="mcp-compare-") as scratch:
        root = Path(scratch)
        (root / "catalog").mkdir()
        (root / "data").mkdir()
        write_catalog(root / "catalog", TOOLS)
        build_protoset(root / "toolhost.protoset")
        toolhost_server, mcp_server = start_servers(root)
        with toolhost_server, mcp_server:
            http_port = wait_for_line(toolhost_server, TOOLHOST_HTTP).group(1)
            toolhost = ToolhostTarget(toolhost_server, f"http://127.0.0.1:{http_port}/metrics",
                                      root / "toolhost.protoset")
            mcp = Mcp(mcp_server, root)
            over_http = {protocol: (toolhost_mcp(toolhost, http_port, EchoCall.at(protocol), root),
                                    mcp.endpoint(EchoCall.at(protocol), root)) for protocol in (MODERN, HANDSHAKE)}
            verify_once(toolhost, [mcp.modern, *(e for pair in over_http.values() for e in pair)])
            figures = call_figures(toolhost, mcp, rounds, seconds, concurrencies)
            figures += http_call_figures(*over_http[MODERN], mcp, rounds, seconds, concurrencies)
            # The handshake era at 8 in flight only: what most hosts speak, measured for the CPU target.
            figures += http_call_figures(*over_http[HANDSHAKE], mcp, rounds, seconds, (8,))
            figures.append(ceiling_figure(root / "toolhost.protoset", mcp, rounds, seconds))
            figures.append(asyncio.run(list_figure(toolhost, mcp, rounds, 5 if quick else 20, root)))
    # A quick run's figures are reproduced by a quick run.
    return [dataclasses.replace(f, command=QUICK_COMMAND) for f in figures] if quick else figures


if __name__ == "__main__":
    run_standalone("mcp_compare", run, __doc__)
