"""What the process and script runners share: checks of their `runner:` keys (env, cwd, install_hint) at load,
and how an argument's numbers are written."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from typing import Any, Final

from ..model import Parameter, ToolSpec
from .base import RunnerConfigError
from .process_table import CALL_MARKER_VARIABLE

ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# How deep WholeNumbers follows a schema and a value ($ref cycles end here).
_SCHEMA_DEPTH: Final = 32
_CONTAINS_FLOATS: Final = (float, list, dict)


def check_keys(config: Mapping[str, Any], known: frozenset[str], kind: str) -> None:
    """Refuse keys the runner does not know, suggesting the closest one (a typo must not be ignored)."""
    for key in config:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(sorted(known))}"
            raise RunnerConfigError(f"a {kind} runner has no key {key!r}; {hint}")


def static_env(config: Mapping[str, Any], reserved_prefix: str = "") -> dict[str, str]:
    """The runner's `env:` mapping as strings (numbers and booleans written as in argv)."""
    value = config.get("env")
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise RunnerConfigError("env must be a mapping of variable names to values, e.g. {LC_ALL: C}")
    env: dict[str, str] = {}
    for name, raw in value.items():
        if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
            raise RunnerConfigError(f"env: {name!r} is not a variable name (letters, digits and '_', not first a "
                                    "digit)")
        if name == CALL_MARKER_VARIABLE or (reserved_prefix and name.startswith(reserved_prefix)):
            raise RunnerConfigError(f"env: {name} is set by toolhost itself; choose another name")
        if isinstance(raw, bool):
            text = "true" if raw else "false"
        elif isinstance(raw, (str, int, float)):
            text = str(raw)
        else:
            raise RunnerConfigError(f"env: {name} must be a string, number or boolean, not {type(raw).__name__}")
        if "\0" in text:
            raise RunnerConfigError(f"env: {name} contains a NUL byte, which no environment can hold")
        env[name] = text
    return env


def working_directory(config: Mapping[str, Any]) -> str | None:
    """The configured `cwd`, which must be an existing absolute directory; None for a fresh one per call."""
    cwd = config.get("cwd")
    if cwd is None:
        return None
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        raise RunnerConfigError(f"cwd must be an absolute path such as /srv/tools, not {cwd!r}; leave it out "
                                "to run each call in a fresh temporary directory")
    if not os.path.isdir(cwd):
        raise RunnerConfigError(f"cwd {cwd} is not an existing directory on this server; create it or leave "
                                "cwd out")
    return cwd


def runs_as_server_user(config: Mapping[str, Any]) -> bool:
    """Whether the operator marked the tool to run as the server's own user (`run_as_server_user: true`)
    instead of the unprivileged process user a root server uses."""
    value = config.get("run_as_server_user", False)
    if not isinstance(value, bool):
        raise RunnerConfigError("run_as_server_user must be true or false")
    return value


def install_hint(config: Mapping[str, Any]) -> str:
    """The package to suggest when the program is missing (`install_hint: iputils-ping`), or ""."""
    hint = config.get("install_hint", "")
    if not isinstance(hint, str):
        raise RunnerConfigError("install_hint must be a string naming what to install, e.g. iputils-ping")
    return hint.strip()


def declared_parameters(tool: ToolSpec) -> dict[str, Parameter | None]:
    """The tool's argument names: its `parameters`, or the properties of its `input_schema` (which carry no
    Parameter, so no allow_leading_dash)."""
    if tool.parameters:
        return {p.name: p for p in tool.parameters}
    properties = tool.input_schema.get("properties")
    names: dict[str, Parameter | None] = {}
    if isinstance(properties, Mapping):
        names.update((str(name), None) for name in properties)
    return names


class WholeNumbers:
    """Writes a whole float as an int where the tool's input schema admits no fractional number there.

    A google.protobuf.Struct carries every number as a double; the pipeline turns 3.0 back into 3 for a plain
    `type: integer`, but not behind anyOf, oneOf, allOf or a local $ref, and "3.0" is not what a program
    that takes a count expects. Numbers the schema lets be fractional are left as they are.
    """

    def __init__(self, tool: ToolSpec) -> None:
        self._root = tool.input_schema
        properties = self._root.get("properties")
        self._properties: Mapping[str, Any] = properties if isinstance(properties, Mapping) else {}

    def apply(self, name: str, value: Any) -> Any:
        """`value`, the argument `name`, with its whole floats written as ints where the schema says integer."""
        return self._convert(value, self._properties.get(name, True), 0)

    def _convert(self, value: Any, schema: Any, depth: int) -> Any:
        if isinstance(value, float):
            return int(value) if value.is_integer() and not self._allows_fractions(schema, depth) else value
        if isinstance(value, list) and any(isinstance(item, _CONTAINS_FLOATS) for item in value):
            return [self._convert(item, self._part(schema, "array", index, depth), depth + 1)
                    for index, item in enumerate(value)]
        if isinstance(value, dict) and any(isinstance(item, _CONTAINS_FLOATS) for item in value.values()):
            return {key: self._convert(item, self._part(schema, "object", key, depth), depth + 1)
                    for key, item in value.items()}
        return value

    def _allows_fractions(self, schema: Any, depth: int) -> bool:
        if not isinstance(schema, Mapping) or depth > _SCHEMA_DEPTH:
            return schema is not False
        if not _admits(schema, "number"):
            return False
        alternatives = _branches(schema, "anyOf") + _branches(schema, "oneOf")
        if alternatives and not any(self._allows_fractions(b, depth + 1) for b in alternatives):
            return False
        return all(self._allows_fractions(b, depth + 1) for b in self._all_of(schema))

    def _part(self, schema: Any, kind: str, key: int | str, depth: int) -> Any:
        """The schema of item `key` of an array or member `key` of an object (`kind`): taken from `schema` and
        from those of its branches that admit `kind`, combined as the branches combine."""
        if not isinstance(schema, Mapping) or depth > _SCHEMA_DEPTH:
            return True
        if isinstance(key, int):
            prefix = schema.get("prefixItems")
            own = prefix[key] if isinstance(prefix, list) and key < len(prefix) else schema.get("items", True)
        else:
            properties = schema.get("properties")
            if isinstance(properties, Mapping) and key in properties:
                own = properties[key]
            else:
                own = schema.get("additionalProperties", True)
        part: dict[str, Any] = {"allOf": [own, *(self._part(b, kind, key, depth + 1) for b in self._all_of(schema))]}
        alternatives = [self._part(b, kind, key, depth + 1)
                        for b in _branches(schema, "anyOf") + _branches(schema, "oneOf") if _admits(b, kind)]
        if alternatives:
            part["anyOf"] = alternatives
        return part

    def _all_of(self, schema: Mapping[str, Any]) -> list[Any]:
        """The schemas that apply together with `schema`: its allOf, and what its local $ref points at."""
        branches = _branches(schema, "allOf")
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target: Any = self._root
            for token in ref[2:].split("/"):
                token = token.replace("~1", "/").replace("~0", "~")
                target = target.get(token, True) if isinstance(target, Mapping) else True
            branches.append(target)
        return branches


def _branches(schema: Mapping[str, Any], key: str) -> list[Any]:
    value = schema.get(key)
    return list(value) if isinstance(value, list) else []


def _admits(schema: Any, kind: str) -> bool:
    """Whether `schema`'s own `type` lets a value be of JSON type `kind` ("number" includes fractions)."""
    types = schema.get("type") if isinstance(schema, Mapping) else None
    if isinstance(types, str):
        types = [types]
    return not isinstance(types, list) or kind in types
