"""The process tree kill at volume: 1,000 timed-out calls leave no process and no open descriptor behind."""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest

from toolhost.v1 import tool_service_pb2

from helpers.catalogs import write_tool
from helpers.processes import leftover_processes, server_zombies

CALLS = 1000
AT_ONCE = 50

pytestmark = pytest.mark.slow  # a thousand calls, by design


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_a_thousand_timed_out_calls_leave_nothing_behind(start_server, tmp_path):
    marker = f"volume-{uuid.uuid4().hex}"
    # A child that ignores SIGTERM and a grandchild that left the session: the hardest tree to stop.
    write_tool(tmp_path, "stubborn", (
        "name: stubborn\ndescription: Outlives its timeout.\ntimeout_seconds: 0.05\n"
        f"runner: {{type: script, env: {{LEAK_MARKER: {marker}}}, script: \"#!/bin/sh\\n"
        "trap '' TERM\\nsetsid sleep 300 &\\nsleep 300\\n\"}\n"))
    # The audit store would open its database files at its first batch, possibly inside the count; it is off.
    server = await start_server(catalog_dirs=[tmp_path], kill_grace_seconds=0.05, audit_database=False)
    request = tool_service_pb2.CallToolRequest(name="stubborn")
    # Warm up: the first calls open what the server keeps open (pipes of the event loop, the scan thread).
    for response in await asyncio.gather(*(server.stub.CallTool(request) for _ in range(AT_ONCE))):
        assert response.error.code == "TIMEOUT"
    descriptors_before = open_descriptors()

    codes: dict[str, int] = {}
    for _ in range(CALLS // AT_ONCE):
        for response in await asyncio.gather(*(server.stub.CallTool(request) for _ in range(AT_ONCE))):
            codes[response.error.code] = codes.get(response.error.code, 0) + 1
    assert codes == {"TIMEOUT": CALLS}
    assert leftover_processes(marker) == []
    assert server_zombies() == []
    # Flat, give or take what the gRPC channel and loop keep in flux.
    assert open_descriptors() - descriptors_before <= 5
    assert server.toolhost.pipeline.in_flight == 0
