"""The arguments of `toolhost call`: --json and key=value pairs, each value typed by the tool's parameter."""

from __future__ import annotations

import argparse
import json
from typing import Any

from toolhost import Client, ToolInfo

from ..argument_text import ArgumentTextError, property_types, typed_argument
from ._errors import UsageError


def _argument_types(tool: ToolInfo) -> dict[str, str]:
    """The JSON type of each argument: the declared parameters, then the input schema's properties."""
    return {**property_types(tool.input_schema or {}), **{p.name: p.type for p in tool.parameters}}


def coerce_argument(name: str, text: str, kind: str | None) -> Any:
    """The value of `name=text` for a parameter of JSON type `kind`; UsageError when it does not parse."""
    try:
        return typed_argument(text, kind)
    except ArgumentTextError as exc:
        raise UsageError(f"{name}={text!r}: {name} {exc}") from None


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
