"""SearchTools, the search_tools tool and `toolhost tools search` under attack: a tool the caller may not see never
appears (not as a ranked result, not as an intent's match, not through the tool, and the visible results are the
same as on a server without it); a caller without credentials learns nothing; hostile queries are text, never
patterns, and their bound counts characters; an intent's captured text reaches a terminal escaped. Real servers,
real subprocesses and pseudo-terminals."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
from google.protobuf import json_format

from toolhost.v1 import tool_service_pb2

from helpers.auth import CATALOG, GREET, Tokens, auth_file_text
from helpers.catalogs import write_tool
from helpers.cli import cli_env
from helpers.cli import toolhost as toolhost_piped
from helpers.servers import RunningServer, ServerFactory
from helpers.terminal import toolhost_on_terminals

VAULT_INTENT = "intents: ['open the vault for (?P<name>\\w+)']\n"
VAULT_QUERY = "open the vault for bob"


def write_catalog(directory: Path, with_secret: bool = True) -> Path:
    """helpers.auth's catalog, the hidden secret_tool answering an intent; without it when asked."""
    for name, extra in CATALOG.items():
        if name == "secret_tool" and not with_secret:
            continue
        intent = VAULT_INTENT if name == "secret_tool" else ""
        write_tool(directory, name, f"name: {name}\ndescription: Test tool {name}.\n{extra}{intent}{GREET}")
    return directory


@pytest.fixture
def tokens() -> Tokens:
    return Tokens.generate()


async def served(start_server: ServerFactory, tmp_path: Path, tokens: Tokens, with_secret: bool = True,
                 name: str = "catalog") -> RunningServer:
    auth_file = tmp_path / f"{name}-auth.yaml"
    auth_file.write_text(auth_file_text(tokens, agent_calls='["echo_*", admin_tool, search_tools]'))
    return await start_server(catalog_dirs=[write_catalog(tmp_path / name, with_secret)], auth_file=auth_file)


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


async def search(server: RunningServer, token: str, query: str, **fields: object
                 ) -> tool_service_pb2.SearchToolsResponse:
    request = tool_service_pb2.SearchToolsRequest(query=query, **fields)  # type: ignore[arg-type]
    return await server.stub.SearchTools(request, metadata=bearer(token))


def names(response: tool_service_pb2.SearchToolsResponse) -> list[str]:
    return [result.tool.name for result in response.results]


async def test_a_hidden_tool_never_appears_ranked_or_by_its_intent(start_server, tmp_path, tokens):
    server = await served(start_server, tmp_path, tokens)
    admin = await search(server, tokens.admin, VAULT_QUERY)
    # The admin sees it: the intent is real, so the agent's empty answer below is about visibility.
    assert names(admin)[0] == "secret_tool"
    assert json_format.MessageToDict(admin.results[0].arguments) == {"name": "bob"}
    for query in (VAULT_QUERY, "secret_tool", "Test tool secret_tool", "secret"):
        agent = await search(server, tokens.agent, query, page_size=50)
        assert "secret_tool" not in names(agent), query
        assert all(not r.matched_intent and not r.HasField("arguments") for r in agent.results), query


async def test_what_a_caller_sees_is_the_same_as_on_a_server_without_the_hidden_tool(start_server, tmp_path, tokens):
    with_it = await served(start_server, tmp_path, tokens)
    without_it = await served(start_server, tmp_path, tokens, with_secret=False, name="without")
    for query in ("Test tool", "Test tool secret_tool", VAULT_QUERY, "echo_one net_probe"):
        seen = await search(with_it, tokens.agent, query, page_size=50)
        unseen = await search(without_it, tokens.agent, query, page_size=50)
        assert set(names(seen)) == set(names(unseen)), query
    # The generation a caller is told is its view's: the hidden tool's existence does not show there either.
    assert (await search(with_it, tokens.agent, "x")).generation == (await search(without_it, tokens.agent,
                                                                                  "x")).generation


async def test_the_search_tools_tool_shows_only_what_its_caller_sees(start_server, tmp_path, tokens):
    server = await served(start_server, tmp_path, tokens)
    for query in (VAULT_QUERY, "Test tool secret_tool"):
        request = tool_service_pb2.CallToolRequest(name="search_tools", arguments_json=json.dumps(
            {"query": query, "limit": 50}))
        response = await server.stub.CallTool(request, metadata=bearer(tokens.agent))
        assert response.success, response.error
        assert "secret_tool" not in response.output
        found = json_format.MessageToDict(response.structured_output)["results"]
        assert "secret_tool" not in [r["name"] for r in found], query
        # Not empty for want of results: the words match the visible test tools too.
        assert found or query == VAULT_QUERY
    request = tool_service_pb2.CallToolRequest(name="search_tools", arguments_json=json.dumps({"query": VAULT_QUERY}))
    admin = await server.stub.CallTool(request, metadata=bearer(tokens.admin))
    assert json_format.MessageToDict(admin.structured_output)["results"][0]["name"] == "secret_tool"


async def test_without_credentials_a_search_is_unauthenticated_before_its_filter_is_read(
        start_server, tmp_path, tokens):
    server = await served(start_server, tmp_path, tokens)
    for metadata in ((), bearer("not-a-token-of-this-server-at-all-0123456789")):
        for request in (tool_service_pb2.SearchToolsRequest(query=VAULT_QUERY),
                        tool_service_pb2.SearchToolsRequest(query="x" * 5000, provider="no_such", page_size=-1)):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await server.stub.SearchTools(request, metadata=metadata)
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert "secret_tool" not in (caught.value.details() or "")


HOSTILE_QUERIES = [
    "(((((((((((((((((((((((((a*)*)*)*)*)*)*)*)*)*)*)*)*)*)*)*)*)*)*)*)*)*)*)*)*)*",  # a pattern, were it one
    ".*", "[", "\\", "(?P<x>", "open the vault for .*", "\x00", "echo\x00secret_tool", "\u202eloot_tsoh\u202c",
    "\x1b]52;c;ZXZpbA==\x07", "a" * 1000, "(" * 1000, "\U0001f600" * 1000, "é" * 1000,
]


async def test_hostile_queries_are_searched_as_text(start_server, tmp_path, tokens):
    server = await served(start_server, tmp_path, tokens)
    for query in HOSTILE_QUERIES:
        assert "secret_tool" not in names(await search(server, tokens.agent, query, page_size=50)), query
        # The admin sees every intent (the vault's, echo's ...): a query is matched against them as text, so
        # "open the vault for .*" is no name, and a pattern-like query is no pattern.
        response = await search(server, tokens.admin, query, page_size=50)
        assert all(not r.matched_intent for r in response.results), query


async def test_the_query_bound_counts_characters(start_server, tmp_path, tokens):
    server = await served(start_server, tmp_path, tokens)
    for character in ("a", "é", "\U0001f600", "\x00"):
        assert (await search(server, tokens.agent, character * 1000)).generation >= 1
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await search(server, tokens.agent, character * 1001)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert character * 20 not in (caught.value.details() or ""), "the refusal does not echo the query back"


async def test_an_intents_captured_text_reaches_a_terminal_escaped(start_server, tmp_path):
    (tmp_path / "empty").mkdir()
    server = await start_server(catalog_dirs=[tmp_path / "empty"])
    hostile = "\x1b]52;c;ZXZpbA==\x07\x1b[2J\rok"
    query = f"please echo this back exactly: {hostile}"
    shown = await toolhost_on_terminals("tools", "search", query,
                                        env=cli_env(TOOLHOST_TARGET=server.target, COLUMNS="300"))
    assert shown.code == 0, shown.err
    assert "toolhost call echo" in shown.out
    assert not any(control in shown.out for control in ("\x1b", "\x07", "\r")), repr(shown.out)
    piped = await toolhost_piped("--target", server.target, "tools", "search", query, "--json")
    assert piped.code == 0, piped.err
    # Into a pipe the JSON carries the text exactly, and parses to it.
    assert json.loads(piped.out)[0]["arguments"] == {"text": hostile}
