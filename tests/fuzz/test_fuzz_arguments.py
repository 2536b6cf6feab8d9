"""Fuzzing a call's arguments against tool schemas made of the keywords toolhost's schemas use (type, enum,
default, minimum, maximum, exclusiveMinimum, exclusiveMaximum, minLength, maxLength, pattern, format, items,
minItems, maxItems, required, additionalProperties: false).

What it proves:
- the checks a call's arguments pass through (request_checks.check_key_count, check_arguments, then the tool's
  ArgumentValidator.prepare, in the pipeline's order) either accept them or raise InvalidArgumentsError or
  InvalidRequestError, whatever the values: huge integers, NaN and the infinities, lone surrogates, control
  characters, hundreds of keys, hundreds of levels of nesting; never another exception;
- a refusal's message can be sent (UTF-8 text) and each field violation points into the arguments (a JSON
  pointer);
- accepted arguments are valid by the reference validator (the `jsonschema` package, Draft 2020-12), hold every
  required and defaulted argument and nothing undeclared, carry whole numbers as int where the schema says
  integer, and the caller's dict is left unchanged;
- end to end, a real server answers CallTool with any request bytes (arguments_json of any text, any bytes in
  its string fields, a Struct of any values) with OK or INVALID_ARGUMENT / NOT_FOUND carrying toolhost's
  ErrorInfo, never INTERNAL or UNKNOWN; and a call with valid arguments succeeds and echoes its text.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import grpc
import jsonschema
from google.protobuf import struct_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from hypothesis import example, given, reject, settings
from hypothesis import strategies as st

from toolhost.v1 import tool_service_pb2
from toolhost_server.catalog.definition import DefinitionError, check_defaults
from toolhost_server.errors import InvalidArgumentsError, InvalidRequestError
from toolhost_server.model import PARAMETER_TYPES, Parameter
from toolhost_server.request_checks import MAX_OPEN_ARGUMENT_KEYS, check_arguments, check_key_count
from toolhost_server.schema import ArgumentValidator, check_schema, derive_input_schema

from helpers.json_strategies import BOUNDARY_INTEGERS, json_scalars, json_values, nested, odd_text

TYPES = sorted(PARAMETER_TYPES)
# Patterns of the kinds toolhost's own tools use (anchored classes, counted repeats, a lookahead). None uses \s or
# `.`: ECMA-262 (what JSON Schema and jsonschema-rs follow) and Python's re, which the reference validator uses,
# disagree on which characters those match.
PATTERNS = ("^[a-z]+$", r"^\d{1,3}$", r"^[A-Za-z0-9.-]{1,253}$", r"^(?!-)[A-Za-z0-9_.:-]+$", "é", r"^\S*$", "",
            "^(a|b)*c?$")
FORMATS = ("date-time", "ipv4", "hostname", "uri", "email")
NUMBERS = st.one_of(st.integers(-1000, 1000), st.floats(-1e6, 1e6), st.sampled_from(BOUNDARY_INTEGERS))
SIZES = st.integers(0, 8)
# Parameter names as a catalog file may spell them, with the JSON pointer's own `~` and `/` among them.
NAMES = st.text(st.sampled_from("abcxyz_-~/.0é"), min_size=1, max_size=6)


def item_schemas() -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(lambda kind, more: {"type": kind, **more}, st.sampled_from(TYPES),
                     st.fixed_dictionaries({}, optional={"minimum": NUMBERS, "maxLength": SIZES}))


KEYWORDS = st.fixed_dictionaries({}, optional={
    "minimum": NUMBERS, "maximum": NUMBERS, "exclusiveMinimum": NUMBERS, "exclusiveMaximum": NUMBERS,
    "minLength": SIZES, "maxLength": SIZES, "pattern": st.sampled_from(PATTERNS),
    "format": st.sampled_from(FORMATS), "items": item_schemas(), "minItems": SIZES, "maxItems": SIZES})


def values_of(kind: str) -> st.SearchStrategy[Any]:
    """Values near what a parameter of type `kind` takes, and some that are not."""
    typed: dict[str, st.SearchStrategy[Any]] = {
        "string": odd_text(12), "integer": st.one_of(st.integers(), st.sampled_from(BOUNDARY_INTEGERS)),
        "number": st.one_of(NUMBERS, st.floats()), "boolean": st.booleans(),
        "array": st.lists(json_scalars(), max_size=10), "object": st.dictionaries(odd_text(6), json_scalars()),
    }
    return st.one_of(typed[kind], json_values(8))


@st.composite
def parameters(draw: st.DrawFn) -> Parameter:
    kind = draw(st.sampled_from(TYPES))
    # Defaults and enum members without lone surrogates: a catalog file cannot spell one (YAML refuses them).
    plain = st.one_of(st.integers(-5, 5), st.text(max_size=4), st.booleans(), st.none(), st.floats(-9, 9))
    fields: dict[str, Any] = {"enum": tuple(draw(st.lists(plain, max_size=4)))}
    if draw(st.booleans()):
        fields["default"] = draw(st.one_of(plain, st.lists(plain, max_size=3)))
    return Parameter(draw(NAMES), kind, required=draw(st.booleans()), schema=draw(KEYWORDS), **fields)


@st.composite
def tool_schemas(draw: st.DrawFn) -> tuple[tuple[Parameter, ...], dict[str, Any]]:
    """Parameters and the input schema derived from them, such as a catalog file could declare: unique names,
    a schema jsonschema-rs compiles and defaults that fit (what loading a catalog file requires). Now and then
    the schema leaves additionalProperties open, as an `input_schema:` of a catalog file may."""
    declared = tuple(draw(st.lists(parameters(), max_size=5, unique_by=lambda p: p.name)))
    schema = derive_input_schema(declared)
    if draw(st.booleans()):
        del schema["additionalProperties"]
    if check_schema(schema) is not None:
        reject()
    try:
        check_defaults(declared)
    except DefinitionError:
        reject()
    return declared, schema


@st.composite
def arguments_for(draw: st.DrawFn, declared: tuple[Parameter, ...]) -> dict[str, Any]:
    """Some of the declared arguments with values of every sort, and now and then undeclared ones, deep ones or
    more keys than any tool takes."""
    arguments = {p.name: draw(values_of(p.type)) for p in declared if draw(st.booleans())}
    shape = draw(st.sampled_from(["declared", "extra", "deep", "many"]))
    if shape == "extra":
        arguments.update(draw(st.dictionaries(odd_text(8), json_values(), max_size=3)))
    elif shape == "deep":
        arguments[draw(st.sampled_from([p.name for p in declared] or ["deep"]))] = draw(nested(200))
    elif shape == "many":
        count = draw(st.integers(MAX_OPEN_ARGUMENT_KEYS - 2, MAX_OPEN_ARGUMENT_KEYS + 40))
        arguments.update({f"k{index}": index for index in range(count)})
    return arguments


def checked(validator: ArgumentValidator, schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """What the pipeline does with a call's arguments once the tool is found, in its order."""
    check_key_count("fuzzed", arguments, schema)
    check_arguments(arguments)
    return validator.prepare("fuzzed", arguments)


def snapshot(value: Any) -> str:
    """A comparable picture of `value`, NaN and lone surrogates included."""
    return json.dumps(value, sort_keys=True, default=repr)


@st.composite
def calls(draw: st.DrawFn) -> tuple[tuple[Parameter, ...], dict[str, Any], dict[str, Any]]:
    declared, schema = draw(tool_schemas())
    return declared, schema, draw(arguments_for(declared))


OPTIONS = (Parameter("options", "object"),)


@given(calls())
@example((OPTIONS, derive_input_schema(OPTIONS), {"options": {"ratio": math.nan}})).via(
    "NaN, which JSON has no number for, reached the tool inside an object the schema does not look into")
def test_arguments_are_accepted_valid_or_refused_with_a_documented_error(
        call: tuple[tuple[Parameter, ...], dict[str, Any], dict[str, Any]]) -> None:
    declared, schema, arguments = call
    before = snapshot(arguments)
    try:
        prepared = checked(ArgumentValidator(schema), schema, arguments)
    except (InvalidArgumentsError, InvalidRequestError) as refused:
        refused.message.encode("utf-8")  # it becomes the gRPC status message
        if isinstance(refused, InvalidArgumentsError):
            assert refused.violations
            assert all(v.pointer == "" or v.pointer.startswith("/") for v in refused.violations)
        return
    finally:
        assert snapshot(arguments) == before, "the caller's arguments were changed"
    jsonschema.Draft202012Validator(schema).validate(prepared)
    if schema.get("additionalProperties", True) is False:
        assert prepared.keys() <= {p.name for p in declared}
    assert not [v for v in _leaves(prepared) if isinstance(v, float) and not math.isfinite(v)], "not JSON"
    for p in declared:
        if p.required or p.has_default:
            assert p.name in prepared
        if p.type == "integer" and p.name in arguments:
            assert isinstance(prepared[p.name], int), f"{p.name}: whole number {prepared[p.name]!r} left a float"


def _leaves(value: Any) -> list[Any]:
    """The scalars inside `value`, without recursion (values may nest hundreds of levels)."""
    found, pending = [], [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        else:
            found.append(item)
    return found


# End to end: a real server, its catalog one tool of many keywords run by the built-in echo.
FUZZ_TOOL = """\
name: fuzz_target
description: Echoes `text`; its other parameters use every keyword toolhost's schemas use.
source: local
implementation: echo
parameters:
  - {name: text, type: string, required: true, max_length: 64}
  - {name: count, type: integer, minimum: 0, maximum: 10, default: 1}
  - {name: ratio, type: number, exclusive_minimum: 0, exclusive_maximum: 1}
  - {name: mode, type: string, enum: [fast, slow]}
  - {name: host, type: string, pattern: '^[A-Za-z0-9.-]{1,253}$', format: hostname}
  - {name: tags, type: array, items: {type: string, max_length: 8}, min_items: 1, max_items: 3}
  - {name: options, type: object}
  - {name: verbose, type: boolean}
"""
# Open arguments (no additionalProperties: false), as a catalog's own input_schema may leave them.
FUZZ_OPEN_TOOL = """\
name: fuzz_open
description: Echoes `text` and takes any other argument.
source: local
implementation: echo
input_schema: {type: object, properties: {text: {type: string}}, required: [text]}
"""
NAMES_CALLED = ("echo", "fuzz_target", "fuzz_open", "no_such_tool")
ALLOWED_REFUSALS = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND}


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        out.append((number & 0x7F) | (0x80 if number > 0x7F else 0))
        number >>= 7
        if not number:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field, written by hand: any bytes, UTF-8 or not, as another client may."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _struct_request(name: str, arguments: dict[str, Any]) -> bytes:
    struct = struct_pb2.Struct()
    try:
        struct.update(arguments)
        return tool_service_pb2.CallToolRequest(name=name, arguments=struct).SerializeToString()
    except (ValueError, TypeError, OverflowError, UnicodeError):
        reject()  # not representable as a Struct: no client can send it


def requests() -> st.SearchStrategy[bytes]:
    """Serialized CallToolRequests: arguments_json of any text (lone surrogates become invalid UTF-8), any bytes
    in the name and arguments_json, a Struct of any values, and a call id of any text."""
    name = st.sampled_from(NAMES_CALLED)
    many_keys = st.integers(MAX_OPEN_ARGUMENT_KEYS - 10, MAX_OPEN_ARGUMENT_KEYS + 10).map(
        lambda count: json.dumps({"text": "x", **{f"k{index}": index for index in range(count)}}))
    text = st.one_of(st.builds(json.dumps, json_values()), odd_text(60), st.builds(json.dumps, nested(120)),
                     st.just('{"text": "a", "n": ' + "9" * 5000 + "}"), many_keys)
    as_json = st.builds(lambda n, t: _field(1, n.encode()) + _field(3, t.encode("utf-8", "surrogatepass")), name, text)
    raw = st.builds(lambda n, b: _field(1, n) + _field(3, b), st.one_of(name.map(str.encode), st.binary(max_size=8)),
                    st.binary(max_size=60))
    struct = st.builds(_struct_request, name, st.dictionaries(st.text(max_size=6), json_values(), max_size=4))
    call_id = st.builds(lambda request, call: request + _field(4, call.encode("utf-8", "surrogatepass")),
                        as_json, odd_text(10))
    return st.one_of(as_json, raw, struct, call_id)


# JSON as a well-behaved client sends it: finite numbers, text without lone surrogates, printable keys.
PRINTABLE_KEYS = st.text(st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp")), max_size=5)


def _clean_containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.lists(children, max_size=3), st.dictionaries(PRINTABLE_KEYS, children, max_size=3))


CLEAN_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text()),
    _clean_containers, max_leaves=10)
VALID_CALLS = st.fixed_dictionaries(
    {"text": st.text(max_size=64)},
    optional={"count": st.integers(0, 10), "ratio": st.floats(0, 1, exclude_min=True, exclude_max=True),
              "mode": st.sampled_from(["fast", "slow"]), "host": st.from_regex(r"\A[A-Za-z0-9.-]{1,253}\Z"),
              "tags": st.lists(st.text(max_size=8), min_size=1, max_size=3),
              "options": st.dictionaries(PRINTABLE_KEYS, CLEAN_JSON, max_size=4), "verbose": st.booleans()})


def _fuzz_calls(target: str) -> None:
    """The properties, run in a thread with a blocking channel while the server's event loop serves them."""
    examples = max(30, settings.default.max_examples // 4)  # a server call costs milliseconds: fewer of them
    with grpc.insecure_channel(target) as channel:
        call = channel.unary_unary("/toolhost.v1.ToolService/CallTool", request_serializer=None,
                                   response_deserializer=tool_service_pb2.CallToolResponse.FromString)

        @settings(max_examples=examples)
        @given(requests())
        @example(_field(1, b"echo") + _field(3, b'{"text": ' + b"9" * 5000 + b"}")).via(
            "a number past Python's int_max_str_digits was INTERNAL")
        def any_request_is_answered_ok_or_refused(request: bytes) -> None:
            try:
                call(request, timeout=30)
            except grpc.RpcError as refused:
                code = refused.code()
                assert code in ALLOWED_REFUSALS, f"{code}: {refused.details()}"
                status = rpc_status.from_call(refused)
                if status is not None:  # the runtime's own refusal of bytes it cannot parse carries none
                    info = error_details_pb2.ErrorInfo()
                    assert any(d.Unpack(info) for d in status.details if d.Is(info.DESCRIPTOR))
                    assert info.domain == "toolhost"

        @settings(max_examples=examples)
        @given(VALID_CALLS)
        def valid_arguments_are_served(arguments: dict[str, Any]) -> None:
            request = tool_service_pb2.CallToolRequest(name="fuzz_target", arguments_json=json.dumps(arguments))
            response = call(request.SerializeToString(), timeout=30)
            assert response.success, response.error
            assert response.output == arguments["text"] or response.redacted  # text that looks like a secret

        any_request_is_answered_ok_or_refused()
        valid_arguments_are_served()


async def test_call_tool_answers_any_request_ok_or_with_a_documented_refusal(start_server, tmp_path: Path) -> None:
    (tmp_path / "fuzz_target.yaml").write_text(FUZZ_TOOL)
    (tmp_path / "fuzz_open.yaml").write_text(FUZZ_OPEN_TOOL)
    server = await start_server(catalog_dirs=[tmp_path])
    assert {"fuzz_target", "fuzz_open"} <= server.toolhost.registry.snapshot.tools().keys()
    await asyncio.to_thread(_fuzz_calls, server.target)
