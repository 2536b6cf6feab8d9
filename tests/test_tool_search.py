"""ToolSearch: intents first (typed arguments, schema checked, catalog order), then BM25 hits; its bounds; the
index following reloads. Against a real in-process server and real catalog files."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import re2

from toolhost_server.argument_text import ArgumentTextError, property_types, typed_argument
from toolhost_server.auth import ANONYMOUS
from toolhost_server.errors import InvalidRequestError
from toolhost_server.intent_patterns import compile_intent
from toolhost_server.listing import ToolFilter
from toolhost_server.model import ToolSource, ToolSpec
from toolhost_server.tool_search import MAX_QUERY_CHARACTERS, MAX_RESULTS
from toolhost_server.tool_search.index import RankedIndex

from helpers.catalogs import write_tool
from helpers.servers import ServerFactory

PORT_TOOL = """\
name: {name}
description: {description}
category: {category}
runner: {{type: python, entrypoint: 'toolhost_server.tools.samples:greet'}}
parameters:
  - {{name: host, type: string, required: true}}
  - {{name: port, type: integer, required: true, minimum: 1, maximum: {maximum}}}
  - {{name: mode, type: string, default: plain}}
intents: {intents}
"""


def port_tool(directory: Path, name: str, intents: str, maximum: int = 65535, category: str = "probes",
              description: str = "Opens a probe connection.") -> None:
    write_tool(directory, name, PORT_TOOL.format(name=name, description=description, category=category,
                                                 maximum=maximum, intents=intents))


def names(found: object) -> list[str]:
    return [hit.tool.spec.name for hit in found.hits]  # type: ignore[attr-defined]


async def test_an_intent_routes_with_typed_arguments_and_ranked_hits_follow(start_server: ServerFactory) -> None:
    server = await start_server()
    found = server.toolhost.tool_search.search("check port 5432 on db.example.com", ANONYMOUS, ToolFilter(), 5)
    first = found.hits[0]
    assert first.tool.spec.name == "tcp_port_check"
    assert first.arguments == {"port": 5432, "host": "db.example.com"}  # the integer the schema asks for
    assert first.matched_intent and first.score == 1.0
    rest = found.hits[1:]
    assert rest and all(0 < hit.score < 1 and not hit.matched_intent and hit.arguments is None for hit in rest)
    assert "tcp_port_check" not in names(found)[1:]  # the intent's tool is not repeated
    assert [hit.score for hit in rest] == sorted((hit.score for hit in rest), reverse=True)
    assert found.generation == server.toolhost.registry.snapshot.generation


async def test_constants_merge_under_the_groups_and_defaults_stay_out(start_server: ServerFactory,
                                                                      tmp_path: Path) -> None:
    port_tool(tmp_path, "db_probe", "[{pattern: 'probe (?P<host>\\S+)', arguments: {port: 5432, host: x}}]")
    server = await start_server(catalog_dirs=(tmp_path,))
    hit = server.toolhost.tool_search.search("PROBE db-1", ANONYMOUS, ToolFilter()).hits[0]
    assert (hit.tool.spec.name, hit.arguments) == ("db_probe", {"port": 5432, "host": "db-1"})


async def test_a_match_the_schema_refuses_tries_the_next_intent(start_server: ServerFactory, tmp_path: Path) -> None:
    # Catalog order: the first tool's intent matches, but its schema takes ports up to 1024 only.
    catalog = tmp_path / "a"
    port_tool(catalog, "low_probe", "['probe (?P<port>\\d+) on (?P<host>\\S+)']", maximum=1024)
    second = tmp_path / "b"
    port_tool(second, "any_probe", "['probe (?P<port>\\d+) on (?P<host>\\S+)']")
    server = await start_server(catalog_dirs=(catalog, second))
    search = server.toolhost.tool_search
    assert search.search("probe 22 on h", ANONYMOUS, ToolFilter()).hits[0].tool.spec.name == "low_probe"
    hit = search.search("probe 5432 on h", ANONYMOUS, ToolFilter()).hits[0]
    assert (hit.tool.spec.name, hit.arguments) == ("any_probe", {"port": 5432, "host": "h"})
    # No intent accepts it: ranked hits only, no arguments that would fail the call.
    found = search.search("check port 70000 on db.example.com", ANONYMOUS, ToolFilter())
    assert not any(hit.matched_intent for hit in found.hits)
    assert "tcp_port_check" in names(found)[:3]


async def test_the_filter_applies_to_intents_and_ranked_hits(start_server: ServerFactory, tmp_path: Path) -> None:
    port_tool(tmp_path, "db_probe", "['probe (?P<host>\\S+) at (?P<port>\\d+)']", category="databases")
    server = await start_server(catalog_dirs=(tmp_path,))
    search = server.toolhost.tool_search
    assert search.search("probe db at 5432", ANONYMOUS, ToolFilter()).hits[0].matched_intent
    found = search.search("probe db at 5432", ANONYMOUS, ToolFilter(category="network"))
    assert found.hits and "db_probe" not in names(found)
    assert all(hit.tool.spec.category == "network" for hit in found.hits)


async def test_bounds_of_a_search(start_server: ServerFactory) -> None:
    server = await start_server()
    search = server.toolhost.tool_search
    with pytest.raises(InvalidRequestError, match="at most 1000"):
        search.search("a" * (MAX_QUERY_CHARACTERS + 1), ANONYMOUS, ToolFilter())
    assert search.search("port " * (MAX_QUERY_CHARACTERS // 5), ANONYMOUS, ToolFilter()).hits
    with pytest.raises(InvalidRequestError, match="page_size must not be negative"):
        search.search("port", ANONYMOUS, ToolFilter(), -1)
    for empty in ("", "   ", "\n\t"):
        assert search.search(empty, ANONYMOUS, ToolFilter()).hits == ()
    assert search.search("?!", ANONYMOUS, ToolFilter()).hits == ()  # no word in it
    # "server" is in many tools' text: the default of 10, and never more than 50.
    assert len(search.search("server", ANONYMOUS, ToolFilter(), 0).hits) == 10
    assert len(search.search("server tool text output host", ANONYMOUS, ToolFilter(), 500).hits) <= MAX_RESULTS
    assert len(search.search("server", ANONYMOUS, ToolFilter(), 2).hits) == 2


async def test_the_index_follows_reloads(start_server: ServerFactory, tmp_path: Path) -> None:
    port_tool(tmp_path, "db_probe", "[]", description="Opens a probe connection to a zanzibar database.")
    server = await start_server(catalog_dirs=(tmp_path,))
    toolhost, search = server.toolhost, server.toolhost.tool_search
    assert names(search.search("zanzibar", ANONYMOUS, ToolFilter())) == ["db_probe"]
    port_tool(tmp_path, "db_probe", "['quokka (?P<host>\\S+) (?P<port>\\d+)']",
              description="Opens a probe connection to a quokka database.")
    await toolhost.reload(ANONYMOUS, "test")
    assert search.search("zanzibar", ANONYMOUS, ToolFilter()).hits == ()
    hit = search.search("quokka h 80", ANONYMOUS, ToolFilter()).hits[0]
    assert (hit.tool.spec.name, hit.arguments) == ("db_probe", {"host": "h", "port": 80})
    (tmp_path / "db_probe.yaml").unlink()
    await toolhost.reload(ANONYMOUS, "test")
    assert search.search("quokka h 80", ANONYMOUS, ToolFilter()).hits == ()


def spec(name: str, description: str) -> ToolSpec:
    return ToolSpec(name=name, description=description, input_schema={"type": "object"}, runner={},
                    source=ToolSource.CATALOG, origin="test", tags=("probe",))


def test_a_patched_index_ranks_as_one_built_anew() -> None:
    specs = [spec(f"tool_{i}", f"word{i % 7} common text number{i} shared") for i in range(40)]
    first = RankedIndex(specs)
    changed = list(specs)
    changed[3] = dataclasses.replace(specs[3], description="entirely new words quasar")
    del changed[10]
    changed.append(spec("tool_new", "quasar common"))
    patched, fresh = RankedIndex(changed, first), RankedIndex(changed)
    for query in ("quasar", "common", "word3 shared", "number10", "number3", "tool probe", "entirely common"):
        assert patched.top(query, 10, patched.everything) == fresh.top(query, 10, fresh.everything), query
    # The previous snapshot's index still answers as before: nothing was patched in place.
    assert [name for name, _ in first.top("number10", 5, first.everything)] == ["tool_10"]
    assert first.top("quasar", 5, first.everything) == []


def test_a_view_ranks_as_an_index_of_its_tools_alone() -> None:
    # Scores over a view are those of an index that never held the other tools: their count, their lengths and
    # the words they use change nothing (ranking statistics over hidden tools would say they exist).
    specs = [spec(f"tool_{i}", f"word{i % 7} common text number{i} shared") for i in range(40)]
    specs += [spec("hidden_one", "common common quasar word3 " * 20), spec("hidden_two", "shared word1")]
    seen = [s for s in specs if not s.name.startswith("hidden")]
    whole, alone = RankedIndex(specs), RankedIndex(seen)
    view = whole.visible(s.name for s in seen)
    for query in ("common", "word3 shared", "quasar word1", "number10 text", "tool probe"):
        assert whole.top(query, 50, view) == alone.top(query, 50, alone.everything), query
    assert whole.top("common", 50, whole.everything) != alone.top("common", 50, alone.everything)
    # The excluded tool (an intent's match, shown first) is left out, and the count still filled.
    assert [name for name, _ in whole.top("number10 number11", 1, view, excluded="tool_10")] == ["tool_11"]


INTENT_PATTERNS = ["run job (?P<text>\\S+) on tool_00010", "ping[.!]?", "dns lookup (?:for |of )?(?P<domain>\\S+)",
                   "(?:x|x?)+y", ".*foo", "abc|abd", "ab(?i)cd", "(?i:Ab)c", "a{0}bc", "\\Qa.b\\E+", "k+s", "é+x",
                   "(?-i:Ping) (?P<host>.+)", "^check port (?P<port>\\d+)$", "[Ss]how (?P<text>.*)",
                   "show (?P<text>.*)"]
INTENT_QUERIES = ["run job x on tool_00010", "RUN JOB x ON TOOL_00010", "run jo", "ping", "PING!", "Ping.", "pin",
                  "dns lookup for a.b", "DNS LOOKUP a", "xxy", "XY", "y", "a foo", "abd", "ABD", "abCD", "ABCD",
                  "aBc", "Abc", "bc", "BC", "a.b", "A.B", "a.ba.b", "kks", "KKS", "\u212a\u017f", "\u212aK\u017fS",
                  "éx", "ÉX", "Ping db", "ping db", "PING db", "check port 80", "CHECK PORT 80", "show x",
                  "Show Me", "\u017fhow x", "", " ping", "ping\n"]


@pytest.mark.parametrize("pattern", INTENT_PATTERNS)
def test_an_intent_matches_exactly_what_re2_matches(pattern: str) -> None:
    # The pattern's literal start passes most queries over before RE2 runs: never one RE2 would match.
    compiled = compile_intent(pattern)
    options = re2.Options()
    options.case_sensitive, options.dot_nl = False, True
    plain = re2.compile(pattern, options)
    for query in INTENT_QUERIES:
        expected = plain.fullmatch(query)
        assert compiled.fullmatch(query) == (expected.groupdict() if expected else None), (pattern, query)


async def test_a_query_whose_start_re2_folds_to_ascii_still_routes(start_server: ServerFactory) -> None:
    # The long s folds to s in RE2: the intents' quick test of their literal start must not pass it over.
    server = await start_server()
    found = server.toolhost.tool_search.search("\u017fhow directory of c drive on host1", ANONYMOUS, ToolFilter())
    assert (found.hits[0].tool.spec.name, found.hits[0].arguments) == ("windows_list_directory", {"host": "host1"})


@pytest.mark.parametrize(("text", "kind", "value"), [
    ("5432", "integer", 5432), ("2.5", "number", 2.5), ("7", "number", 7), ("Yes", "boolean", True),
    ("off", "boolean", False), ("[1]", "array", [1]), ('{"a": 1}', "object", {"a": 1}), ("x y", "string", "x y"),
    ("x", None, "x"),
])
def test_text_is_typed_by_the_schema(text: str, kind: str | None, value: object) -> None:
    assert typed_argument(text, kind) == value


@pytest.mark.parametrize(("text", "kind"), [("5432x", "integer"), ("nan", "number"), ("maybe", "boolean"),
                                            ("{", "array"), ("[1]", "object"), ("[" * 100_000, "array")])
def test_text_of_another_type_is_refused(text: str, kind: str) -> None:
    with pytest.raises(ArgumentTextError, match="must be"):
        typed_argument(text, kind)


def test_property_types_take_the_non_null_type() -> None:
    schema = {"properties": {"a": {"type": ["integer", "null"]}, "b": {"type": "string"}, "c": {}, "d": True}}
    assert property_types(schema) == {"a": "integer", "b": "string"}
