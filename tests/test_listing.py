"""ListTools: filters, AIP-158 pagination with keyset tokens that survive reloads, views."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import json_format

from toolhost.v1 import tool_pb2, tool_service_pb2

from helpers.catalogs import write_tool


def catalog_tool(name: str, category: str, platform: str, tags: list[str]) -> str:
    return (f"name: {name}\ndescription: Generated tool {name}.\ncategory: {category}\nplatform: {platform}\n"
            f"tags: [{', '.join(['gen', *tags])}]\nimplementation: echo\n"
            "parameters: [{name: text, type: string, required: true}]\n")


@pytest.fixture
async def server(start_server, tmp_path):
    for i in range(300):
        category = ("network", "system", "file_ops")[i % 3]
        platform = ("linux", "windows")[i % 2]
        tags = ["even" if i % 2 == 0 else "odd"] + (["five"] if i % 5 == 0 else [])
        write_tool(tmp_path, f"tool_{i:03d}", catalog_tool(f"tool_{i:03d}", category, platform, tags))
    return await start_server(catalog_dirs=[tmp_path])


async def all_pages(server, **fields):
    names, token, pages = [], "", 0
    while True:
        response = await server.stub.ListTools(tool_service_pb2.ListToolsRequest(page_token=token, **fields))
        names.extend(t.name for t in response.tools)
        pages += 1
        token = response.next_page_token
        if not token:
            return names, pages, response


async def test_pages_cover_every_tool_once_in_order(server):
    names, pages, last = await all_pages(server, page_size=7, tags=["gen"])
    expected = [f"tool_{i:03d}" for i in range(300)]
    assert names == expected
    assert pages == -(-len(expected) // 7)
    assert last.total_size == len(expected)
    everything, _, _ = await all_pages(server, page_size=11)
    assert everything == sorted(server.toolhost.registry.snapshot.names) and "echo" in everything


async def test_default_and_maximum_page_size(server, tmp_path):
    for i in range(300, 1100):
        write_tool(tmp_path, f"tool_{i:04d}", catalog_tool(f"tool_{i:04d}", "bulk", "linux", []))
    await server.stub.Reload(tool_service_pb2.ReloadRequest())
    first = await server.stub.ListTools(tool_service_pb2.ListToolsRequest(tags=["gen"]))
    assert len(first.tools) == 100 and first.next_page_token and first.total_size == 1100
    huge = await server.stub.ListTools(tool_service_pb2.ListToolsRequest(page_size=5000, tags=["gen"]))
    assert len(huge.tools) == 1000 and huge.next_page_token


async def test_filters_combine(server):
    names, _, last = await all_pages(server, category="network", platform="linux", tags=["even", "five"])
    # network: i % 3 == 0; linux & even: i % 2 == 0; five: i % 5 == 0  ->  i % 30 == 0
    assert names == [f"tool_{i:03d}" for i in range(0, 300, 30)]
    assert last.total_size == 10


async def test_cli_providers_do_not_get_file_ops(server):
    everything, _, _ = await all_pages(server, page_size=1000)
    for_cli, _, _ = await all_pages(server, page_size=1000, provider="claude_code")
    for_api, _, _ = await all_pages(server, page_size=1000, provider="anthropic")
    file_ops = {f"tool_{i:03d}" for i in range(2, 300, 3)}
    assert set(for_cli) == set(everything) - file_ops
    assert for_api == everything


async def test_token_survives_a_reload_between_pages(server, tmp_path):
    first = await server.stub.ListTools(tool_service_pb2.ListToolsRequest(page_size=48, tags=["gen"]))
    assert first.tools[-1].name == "tool_047"
    (tmp_path / "tool_010.yaml").unlink()   # behind the cursor
    (tmp_path / "tool_060.yaml").unlink()   # ahead of it
    write_tool(tmp_path, "tool_0555", catalog_tool("tool_0555", "system", "linux", ["x"]))
    reload = await server.stub.Reload(tool_service_pb2.ReloadRequest())
    assert reload.generation == first.generation + 1
    second = await server.stub.ListTools(
        tool_service_pb2.ListToolsRequest(page_size=50, tags=["gen"], page_token=first.next_page_token))
    names = [t.name for t in second.tools]
    assert names[0] == "tool_048" and "tool_060" not in names and "tool_0555" in names
    assert second.generation == reload.generation


async def test_token_is_bound_to_its_filter(server):
    first = await server.stub.ListTools(tool_service_pb2.ListToolsRequest(page_size=5, category="network"))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await server.stub.ListTools(tool_service_pb2.ListToolsRequest(
            page_size=5, category="system", page_token=first.next_page_token))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "different filter" in caught.value.details()
    # The view is not part of the filter: the next page may ask for more detail.
    same = await server.stub.ListTools(tool_service_pb2.ListToolsRequest(
        page_size=5, category="network", page_token=first.next_page_token, view=tool_pb2.TOOL_VIEW_FULL))
    assert same.tools[0].input_schema["type"] == "object"


@pytest.mark.parametrize("token", ["garbage", "eyJhIjogMX0", "!!!"])
async def test_foreign_tokens_are_refused(server, token):
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await server.stub.ListTools(tool_service_pb2.ListToolsRequest(page_token=token))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_negative_page_size_is_invalid(server):
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await server.stub.ListTools(tool_service_pb2.ListToolsRequest(page_size=-1))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_basic_view_leaves_out_schemas_and_full_includes_them(server):
    # The network tools all take parameters (the first tool of all may take none: application_info).
    basic = await server.stub.ListTools(tool_service_pb2.ListToolsRequest(page_size=1, category="network"))
    full = await server.stub.ListTools(tool_service_pb2.ListToolsRequest(page_size=1, category="network",
                                                                         view=tool_pb2.TOOL_VIEW_FULL))
    assert not basic.tools[0].HasField("input_schema") and not basic.tools[0].parameters
    assert full.tools[0].HasField("input_schema") and full.tools[0].parameters
    assert basic.tools[0].fingerprint == full.tools[0].fingerprint
    got = await server.stub.GetTool(tool_service_pb2.GetToolRequest(name="echo"))
    assert got.tool.HasField("input_schema") and got.tool.examples
    assert got.tool.annotations.read_only and got.tool.source == tool_pb2.TOOL_SOURCE_BUILTIN


async def test_a_derived_input_schema_is_the_parameters_and_nothing_more(server):
    """No `$schema` in each tool: tool.proto documents JSON Schema 2020-12 for every input schema, and a URL
    repeated in each of a thousand listed tools only made the page larger for every client."""
    full = await server.stub.ListTools(tool_service_pb2.ListToolsRequest(
        tags=["gen"], page_size=1, view=tool_pb2.TOOL_VIEW_FULL))
    assert json_format.MessageToDict(full.tools[0].input_schema) == {
        "type": "object", "properties": {"text": {"type": "string"}}, "additionalProperties": False,
        "required": ["text"]}
