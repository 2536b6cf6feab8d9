"""Attacks on SearchTools' core: hidden tools leaking through an intent, a ranked hit or a score, a catalog
author's catastrophic regular expression, oversized and odd queries."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

import httpx
import pytest

from toolhost_server.auth import ANONYMOUS, AuthMethod, Caller, Permissions, ToolSet
from toolhost_server.errors import InvalidRequestError
from toolhost_server.intent_patterns import IntentPattern
from toolhost_server.listing import ToolFilter
from toolhost_server.tool_search import MAX_QUERY_CHARACTERS

from helpers.catalogs import write_tool
from helpers.servers import ServerFactory, ServerProcess
from helpers.waiting import HANG_GUARD_SECONDS

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


# The review's patterns that backtracked exponentially (or as n^4) in Python's `re`, each with a query that took
# it from seconds to forever (`(?:x|x?)+y`: 37 s at 26 characters): RE2 answers each in linear time. Each
# pattern's third text matches it and no pattern before it.
CATASTROPHIC = [
    ("(?:x|x?)+y", "x" * MAX_QUERY_CHARACTERS, "xxxy"),
    ("(?:a|a)*b", "a" * MAX_QUERY_CHARACTERS, "aab"),
    ("(?:c|cc)+d", "c" * MAX_QUERY_CHARACTERS, "cccd"),
    ("(?:a?){25}a{25}", "a" * 24 + "#", "a" * 30),
    ("(?:e+)+f", "e" * (MAX_QUERY_CHARACTERS - 1) + "#", "eef"),
    ("(?:\\w|\\d)+!", "1" * MAX_QUERY_CHARACTERS, "12!"),
    ("(.*)(.*)(.*)(.*)!", " " * MAX_QUERY_CHARACTERS, "  !"),
    ("(?:\\s*(?P<name>\\w+)\\s*)+;", "a" * MAX_QUERY_CHARACTERS, "a b;"),
]
SLOW = """\
name: {name}
description: Greets.
runner: {{type: python, entrypoint: 'toolhost_server.tools.samples:greet'}}
parameters: [{{name: name, type: string, required: true}}]
intents: [{{pattern: '{intent}', arguments: {{name: slow}}}}]
"""


@pytest.mark.server
async def test_intents_that_backtrack_in_re_load_and_every_query_is_answered(tmp_path: Path) -> None:
    # A `toolhost serve` child, so that a regression hangs that process, not the test's: matching with a
    # backtracking engine again, it would not answer the worst query, and the hang guard would fail the test
    # naming the pattern (no bound on how fast it answers).
    for number, (pattern, _, _) in enumerate(CATASTROPHIC):
        write_tool(tmp_path, f"slow_{number}", SLOW.format(name=f"slow_{number}", intent=pattern))
    process = ServerProcess("--catalog-dir", str(tmp_path))
    try:
        await process.start()
        found = await process.wait_for_log(rb"serving HTTP \(/mcp, /ai/tools, .* on 127\.0\.0\.1:(\d+)")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{int(found.group(1))}",
                                     timeout=HANG_GUARD_SECONDS) as client:
            for number, (pattern, worst, matching) in enumerate(CATASTROPHIC):
                try:
                    answer = await client.get("/ai/tools/search", params={"q": worst})
                except httpx.TimeoutException:
                    raise AssertionError(f"no answer to the worst query of {pattern!r} (the hang guard)") from None
                assert answer.status_code == 200, answer.text
                assert not [hit for hit in answer.json()["results"] if hit["matched_intent"]], pattern
                routed = (await client.get("/ai/tools/search", params={"q": matching})).json()["results"][0]
                assert (routed["tool"]["name"], routed["matched_intent"]) == (f"slow_{number}", pattern)
    finally:
        await process.stop()


async def test_a_hidden_tool_s_intents_are_never_run_for_the_caller(start_server: ServerFactory,
                                                                    tmp_path: Path) -> None:
    # A hidden tool's intents cost a caller nothing (and time nothing about the tool): they are passed over
    # before matching, not after.
    write_tool(tmp_path / "a", "secret_ledger", TOOL.format(name="secret_ledger", intent="ledger (?P<name>\\S+)"))
    write_tool(tmp_path / "b", "open_ledger", TOOL.format(name="open_ledger", intent="ledger (?P<name>\\S+)"))
    server = await start_server(catalog_dirs=(tmp_path / "a", tmp_path / "b"))
    search = server.toolhost.tool_search
    routes = search._searching(server.toolhost.registry.snapshot).routes
    matched: list[str] = []
    routes._routes = tuple(dataclasses.replace(route, pattern=_Recorded(route.pattern, route.tool, matched))
                           for route in routes._routes)
    assert search.search("ledger alice", AGENT, ToolFilter()).hits[0].tool.spec.name == "open_ledger"
    assert matched == ["open_ledger"]
    # Seen, it is tried first (catalog order) and answers.
    assert search.search("ledger alice", ANONYMOUS, ToolFilter()).hits[0].tool.spec.name == "secret_ledger"
    assert matched[-1] == "secret_ledger"


class _Recorded:
    """An intent's pattern that notes the tool whose intent was matched against a query."""

    def __init__(self, pattern: IntentPattern, tool: str, matched: list[str]) -> None:
        self._pattern, self._tool, self._matched = pattern, tool, matched
        self.group_names, self.required_prefix = pattern.group_names, pattern.required_prefix

    def fullmatch(self, text: str) -> Mapping[str, str | None] | None:
        self._matched.append(self._tool)
        return self._pattern.fullmatch(text)


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


async def test_digits_of_other_scripts_route_no_port(start_server: ServerFactory) -> None:
    # RE2's \d is ASCII: Arabic-Indic or fullwidth digits are no port for `(?P<port>\d{1,5})`, where Python's
    # \d and int() made both 5432.
    server = await start_server()
    search = server.toolhost.tool_search
    assert search.search("check port 5432 on db", ANONYMOUS, ToolFilter()).hits[0].arguments == {
        "port": 5432, "host": "db"}
    for query in ("check port \u0665\u0664\u0663\u0662 on db", "check port \uff15\uff14\uff13\uff12 on db"):
        assert not [hit for hit in search.search(query, ANONYMOUS, ToolFilter()).hits if hit.matched_intent]
