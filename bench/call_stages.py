"""Where a CallTool's server time goes: each stage of the call path switched off in turn, in one process.

The call_path figures measure the whole server under ghz; this group explains them. It runs the real
ToolService.CallTool(echo) of a real Toolhost (its defaults: SQLite audit table, the memory ring and the JSON
stderr handler, writing to /dev/null here), without the network, and measures CPU per call:

  call_stage_<name>   the full handler (toolhost) against the same handler with <name> replaced by a no-op
                      (baseline), in alternating rounds. Their difference is the stage's cost per call.
  call_stage_all      the full handler against one with every stage below off: what is left is the lookup,
                      the echo itself and the conversion of request and response, about what the issue's
                      prototype handler did.

Stages: audit (the audit line through the log handlers, and the audit table's queue), metrics (the tool's
Prometheus metrics), redaction (of the result), time_limit (asyncio.timeout around the tool), validation
(of the arguments against the tool's schema). A stage is switched off with unittest.mock.patch, in this
process only; nothing of it reaches the server as shipped.

    make bench BENCH_ARGS="--only call_stages"        # or: .venv/bin/python -m bench.call_stages [--quick]
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any, TextIO
from unittest import mock

from bench.harness import Figure, interleave_async, run_standalone
from toolhost.v1 import tool_service_pb2
from toolhost_server import audit, pipeline, schema
from toolhost_server.api.server import create_toolhost
from toolhost_server.api.tool_service import ToolService
from toolhost_server.config import load_config
from toolhost_server.logs.buffered_stream import BufferedStreamHandler
from toolhost_server.serve import configure_logging
from toolhost_server.telemetry.metrics import ToolhostMetrics

COMMAND = 'make bench BENCH_ARGS="--only call_stages"'


class _NoTimeLimit:
    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None


def _no_metrics() -> AbstractContextManager[Any]:
    stack = contextlib.ExitStack()
    for name in ("call_started", "call_released", "call_finished"):
        stack.enter_context(mock.patch.object(ToolhostMetrics, name, lambda self, *args: None))
    return stack


STAGES: dict[str, Callable[[], AbstractContextManager[Any]]] = {
    "audit": lambda: mock.patch.object(audit.AuditTrail, "record", lambda self, entry: None),
    "metrics": _no_metrics,
    "redaction": lambda: mock.patch.object(pipeline, "_redact", lambda outcome, redactor: (outcome, False)),
    "time_limit": lambda: mock.patch.object(pipeline.asyncio, "timeout", lambda seconds: _NoTimeLimit()),
    "validation": lambda: mock.patch.object(schema.ArgumentValidator, "prepare",
                                            lambda self, tool, arguments: arguments),
}


@contextlib.contextmanager
def _all_stages_off() -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for switch_off in STAGES.values():
            stack.enter_context(switch_off())
        yield


class _Context:
    """What CallTool reads of a grpc.aio context, as for a local caller without metadata or deadline."""

    def invocation_metadata(self) -> tuple[()]:
        return ()

    def time_remaining(self) -> None:
        return None

    def peer(self) -> str:
        return "ipv4:127.0.0.1:40000"

    def auth_context(self) -> dict[str, Any]:
        return {}


async def _measure(calls: int, rounds: int, sink: TextIO) -> list[Figure]:
    data_dir = tempfile.mkdtemp(prefix="bench-call-stages-")
    toolhost = create_toolhost(load_config({}, {"TOOLHOST_DATA_DIR": data_dir}))
    # The server's own log set-up, writing to `sink`: the cost of writing the lines stays in.
    stderr, sys.stderr = sys.stderr, sink
    try:
        configure_logging("INFO", toolhost.redactor, "json")
        report = await toolhost.start()
        if not report.success:
            raise RuntimeError(f"the toolhost did not start: {report.problems}")
        service = ToolService(toolhost)
        request = tool_service_pb2.CallToolRequest(name="echo", arguments_json='{"text": "hello"}')
        context: Any = _Context()
        response = await service.CallTool(request, context)
        if not response.success or response.output != "hello":
            raise RuntimeError(f"echo answered {response}")

        async def cpu_per_call() -> float:
            started = time.process_time()
            for _ in range(calls):
                await service.CallTool(request, context)
                # An echo never waits, so a call alone never lets the loop run its background tasks (the
                # audit table's writer): let it, as a serving loop would between calls.
                await asyncio.sleep(0)
            return (time.process_time() - started) / calls * 1e6

        async def without(switch_off: Callable[[], AbstractContextManager[Any]]) -> float:
            with switch_off():
                return await cpu_per_call()

        for _ in range(2):  # warm-up: caches, the ring filling up, the validator built
            await cpu_per_call()
        figures = []
        for name, switch_off in [*STAGES.items(), ("all", _all_stages_off)]:
            full, reduced = await interleave_async(rounds, cpu_per_call,
                                                   lambda switch_off=switch_off: without(switch_off))
            cost = statistics.median(f - r for f, r in zip(full, reduced, strict=True))
            what = "every stage above" if name == "all" else f"the {name.replace('_', ' ')} stage"
            figures.append(Figure.from_rounds(
                key=f"call_stage_{name}", title=f"CallTool(echo) in-process CPU, against it without {what}",
                unit="µs", measured=full, baseline=reduced, baseline_name=f"without {what}", target=None,
                command=COMMAND, note=f"{what} costs {cost:.0f} µs per call (median of the per-round differences)",
                extra={"stage_cost_us": round(cost, 1), "calls_per_round": calls}))
        return figures
    finally:
        for handler in list(logging.getLogger().handlers):
            if isinstance(handler, BufferedStreamHandler):  # the one configure_logging added
                logging.getLogger().removeHandler(handler)
                handler.close()
        sys.stderr = stderr
        toolhost.logs.stop_following()
        toolhost.registry.close()
        await toolhost.close()


def run(quick: bool) -> list[Figure]:
    with open(os.devnull, "w") as sink:
        return asyncio.run(_measure(calls=300 if quick else 2000, rounds=3 if quick else 8, sink=sink))


if __name__ == "__main__":
    run_standalone("call_stages", run, __doc__)
