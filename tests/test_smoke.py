"""The server starts, serves the bundled catalog and answers each ToolService RPC."""

from __future__ import annotations

import json

from toolhost.v1 import tool_pb2, tool_service_pb2

from helpers.calls import call


async def test_bundled_catalog_lists_and_calls_echo(start_server):
    server = await start_server()
    listed = await server.stub.ListTools(tool_service_pb2.ListToolsRequest())
    names = [t.name for t in listed.tools]
    assert "echo" in names and "greet" in names
    assert listed.generation == 1
    response = await server.stub.CallTool(
        tool_service_pb2.CallToolRequest(name="echo", arguments_json=json.dumps({"text": "hi"})))
    assert response.success and response.output == "hi" and response.tool == "echo"
    assert len(response.call_id) == 32
    got = await server.stub.GetTool(tool_service_pb2.GetToolRequest(name="greet"))
    assert got.tool.source == tool_pb2.TOOL_SOURCE_CATALOG
    assert got.tool.input_schema["required"] == ["name"]


async def test_bundled_catalog_has_a_working_tool_per_runner_type(start_server):
    server = await start_server()
    report = await server.stub.Reload(tool_service_pb2.ReloadRequest())
    assert not report.errors, report.errors
    runner_types = {server.toolhost.registry.snapshot.get(name).spec.runner["type"] for name in report.tools}
    assert {"python", "process", "script", "remote"} <= runner_types

    assert (await call(server, "greet", name="Ada", excited=True)).output == "Hello, Ada!"
    counted = await call(server, "word_count", text="one two\nthree $(reboot) `x`")
    assert counted.success and counted.output.strip() == "lines=1 words=5 chars=27"
    df = await call(server, "disk_free", path="/")
    assert df.success and df.exit_code == 0 and "Filesystem" in df.output
    # remote_echo forwards to this same server, wherever it listens (tests/test_remote.py shows it arrives).
    assert (await call(server, "remote_echo", text="round trip")).output == "round trip"
