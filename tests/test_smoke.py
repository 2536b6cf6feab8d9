"""The server starts, serves the bundled catalog and answers each ToolService RPC."""

from __future__ import annotations

import json

from toolhost.v1 import tool_pb2, tool_service_pb2


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
