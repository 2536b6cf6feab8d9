"""Attacks on SearchTools' core: hidden tools leaking through an intent or a ranked hit, a catalog author's
catastrophic regular expression, oversized and odd queries."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolhost_server.auth import ANONYMOUS, AuthMethod, Caller, Permissions, ToolSet
from toolhost_server.errors import InvalidRequestError
from toolhost_server.listing import ToolFilter
from toolhost_server.tool_search import MAX_QUERY_CHARACTERS

from helpers.catalogs import write_tool
from helpers.servers import ServerFactory

TOOL = """\
name: {name}
description: Reads the quasar ledger of {name}.
runner: {{type: python, entrypoint: 'toolhost_server.tools.samples:greet'}}
parameters: [{{name: name, type: string, required: true}}]
intents: ['{intent}']
"""

AGENT = Caller("agent", frozenset({"agent"}), AuthMethod.TOKEN,
               Permissions(list=ToolSet(names=("open_*",)), call=ToolSet(names=("open_*",))))


async def test_hidden_tools_never_appear_even_when_their_intent_matches(start_server: ServerFactory,
                                                                        tmp_path: Path) -> None:
    # The hidden tool comes first in catalog order and its intent matches the very same phrase.
    write_tool(tmp_path / "a", "secret_ledger", TOOL.format(name="secret_ledger", intent="ledger (?P<name>\\S+)"))
    write_tool(tmp_path / "b", "open_ledger", TOOL.format(name="open_ledger", intent="ledger (?P<name>\\S+)"))
    server = await start_server(catalog_dirs=(tmp_path / "a", tmp_path / "b"))
    search = server.toolhost.tool_search
    found = search.search("ledger alice", AGENT, ToolFilter(), 50)
    assert [(hit.tool.spec.name, hit.arguments) for hit in found.hits] == [("open_ledger", {"name": "alice"})]
    for query in ("quasar ledger", "secret ledger", "secret_ledger", "echo", "ping example.com"):
        assert {hit.tool.spec.name for hit in search.search(query, AGENT, ToolFilter(), 50).hits} <= {"open_ledger"}
    # The generation is the caller's view's, which a change of the hidden tool does not move.
    write_tool(tmp_path / "a", "secret_ledger", TOOL.format(name="secret_ledger", intent="other (?P<name>\\S+)"))
    before = found.generation
    await server.toolhost.reloader.reload("test")
    assert search.search("ledger alice", AGENT, ToolFilter()).generation == before


async def test_a_catastrophic_intent_is_refused_at_load_and_the_rest_served(start_server: ServerFactory,
                                                                            tmp_path: Path) -> None:
    write_tool(tmp_path, "redos", TOOL.format(name="redos", intent="(?P<name>(a+)+)!"))
    write_tool(tmp_path, "open_ledger", TOOL.format(name="open_ledger", intent="ledger (?P<name>\\S+)"))
    server = await start_server(catalog_dirs=(tmp_path,))
    report = await server.toolhost.reloader.reload("test")
    problems = [p for p in report.problems if p.file.endswith("redos.yaml")]
    assert problems and "exponential time" in problems[0].reason
    snapshot = server.toolhost.registry.snapshot
    assert "redos" not in snapshot and "open_ledger" in snapshot
    # The query that would have taken exponential time with that pattern now costs one failed match per intent.
    query = "a" * (MAX_QUERY_CHARACTERS - 1) + "?"
    assert server.toolhost.tool_search.search(query, AGENT, ToolFilter()).hits == ()


@pytest.mark.parametrize("query", [
    "a" * MAX_QUERY_CHARACTERS,
    "please echo this back exactly:" + " " * (MAX_QUERY_CHARACTERS - 31) + "x",
    "how many " + "x os assets do we have " * 43,
    "check port 1 on " + "a" * 900 + " b",
    "http check https://" + "?" * 900 + " x",
    "\x00ping\x00",
    "ping \u202eexample.com",
    "\ud800 lone surrogate",
    "dns lookup " + "é" * 900,
])
async def test_hostile_queries_to_the_default_intents(start_server: ServerFactory, query: str) -> None:
    # Worst cases for the bundled patterns' backtracking, NULs, bidi overrides and lone surrogates: each is
    # answered (ranked hits or none), never an error; an unchecked host with a control character is no route.
    server = await start_server()
    found = server.toolhost.tool_search.search(query, ANONYMOUS, ToolFilter())
    routed = [hit for hit in found.hits if hit.matched_intent]
    assert not any("\x00" in str(hit.arguments) or "\u202e" in str(hit.arguments) for hit in routed)


async def test_a_query_one_character_over_is_refused(start_server: ServerFactory) -> None:
    server = await start_server()
    with pytest.raises(InvalidRequestError, match="1001 characters long; at most 1000"):
        server.toolhost.tool_search.search("é" * (MAX_QUERY_CHARACTERS + 1), AGENT, ToolFilter())
