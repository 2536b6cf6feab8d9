"""toolhost against the official MCP Python SDK (`mcp`, MCPServer over streamable HTTP) on the same machine.

Figures:

- `mcp_call_qps_8`, `mcp_call_qps_32`: CallTool(echo) requests per second with 8 (32) in flight, each side
  driven by a Go load generator in its own process: ghz for toolhost's gRPC, hey for MCP's HTTP POSTs of
  JSON-RPC `tools/call`. Target: toolhost ≥ 5 times the SDK.
- `mcp_call_cpu`: server CPU time (user + system, all threads, from /proc) per call during the 8-in-flight
  rounds. Target: toolhost ≤ 1/3 of the SDK's.
- `mcp_list_1000`: p50 latency of listing 1,000 tools (toolhost ListTools FULL view, page_size 1000; MCP
  `tools/list`), sequential calls from this process. Target: toolhost p50 ≤ 5 ms; the ratio is reported.

Every call is checked: the servers' own counters (toolhost's `toolhost_tool_calls_total`, bench/mcp_server.py's
`/stats`) must have run the tool at least as often as the load generator saw successes, with no failed
outcome, and one call of each is read back before the rounds. Rounds alternate toolhost, MCP, MCP, toolhost...

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
    TEXT,
    TOOLHOST_HTTP,
    BareTarget,
    Load,
    ToolhostTarget,
    build_protoset,
    recording_qps,
    run_loadgen,
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
from toolhost.v1 import tool_pb2, tool_service_pb2, tool_service_pb2_grpc

COMMAND = 'make bench BENCH_ARGS="--only mcp_compare"'
QUICK_COMMAND = 'make bench BENCH_ARGS="--only mcp_compare --quick"'
HEY = os.environ.get("HEY", str(ROOT / ".tools/bin/hey-v0.1.4"))
TOOLS = 1000
# The newest MCP revision: its requests are self-contained (no initialize, no session), which the SDK serves on
# its cheapest path. The _meta envelope and the Mcp-Method/Mcp-Name headers are what that revision requires.
MCP_VERSION = "2026-07-28"
MCP_META = {"io.modelcontextprotocol/protocolVersion": MCP_VERSION, "io.modelcontextprotocol/clientCapabilities": {}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": MCP_VERSION}
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


# -- MCP SDK ------------------------------------------------------------------------------------------------------

class Mcp:
    def __init__(self, server: ServerProcess, body_file: Path) -> None:
        self.server = server
        self.url = f"http://{server.target}/mcp"
        self.body_file = body_file
        # The HTTP parser and event loop uvicorn runs on, as the server reported them: httptools and uvloop are
        # the SDK's best, h11 and asyncio what it falls back to when they are not installed.
        self.server_description = wait_for_line(server, MCP_READY).group(2)
        self.baseline_name = (MCP_BASELINE.format(version=importlib.metadata.version("mcp"), protocol=MCP_VERSION)
                              + f", uvicorn {self.server_description}")

    def echo_calls(self) -> int:
        with urllib.request.urlopen(f"http://{self.server.target}/stats", timeout=10) as response:
            return int(json.load(response)["echo_calls"])

    def load(self, concurrency: int, seconds: float) -> Load:
        before = self.echo_calls()
        cpu = self.server.cpu_seconds()
        headers = [*(f"{k}: {v}" for k, v in MCP_HEADERS.items()), "Mcp-Method: tools/call", "Mcp-Name: echo"]
        out, loadgen_cpu = run_loadgen([
            HEY, "-z", f"{seconds}s", "-c", str(concurrency), "-m", "POST", "-D", str(self.body_file),
            *(arg for header in headers for arg in ("-H", header)), self.url])
        cpu = self.server.cpu_seconds() - cpu
        server_calls = self.echo_calls() - before
        statuses = {int(code): int(n) for code, n in re.findall(r"\[(\d{3})\]\s+(\d+) responses", out)}
        errors = re.search(r"Error distribution:\n((?:\s+\[\d+\].*\n?)+)", out)
        total = re.search(r"Total:\s+([0-9.]+) secs", out)
        ok = statuses.get(200, 0)
        failures = sum(n for code, n in statuses.items() if code != 200)
        if failures or errors or total is None or server_calls < ok or ok == 0:
            raise RuntimeError(f"MCP echo calls failed: hey statuses {statuses}, errors "
                               f"{errors.group(1) if errors else None}, server ran echo {server_calls} times")
        return Load(ok, float(total.group(1)), server_calls, cpu, loadgen_cpu)


def mcp_request(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": MCP_META}}


# -- the figures --------------------------------------------------------------------------------------------------

def verify_once(toolhost: ToolhostTarget, mcp: Mcp) -> None:
    """One echo call read back from each, so a server that answers without echoing fails loudly."""
    with grpc.insecure_channel(toolhost.server.target) as channel:
        reply = tool_service_pb2_grpc.ToolServiceStub(channel).CallTool(
            tool_service_pb2.CallToolRequest(name="echo", arguments_json=json.dumps({"text": TEXT})), timeout=10)
    if not reply.success or reply.output != TEXT:
        raise RuntimeError(f"toolhost echo answered {reply}")
    request = urllib.request.Request(
        mcp.url, data=json.dumps(mcp_request("tools/call", {"name": "echo", "arguments": {"text": TEXT}})).encode(),
        headers={**MCP_HEADERS, "Mcp-Method": "tools/call", "Mcp-Name": "echo"}, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        result = json.load(response).get("result", {})
    if result.get("isError") or result.get("content") != [{"type": "text", "text": TEXT}]:
        raise RuntimeError(f"MCP echo answered {result}")


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
        extra = {
            "concurrency": concurrency,
            "seconds_per_round": seconds,
            "server_cpu_us_per_call": {name: [round(r.cpu_us_per_call, 1) for r in rs] for name, rs in runs.items()},
            # The generators' own CPU against the wall time: on this 2-core machine a generator near a full core
            # (1.0) would be the bottleneck; far below it, the server is.
            "server_cores_busy": {name: [round(r.server_cpu / r.seconds, 2) for r in rs] for name, rs in runs.items()},
            "loadgen_cores_busy": {name: [round(r.loadgen_cpu / r.seconds, 2) for r in rs]
                                   for name, rs in runs.items()},
            "loadgen_cpu_us_per_call": {name: round(statistics.median(r.loadgen_cpu / r.ok * 1e6 for r in rs), 1)
                                        for name, rs in runs.items()},
            "mcp_server": mcp.server_description,
        }
        figures.append(Figure.from_rounds(
            key=f"mcp_call_qps_{concurrency}", title=f"CallTool(echo) QPS against the MCP SDK, {concurrency} in flight",
            unit="QPS", measured=measured, baseline=baseline, baseline_name=mcp.baseline_name,
            target=Target.ratio_at_least(5), command=COMMAND,
            note=(f"ghz (1 HTTP/2 connection) against toolhost as configured by default; hey ({concurrency} "
                  "keep-alive connections) POSTing JSON-RPC tools/call to the SDK; every success checked against "
                  "the server's own call counter."),
            extra=extra))
        if concurrency == 8:
            figures.append(Figure.from_rounds(
                key="mcp_call_cpu", title="Server CPU per CallTool(echo) against the MCP SDK, 8 in flight",
                unit="µs/call", measured=[r.cpu_us_per_call for r in runs["toolhost"]],
                baseline=[r.cpu_us_per_call for r in runs["mcp"]], baseline_name=mcp.baseline_name,
                target=Target.ratio_at_most(round(1 / 3, 3)), command=COMMAND,
                note=("user + system CPU of the whole server process (all threads, /proc/PID/stat) over each "
                      "mcp_call_qps_8 round, divided by the calls the server itself counted."),
                extra={"mcp_server": mcp.server_description}))
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
    headers = {**MCP_HEADERS, "Mcp-Method": "tools/list"}
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
        measured=measured, baseline=baseline, baseline_name=mcp.baseline_name, target=Target.value_at_most(5),
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
        "flight", unit="QPS", measured=measured, baseline=baseline, baseline_name=mcp.baseline_name, target=None,
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
        body = root / "echo.json"
        body.write_text(json.dumps(mcp_request("tools/call", {"name": "echo", "arguments": {"text": TEXT}})))
        toolhost_server, mcp_server = start_servers(root)
        with toolhost_server, mcp_server:
            metrics_port = wait_for_line(toolhost_server, TOOLHOST_HTTP).group(1)
            toolhost = ToolhostTarget(toolhost_server, f"http://127.0.0.1:{metrics_port}/metrics",
                                      root / "toolhost.protoset")
            mcp = Mcp(mcp_server, body)
            verify_once(toolhost, mcp)
            figures = call_figures(toolhost, mcp, rounds, seconds, concurrencies)
            figures.append(ceiling_figure(root / "toolhost.protoset", mcp, rounds, seconds))
            figures.append(asyncio.run(list_figure(toolhost, mcp, rounds, 5 if quick else 20, root)))
    # A quick run's figures are reproduced by a quick run.
    return [dataclasses.replace(f, command=QUICK_COMMAND) for f in figures] if quick else figures


if __name__ == "__main__":
    run_standalone("mcp_compare", run, __doc__)
