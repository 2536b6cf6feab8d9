"""The arguments of `toolhost call`: --json and key=value pairs, each value typed by the tool's parameter."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from toolhost import Client, ToolInfo

from ._errors import UsageError

_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})
_JSON_KINDS: dict[str, type[Any]] = {"array": list, "object": dict, "null": type(None)}


def _argument_types(tool: ToolInfo) -> dict[str, str]:
    """The JSON type of each argument: the declared parameters, then the input schema's properties."""
    types = {p.name: p.type for p in tool.parameters}
    properties = (tool.input_schema or {}).get("properties", {})
    for name, schema in properties.items():
        if name in types or not isinstance(schema, dict):
            continue
        kind = schema.get("type")
        if isinstance(kind, list):  # ["integer", "null"]: the value given on a command line is not null
            kind = next((k for k in kind if k != "null"), None)
        if isinstance(kind, str):
            types[name] = kind
    return types


def coerce_argument(name: str, text: str, kind: str | None) -> Any:
    """The value of `name=text` for a parameter of JSON type `kind`; UsageError when it does not parse."""
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            raise UsageError(f"{name}={text!r}: {name} must be an integer") from None
    if kind == "number":
        try:
            return int(text)
        except ValueError:
            pass
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise UsageError(f"{name}={text!r}: {name} must be a number")
        return number
    if kind == "boolean":
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise UsageError(f"{name}={text!r}: {name} must be true or false")
    if kind in ("array", "object", "null"):
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise UsageError(f"{name}={text!r}: {name} must be a JSON {kind}: {exc}") from None
        if not isinstance(value, _JSON_KINDS[kind]):
            raise UsageError(f"{name}={text!r}: {name} must be a JSON {kind}")
        return value
    # A string, or an argument the tool does not declare: sent as text, and the server says what is wrong.
    return text


def call_arguments(client: Client, args: argparse.Namespace) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    if args.json_arguments is not None:
        try:
            given = json.loads(args.json_arguments)
        except ValueError as exc:
            raise UsageError(f"--json is not valid JSON: {exc}") from None
        if not isinstance(given, dict):
            raise UsageError("--json must be a JSON object, for example '{\"text\": \"hi\"}'")
        arguments.update(given)
    pairs: list[tuple[str, str]] = []
    for item in args.arguments:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{item!r} is not key=value")
        if any(key == seen for seen, _ in pairs):
            raise UsageError(f"{key} is given twice")
        pairs.append((key, value))
    if pairs:
        # The types come from the server, so that `count=3` is sent as the number the tool expects.
        types = _argument_types(client.get_tool(args.name))
        arguments.update((key, coerce_argument(key, value, types.get(key))) for key, value in pairs)
    return arguments
