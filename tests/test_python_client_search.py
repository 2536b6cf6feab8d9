"""The Python client's search_tools (toolhost.Client and toolhost.AsyncClient) against a real server: an intent's
match with its arguments as plain Python values, ready for call_tool; ranked results within the limit and the
filter; the server's refusal as InvalidArgumentError. The server runs on the test's event loop, so the blocking
Client goes through asyncio.to_thread."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import toolhost

from helpers.catalogs import write_tool
from helpers.servers import RunningServer, ServerFactory

GREET = "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:greet'}\n" \
        "parameters: [{name: name, type: string, required: true}]\n"


@pytest.fixture
async def server(start_server: ServerFactory, tmp_path: Path) -> RunningServer:
    catalog = tmp_path / "catalog"
    for index in range(12):
        tags = "tags: [garden, pruning]\n" if index < 4 else "tags: [garden]\n"
        write_tool(catalog, f"hedge_{index:02}",
                   f"name: hedge_{index:02}\ndescription: Trims the garden hedge.\ncategory: garden\n{tags}{GREET}")
    return await start_server(catalog_dirs=[catalog])


async def test_an_intents_arguments_are_plain_values_that_call_the_tool(server):
    async with toolhost.AsyncClient(server.target, timeout=30) as client:
        found = await client.search_tools("please echo this back exactly: from Python")
        first = found.results[0]
        assert (first.tool.name, first.arguments) == ("echo", {"text": "from Python"})
        assert first.matched_intent and first.tool.parameters == ()  # the basic view
        assert (await client.call_tool(first.tool.name, first.arguments)).output == "from Python"
        port = (await client.search_tools("check port 5432 on db.example.com", limit=1)).results
        assert len(port) == 1 and port[0].arguments == {"host": "db.example.com", "port": 5432}
        assert type(port[0].arguments["port"]) is int  # a whole number from the Struct's double, as _results does
        assert found.generation >= 1 and found.raw.generation == found.generation


async def test_ranked_results_keep_to_the_limit_and_the_filter(server):
    async with toolhost.AsyncClient(server.target, timeout=30) as client:
        found = await client.search_tools("garden hedge", limit=3, category="garden")
        assert len(found) == 3 and all(r.tool.name.startswith("hedge_") for r in found)
        assert all(r.matched_intent == "" and r.arguments is None for r in found)
        assert [r.score for r in found] == sorted((r.score for r in found), reverse=True)
        pruned = await client.search_tools("garden hedge", limit=50, tags=["pruning"])
        assert {r.tool.name for r in pruned} == {f"hedge_{i:02}" for i in range(4)}
        assert len(await client.search_tools("garden hedge")) == 10  # limit 0: the server's 10
        assert not (await client.search_tools("garden hedge", platform="windows")).results


async def test_the_blocking_client_searches_and_its_results_print_as_json(server):
    def search() -> toolhost.SearchResults:
        with toolhost.Client(server.target, timeout=30) as client:
            return client.search_tools("check port 5432 on db.example.com", limit=2)

    found = await asyncio.to_thread(search)
    printed = json.loads(json.dumps([result.to_dict() for result in found]))
    assert printed[0]["tool"]["name"] == "tcp_port_check"
    assert printed[0]["arguments"] == {"host": "db.example.com", "port": 5432}
    assert printed[0]["matched_intent"] == found.results[0].matched_intent != ""


async def test_refusals_are_typed_errors(server):
    async with toolhost.AsyncClient(server.target, timeout=30) as client:
        with pytest.raises(toolhost.InvalidArgumentError) as caught:
            await client.search_tools("x" * 1001)
        assert caught.value.reason == toolhost.ErrorReason.INVALID_REQUEST
        with pytest.raises(toolhost.InvalidArgumentError):
            await client.search_tools("x", limit=-1)
        with pytest.raises(TypeError, match="list of tags"):
            await client.search_tools("x", tags="garden")
