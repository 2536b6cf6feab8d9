"""Fuzzing catalog files: the strict YAML reader (catalog/strict_yaml.py) with any text, and the definition parser
(catalog/definition.py: parse_definition) with documents made of the real keys and values of every kind.

What it proves:
- load_catalog_yaml gives a document or raises yaml.YAMLError (CatalogYamlError for what catalog files may not
  use: duplicate keys, aliases, merge keys, nesting past 64 levels), never another exception;
- the plain data YAML writes reads through it as through PyYAML's own safe loader (its fast path agrees with
  the full constructor), unless it refuses a value catalog files may not hold;
- parse_definition gives a ToolSpec or raises DefinitionError, never another exception, for a document of any
  shape; a DefinitionError's path points into the document and line_of finds a line of the file for it;
- a spec that parses has a valid name, and a timeout and limits that are positive numbers;
- line_of answers any path in any text with a line of that text, never an exception.

The bugs this suite found in catalog/ are fixed; their inputs are kept as explicit examples here and as cases
in tests/test_catalog_files.py.
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from toolhost_server.catalog.definition import (
    NAME_PATTERN,
    PARAMETER_KEYS,
    TOP_LEVEL_KEYS,
    DefinitionError,
    parse_definition,
)
from toolhost_server.catalog.strict_yaml import MAX_NESTING, CatalogYamlError, line_of, load_catalog_yaml
from toolhost_server.model import ToolSource

from helpers.json_strategies import BOUNDARY_INTEGERS, odd_text

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.sampled_from(BOUNDARY_INTEGERS), st.floats(),
                    st.text(max_size=12))


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.lists(children, max_size=3), st.dictionaries(st.text(max_size=8), children, max_size=3))


ANY = st.recursive(SCALARS, _containers, max_leaves=8)


# Valid definitions first (most checks pass, so the later ones are reached), then a few of their values, anywhere,
# replaced by odd ones or removed.
POSITIVE = st.one_of(st.integers(1, 10**6), st.floats(0.001, 1e6))
BOUNDS = st.one_of(st.integers(-1000, 1000), st.floats(-1e6, 1e6))
SIZES = st.integers(0, 64)
VALID_PARAMETERS = st.builds(
    lambda name, kind, more: {"name": name, "type": kind, **more},
    st.sampled_from(["host", "port", "text", "a/b~c", "count"]),
    st.sampled_from(["string", "integer", "number", "boolean", "array", "object"]),
    st.fixed_dictionaries({}, optional={
        "description": st.text(max_size=10), "required": st.booleans(), "default": SCALARS,
        "enum": st.lists(SCALARS, max_size=3), "allow_leading_dash": st.booleans(), "minimum": BOUNDS,
        "maximum": BOUNDS, "exclusive_minimum": BOUNDS, "exclusive_maximum": BOUNDS, "min_length": SIZES,
        "max_length": SIZES, "pattern": st.sampled_from(["^[a-z]+$", r"^\d+$", "(?<=a)b", ""]),
        "format": st.sampled_from(["hostname", "ipv4", "x"]),
        "items": st.fixed_dictionaries({"type": st.sampled_from(["string", "integer"])}), "min_items": SIZES,
        "max_items": SIZES}))
RUNNERS = st.one_of(
    st.fixed_dictionaries({"type": st.just("process"), "argv": st.lists(st.sampled_from(
        ["echo", "{text}", "--", "{host}"]), min_size=1, max_size=3)}),
    st.fixed_dictionaries({"type": st.just("script"), "script": st.text(min_size=1, max_size=20)}),
    st.fixed_dictionaries({"type": st.just("remote"), "target": st.sampled_from(["self", "127.0.0.1:1"])}),
    st.fixed_dictionaries({"type": st.just("python"), "entrypoint": st.sampled_from(
        ["toolhost_server.tools.samples:greet", "os:system", "nope"])}))
SCHEMAS = st.fixed_dictionaries({"type": st.just("object")}, optional={
    "properties": st.dictionaries(st.text(max_size=5), st.fixed_dictionaries(
        {"type": st.sampled_from(["string", "integer"])}), max_size=3),
    "additionalProperties": st.booleans()})
VALID_DEFINITIONS = st.fixed_dictionaries(
    {"name": st.from_regex(r"\A[A-Za-z][A-Za-z0-9_.-]{0,20}\Z"),
     "description": st.text(min_size=1, max_size=20).filter(str.strip)},
    optional={
        "display_name": st.text(max_size=10), "category": st.text(max_size=8), "platform": st.text(max_size=8),
        "version": st.one_of(st.text(max_size=6), BOUNDS), "source": st.sampled_from(["local", "pipeline"]),
        "parameters": st.lists(VALID_PARAMETERS, max_size=4, unique_by=lambda p: p["name"]),
        "output_schema": SCHEMAS, "timeout_seconds": POSITIVE, "requires_admin": st.booleans(),
        "tags": st.lists(st.text(min_size=1, max_size=8), max_size=3),
        "examples": st.lists(st.fixed_dictionaries({}, optional={
            "description": st.text(max_size=10),
            "parameters": st.dictionaries(st.sampled_from(["host", "port", "text"]), SCALARS, max_size=2)}),
            max_size=2),
        "runner": RUNNERS, "credentials": st.lists(st.sampled_from(["github", "aws.key"]), max_size=2),
        "intents": st.lists(st.sampled_from(["^disk", ".*", "free (space|disk)"]), max_size=2),
        "annotations": st.fixed_dictionaries({}, optional={"read_only": st.booleans(),
                                                           "destructive": st.booleans()}),
        "implementation": st.sampled_from(["echo", "nope"]), "max_concurrency": st.integers(1, 100),
        "max_output_bytes": st.integers(1, 10**9),
    }).map(lambda d: d if "parameters" in d else {**d, "input_schema": {"type": "object"}})
# What replaces a value: anything, and the values each check is about.
ODD_VALUES = st.one_of(ANY, st.sampled_from(
    ["", " ", "[", "(", "a{2,1}", "(?P<x", "int", "elsewhere", "bad name", "x" * 129, "1bad", -1, 0, 0.0, 10**30,
     -(10**30), 1e300, True, [], {}, [[]], [""], {"type": "string"}, {"type": 5}, None]))


@st.composite
def definitions(draw: st.DrawFn) -> dict[str, Any]:
    """A valid definition with up to three of its values (at the top or in a parameter) replaced or removed,
    or an unknown key added."""
    document = draw(VALID_DEFINITIONS)
    for _ in range(draw(st.integers(0, 3))):
        parameters = document.get("parameters")
        if isinstance(parameters, list) and parameters and draw(st.booleans()):
            target = draw(st.sampled_from([p for p in parameters if isinstance(p, dict)] or [document]))
            key = draw(st.sampled_from([*sorted(PARAMETER_KEYS), "minLength"]))
        else:
            target = document
            key = draw(st.sampled_from([*sorted(TOP_LEVEL_KEYS), "timeout_second"]))
        if key in target and draw(st.booleans()):
            del target[key]
        else:
            target[key] = draw(ODD_VALUES)
    return document


DEFINITIONS = definitions()


class _PlainDumper(yaml.SafeDumper):
    """Writes every value out, never as an alias (which a catalog file may not use)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


# The loader the strict reader builds on: libyaml's where PyYAML has it.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def yaml_lines(text: str) -> int:
    """How many lines YAML sees in `text`: it also breaks lines at \\r, NEL, U+2028 and U+2029."""
    return len(re.split("\r\n|[\n\r\x85\u2028\u2029]", text))


def dumped(document: Any, flow: bool) -> str:
    return yaml.dump(document, Dumper=_PlainDumper, default_flow_style=flow, allow_unicode=True)


# What YAML authors (and attackers) write that plain dumps never contain.
SNIPPETS = st.sampled_from([
    "a: 1\na: 2\n", "a: &x [1]\nb: *x\n", "<<: {a: 1}\n", "a: !!binary '@@'\n", "a: !!python/name:os.system\n",
    "? [a]\n: 1\n", "--- a\n--- b\n", "\ufeffa: 1\n", "a: 2024-13-45\n", "a: !!set {x}\n", "a: !local x\n",
    "[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1), "- " * 2000 + "x\n", "{a: " * 1200 + "}" * 1200,
    "a: &x [*x]\n", "a: |\n  text\n b: 1\n", "a: \"\\ud800\"\n", "a: 0x10\nb: 0o7\nc: 1:30\nd: .nan\n",
    # Found by this suite (fixed since): constructors raising AttributeError and KeyError, and a hex number of
    # 5000 digits, which str() and float() refuse.
    "a: !!timestamp x\n", "a: !!bool x\n", "version: 0x" + "f" * 5000 + "\n",
])
# Text as a catalog file gives it: decoded from UTF-8, so without lone surrogates (a file that is no UTF-8 is
# refused before YAML sees it).
TEXTS = st.one_of(
    st.builds(dumped, ANY, st.booleans()),
    st.builds(dumped, DEFINITIONS, st.booleans()),
    SNIPPETS,
    st.builds(lambda a, b: a + b, SNIPPETS, odd_text(20)),
    st.text(max_size=200),
).map(lambda text: text.encode("utf-8", "surrogatepass").decode("utf-8", "replace"))
PATHS = st.lists(st.one_of(st.sampled_from(sorted(TOP_LEVEL_KEYS | PARAMETER_KEYS)), st.integers(-2, 5),
                           st.text(max_size=4)), max_size=4).map(tuple)


@given(TEXTS, PATHS, st.booleans())
@example("a: !!timestamp x\n", (), False).via("PyYAML's timestamp constructor raised AttributeError")
@example("a: !!bool x\n", (), False).via("PyYAML's bool constructor raised KeyError")
def test_any_text_reads_to_a_document_or_a_yaml_error(text: str, path: tuple[str | int, ...], at_key: bool) -> None:
    try:
        load_catalog_yaml(text)
    except yaml.YAMLError as refused:
        str(refused).encode("utf-8")  # it is logged and shown
    line = line_of(text, path, at_key=at_key)
    assert 0 <= line <= yaml_lines(text)


@given(ANY, st.booleans())
def test_plain_data_reads_as_the_safe_loader_reads_it(document: Any, flow: bool) -> None:
    text = dumped(document, flow)
    try:
        ours = load_catalog_yaml(text)
    except CatalogYamlError:
        return  # what a catalog file may not hold, such as a number past 64 bits: refused, never misread
    # repr: NaN is not equal to itself. (Not `== document`: PyYAML writes some characters, such as NEL, where
    # its reader takes them for a line break.)
    assert repr(ours) == repr(yaml.load(text, Loader=SAFE_LOADER))


NAN_TIMEOUT = {"name": "t", "description": "d", "input_schema": {"type": "object"}, "timeout_seconds": math.nan}


@given(DEFINITIONS, st.booleans())
@example(NAN_TIMEOUT, False).via("`timeout_seconds: .nan` loaded, and the server then failed to start")
@example({"name": "t", "description": "d", "parameters": [{"name": "host", "type": []}]}, False).via(
    "a parameter type that is a list raised TypeError")
def test_a_definition_parses_to_a_spec_or_a_definition_error_with_its_line(document: dict[str, Any],
                                                                         flow: bool) -> None:
    text = dumped(document, flow)
    try:
        data = load_catalog_yaml(text)
    except CatalogYamlError:  # a value no catalog file may hold (a number past 64 bits): the reader's to refuse
        return
    try:
        spec = parse_definition(data, "fuzzed.yaml", ToolSource.CATALOG)
    except DefinitionError as refused:
        refused.reason.encode("utf-8")
        assert all(isinstance(step, str | int) for step in refused.path)
        assert 1 <= line_of(text, refused.path, at_key=refused.at_key) <= yaml_lines(text)
        return
    assert NAME_PATTERN.match(spec.name)
    assert spec.input_schema.get("type") == "object"
    for limit in (spec.timeout_seconds, spec.max_concurrency, spec.max_output_bytes):
        assert limit is None or (math.isfinite(limit) and limit > 0)


@given(st.one_of(DEFINITIONS, ANY))
def test_parse_definition_takes_any_document_shape(document: Any) -> None:
    try:
        parse_definition(document, "fuzzed.yaml", ToolSource.CATALOG)
    except DefinitionError as refused:
        refused.reason.encode("utf-8")
