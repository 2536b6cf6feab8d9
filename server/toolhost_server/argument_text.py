"""Arguments written as text (a command line's `port=5432`, an intent's captured group) typed by the JSON type
the tool's input schema gives them, so that `"5432"` reaches a tool as the integer its schema asks for."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})
_JSON_KINDS: dict[str, type[Any]] = {"array": list, "object": dict, "null": type(None)}


class ArgumentTextError(ValueError):
    """Text that is not a value of the type asked for; the message completes "NAME ...": "must be an
    integer"."""


def property_types(input_schema: Mapping[str, Any]) -> dict[str, str]:
    """The JSON type of each property of an input schema that names one; of a union with null (["integer",
    "null"]), the other type: text never means null."""
    properties = input_schema.get("properties")
    types: dict[str, str] = {}
    if not isinstance(properties, Mapping):
        return types
    for name, schema in properties.items():
        if not isinstance(schema, Mapping):
            continue
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), None)
        if isinstance(kind, str):
            types[name] = kind
    return types


def typed_argument(text: str, kind: str | None) -> Any:
    """The value `text` stands for as a JSON `kind`; ArgumentTextError when it is not one. A string, or no type
    known, is the text itself: the schema's own check then says what is wrong."""
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            raise ArgumentTextError("must be an integer") from None
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
            raise ArgumentTextError("must be a number")
        return number
    if kind == "boolean":
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ArgumentTextError("must be true or false")
    if kind in _JSON_KINDS:
        try:
            value = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise ArgumentTextError(f"must be a JSON {kind}: {exc}") from None
        if not isinstance(value, _JSON_KINDS[kind]):
            raise ArgumentTextError(f"must be a JSON {kind}")
        return value
    return text
