"""Catalog intents: a regular expression or {pattern, arguments}; what is refused at load, and where."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from toolhost_server.catalog.builtins import spec_from_tool_class
from toolhost_server.catalog.definition import DefinitionError, parse_definition
from toolhost_server.model import Intent, Parameter, ToolSource
from toolhost_server.tools.echo import Echo

HEAD = """\
name: probe
description: Probes.
runner: {type: python, entrypoint: 'toolhost_server.tools.samples:greet'}
parameters:
  - {name: host, type: string, required: true}
  - {name: port, type: integer, minimum: 1}
"""


def parse(intents: str) -> Any:
    return parse_definition(yaml.safe_load(HEAD + "intents: " + intents + "\n"), "probe.yaml", ToolSource.CATALOG)


def test_both_forms_parse_in_order() -> None:
    spec = parse("['probe (?P<host>\\S+)', {pattern: 'probe db', arguments: {host: db, port: 5432}}]")
    assert spec.intents == (Intent("probe (?P<host>\\S+)"), Intent("probe db", {"host": "db", "port": 5432}))


def test_intents_change_the_content_hash() -> None:
    one, other = parse("['probe (?P<host>\\S+)']"), parse("[{pattern: 'probe (?P<host>\\S+)', arguments: {port: 1}}]")
    assert one.content_hash != other.content_hash
    assert one.content_hash == parse("['probe (?P<host>\\S+)']").content_hash


@pytest.mark.parametrize(("intents", "path", "message"), [
    ("'probe'", ("intents",), "intents must be a list"),
    ("[42]", ("intents", 0), "a regular expression or a mapping"),
    ("['probe (?P<target>\\S+)']", ("intents", 0), "'target' is not a parameter of the tool"),
    ("[{pattern: 'probe (?P<host>\\S+)', arguments: {timeout: 3}}]", ("intents", 0, "arguments", "timeout"),
     "intent argument 'timeout' is not a parameter"),
    ("[{pattern: 'probe (?P<host>\\S+)', argument: {port: 3}}]", ("intents", 0, "argument"), "did you mean"),
    ("[{arguments: {host: x}}]", ("intents", 0, "pattern"), "needs a `pattern`"),
    ("[{pattern: 'probe (?P<host>\\S+)', arguments: [port]}]", ("intents", 0, "arguments"), "must be a mapping"),
    ("[{pattern: 'probe', arguments: {port: 3}}]", ("intents", 0, "arguments"), "must be a whole valid call"),
    ("[{pattern: 'probe', arguments: {host: x, port: 0}}]", ("intents", 0, "arguments", "port"),
     "must be a whole valid call"),
    ("['probe (?P<host']", ("intents", 0), "not a regular expression toolhost can use"),
    # What RE2, which matches in linear time, does not have: each is refused, saying RE2 syntax is required.
    ("['probe (?P<host>\\w+) (?P=host)']", ("intents", 0), "RE2 syntax is required"),
    ("['probe (?P<host>\\w+) \\1']", ("intents", 0), "RE2 syntax is required"),
    ("['probe (?=db)(?P<host>\\S+)']", ("intents", 0), "RE2 syntax is required"),
    ("['probe (?<!x)(?P<host>\\S+)']", ("intents", 0), "RE2 syntax is required"),
    ("['probe (?P<host>\\w++)']", ("intents", 0), "RE2 syntax is required"),
    ("['probe (?P<host>(?>\\w+))']", ("intents", 0), "RE2 syntax is required"),
    ("['probe (?P<host>\\S+)\\Z']", ("intents", 0), "RE2 syntax is required"),
    ("['probe (?P<host>a{1001})']", ("intents", 0), "RE2 syntax is required"),
    # Linear in the query, but in proportion to the pattern's size too: 5,612 instructions.
    ("['probe (?P<host>(?:a.*){700})']", ("intents", 0), "more than the 3000 an intent may take"),
])
def test_bad_intents_are_catalog_problems(intents: str, path: tuple[Any, ...], message: str) -> None:
    with pytest.raises(DefinitionError, match=message) as caught:
        parse(intents)
    assert caught.value.path == path


@pytest.mark.parametrize("pattern", [
    "(?P<host>a+)+!", "probe (?P<host>(\\w+\\s?)*)", "(?:x|x?)+y", "(?P<host>\\p{L}+) \\p{L}+",
    "(?<host>\\S+)",
])
def test_shapes_that_backtrack_in_re_load_since_re2_does_not_backtrack(pattern: str) -> None:
    assert parse(f"[{{pattern: '{pattern}', arguments: {{host: x}}}}]").intents[0].pattern == pattern


def test_a_python_tool_s_intents_are_checked_the_same_way() -> None:
    assert spec_from_tool_class(Echo).intents[0] == Intent("ping[.!]?", {"text": "pong"})

    class BadEcho(Echo):
        name = "bad_echo"
        intents = (r"say (?P<words>.+)",)

    with pytest.raises(DefinitionError, match="'words' is not a parameter"):
        spec_from_tool_class(BadEcho)

    class Shout(Echo):
        name = "shout"
        parameters = (Parameter("text", "string", required=True),)
        intents = (Intent("shout", {"text": 3}),)

    with pytest.raises(DefinitionError, match="whole valid call"):
        spec_from_tool_class(Shout)
