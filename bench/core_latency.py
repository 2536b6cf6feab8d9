"""Round-trip latency of CallTool(echo) and ListTools over 1,000 tools, against a bare grpc.aio server.

Both servers run as separate processes; the client alternates between them (A, B, A, B...) so that noise
on this 2-core machine hits both alike, and reports the median and spread of each, and their ratio.

    .venv/bin/python bench/core_latency.py [--rounds 7] [--calls 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc

from toolhost.v1 import tool_pb2, tool_service_pb2, tool_service_pb2_grpc

HERE = Path(__file__).resolve().parent
LISTENING = re.compile(r"serving gRPC on 127\.0\.0\.1:(\d+)")


def start(argv: list[str]) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    assert process.stderr is not None
    for line in process.stderr:
        found = LISTENING.search(line)
        if found:
            # Keep draining the log so a chatty server never blocks on a full pipe.
            threading.Thread(target=process.stderr.read, daemon=True).start()
            return process, f"127.0.0.1:{found.group(1)}"
    raise RuntimeError(f"{argv[0]} did not start")


def write_catalog(directory: Path, count: int) -> None:
    for i in range(count):
        (directory / f"tool_{i:05d}.yaml").write_text(
            f"name: tool_{i:05d}\ndescription: Generated tool {i}.\nimplementation: echo\n"
            "parameters: [{name: text, type: string, required: true}]\n")


async def time_calls(stub: tool_service_pb2_grpc.ToolServiceStub, calls: int) -> float:
    """Median microseconds of sequential CallTool(echo) round trips."""
    request = tool_service_pb2.CallToolRequest(name="echo", arguments_json='{"text": "hello"}')
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        await stub.CallTool(request)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1e6


async def time_lists(stub: tool_service_pb2_grpc.ToolServiceStub, calls: int) -> float:
    """Median microseconds of ListTools returning 1,000 tools in one page."""
    request = tool_service_pb2.ListToolsRequest(page_size=1000, tags=[], view=tool_pb2.TOOL_VIEW_BASIC)
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        response = await stub.ListTools(request)
        samples.append(time.perf_counter() - started)
        assert len(response.tools) == 1000
    return statistics.median(samples) * 1e6


async def measure(toolhost_target: str, bare_target: str, rounds: int, calls: int) -> dict[str, object]:
    options = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]
    async with grpc.aio.insecure_channel(toolhost_target, options=options) as a, \
            grpc.aio.insecure_channel(bare_target, options=options) as b:
        stubs = {"toolhost": tool_service_pb2_grpc.ToolServiceStub(a), "bare": tool_service_pb2_grpc.ToolServiceStub(b)}
        for stub in stubs.values():  # warm up connections and caches
            await time_calls(stub, 50)
            await time_lists(stub, 5)
        results: dict[str, dict[str, list[float]]] = {"call_echo_us": {}, "list_1000_us": {}}
        for _ in range(rounds):
            for name, stub in stubs.items():
                results["call_echo_us"].setdefault(name, []).append(await time_calls(stub, calls))
                results["list_1000_us"].setdefault(name, []).append(await time_lists(stub, max(calls // 10, 10)))
    report: dict[str, object] = {}
    for figure, by_server in results.items():
        toolhost, bare = statistics.median(by_server["toolhost"]), statistics.median(by_server["bare"])
        report[figure] = {
            "toolhost_median": round(toolhost, 1),
            "toolhost_spread": [round(min(by_server["toolhost"]), 1), round(max(by_server["toolhost"]), 1)],
            "bare_median": round(bare, 1),
            "bare_spread": [round(min(by_server["bare"]), 1), round(max(by_server["bare"]), 1)],
            "ratio_toolhost_to_bare": round(toolhost / bare, 2),
        }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as catalog:
        write_catalog(Path(catalog), 1000)
        toolhost, toolhost_target = start([sys.executable, "-m", "toolhost_server.cli", "serve",
                                           "--grpc-address", "127.0.0.1:0", "--catalog-dir", catalog,
                                           "--watch-catalog", "false"])
        bare, bare_target = start([sys.executable, str(HERE / "bare_server.py"), "1000"])
        try:
            report = asyncio.run(measure(toolhost_target, bare_target, args.rounds, args.calls))
        finally:
            toolhost.terminate()
            bare.terminate()
            toolhost.wait()
            bare.wait()
    report["command"] = "python bench/core_latency.py " + " ".join(sys.argv[1:])
    report["cpu_count"] = os.cpu_count()
    out = HERE / "results" / "core_latency.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
