"""JSON Schema for tool arguments: derive it from declared parameters, and validate calls against it.

Validators are compiled once per tool at load (jsonschema-rs, measured about 100x faster than the pure-Python
jsonschema here), so a call only pays for the check itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import jsonschema_rs

from .errors import FieldViolation, InvalidArgumentsError
from .model import Parameter


def derive_input_schema(parameters: tuple[Parameter, ...]) -> dict[str, Any]:
    """The JSON Schema (2020-12) of an arguments object with exactly these parameters.

    Without a `$schema` member: the API documents 2020-12 as the dialect of every input schema (tool.proto) and
    it is what the validator assumes, while the same URL in every listed tool made a FULL ListTools page of
    small tools 16% larger, and an agent's prompt longer (bench/findings/mcp_compare.md)."""
    properties: dict[str, Any] = {}
    for p in parameters:
        prop: dict[str, Any] = {"type": p.type}
        if p.description:
            prop["description"] = p.description
        if p.enum:
            prop["enum"] = list(p.enum)
        if p.has_default:
            prop["default"] = p.default
        prop.update(p.schema)
        properties[p.name] = prop
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    required = [p.name for p in parameters if p.required]
    if required:
        schema["required"] = required
    return schema


def check_schema(schema: Mapping[str, Any]) -> str | None:
    """Why `schema` is not a usable JSON Schema, or None when it is."""
    try:
        jsonschema_rs.validator_for(dict(schema))
    except (jsonschema_rs.ValidationError, ValueError, TypeError) as exc:
        return f"not a valid JSON Schema: {exc}"
    return None


# The schema object compile_validator compiled last, kept alive so that its identity cannot be reused: a tool's
# input schema is compiled to check its examples and then again by its ArgumentValidator, which need not.
_last_compiled: list[Mapping[str, Any] | None] = [None]


def compile_validator(schema: Mapping[str, Any]) -> jsonschema_rs.Validator:
    """jsonschema_rs.validator_for(schema), remembering that this very object compiles."""
    validator = jsonschema_rs.validator_for(dict(schema))
    _last_compiled[0] = schema
    return validator


class ArgumentValidator:
    """Validates and completes the arguments of one tool.

    `prepare` fills in defaults, turns whole floats into ints where the schema says integer (a
    google.protobuf.Struct carries every number as a double), then validates. It returns a new dict and
    never changes its input.
    """

    def __init__(self, schema: Mapping[str, Any]) -> None:
        # Compiled here, so that a schema jsonschema-rs cannot use is refused when the tool loads, but kept only
        # once the tool is called: a compiled validator holds about 4 KB, which a catalog of thousands of tools,
        # most of them seldom called, would otherwise keep for each one.
        if schema is not _last_compiled[0]:  # the same object compiled a moment ago needs no second check
            jsonschema_rs.validator_for(dict(schema))
        self._compiled: jsonschema_rs.Validator | None = None
        self._schema = schema
        properties = schema.get("properties")
        self._properties: Mapping[str, Any] = properties if isinstance(properties, Mapping) else {}
        self._defaults = {
            name: prop["default"]
            for name, prop in self._properties.items()
            if isinstance(prop, Mapping) and "default" in prop
        }

    @property
    def _validator(self) -> jsonschema_rs.Validator:
        compiled = self._compiled
        if compiled is None:  # two first calls at once may both compile; either result serves
            compiled = self._compiled = jsonschema_rs.validator_for(dict(self._schema))
        return compiled

    def prepare(self, tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The completed arguments, or InvalidArgumentsError naming every problem."""
        prepared: dict[str, Any] = {}
        for name, value in arguments.items():
            prop = self._properties.get(name)
            prepared[name] = _coerce_integers(value, prop) if isinstance(prop, Mapping) else value
        for name, default in self._defaults.items():
            if name not in prepared:
                # A copy through JSON, so a call that mutates a list default cannot change the next call's.
                prepared[name] = json.loads(json.dumps(default))
        violations = [v for error in self._validator.iter_errors(prepared) for v in self._violations(error)]
        if violations:
            raise InvalidArgumentsError(tool, violations)
        return prepared

    def _violations(self, error: jsonschema_rs.ValidationError) -> list[FieldViolation]:
        """Point each problem at the argument it is about, not at the enclosing object."""
        base = _pointer(error.instance_path)
        kind = error.kind
        if isinstance(kind, jsonschema_rs.ValidationErrorKind.Required):
            return [FieldViolation(f"{base}/{_escape(kind.property)}", "required argument is missing")]
        if isinstance(kind, jsonschema_rs.ValidationErrorKind.AdditionalProperties):
            known = ", ".join(sorted(self._properties)) if not base else ""
            hint = f"; the arguments are: {known}" if known else ""
            return [FieldViolation(f"{base}/{_escape(name)}", f"unknown argument{hint}") for name in kind.unexpected]
        return [FieldViolation(base, _shortened(error.message))]


# A violation quotes the value it is about, as long as the caller sent it: the status carries each message three
# times (grpc-message, the Status's message and its BadRequest), and a gRPC client refuses more than 8 KiB of
# them by default, so a long one keeps its start and its end (where the reason is).
_MAX_VIOLATION_CHARS = 300


def _shortened(message: str) -> str:
    if len(message) <= _MAX_VIOLATION_CHARS:
        return message
    half = _MAX_VIOLATION_CHARS // 2
    return f"{message[:half]} ... {message[-half:]}"


def _coerce_integers(value: Any, schema: Mapping[str, Any]) -> Any:
    kind = schema.get("type")
    if isinstance(value, float) and value.is_integer() and _allows(kind, "integer"):
        return int(value)
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_coerce_integers(v, schema["items"]) for v in value]
    if isinstance(value, dict) and isinstance(schema.get("properties"), Mapping):
        props = schema["properties"]
        return {k: _coerce_integers(v, props[k]) if isinstance(props.get(k), Mapping) else v
                for k, v in value.items()}
    return value


def _allows(kind: Any, wanted: str) -> bool:
    return kind == wanted or (isinstance(kind, list) and wanted in kind and "number" not in kind)


def _escape(token: Any) -> str:
    return str(token).replace("~", "~0").replace("/", "~1")


def _pointer(path: Any) -> str:
    return "".join("/" + _escape(p) for p in path)
