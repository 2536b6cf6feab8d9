"""Checks of the `runner:` keys that the process and script runners share (env, cwd, install_hint), at load."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from typing import Any, Final

from ..model import Parameter, ToolSpec
from .base import RunnerConfigError
from .process_tree import CALL_MARKER_VARIABLE

ENV_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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
        if not isinstance(name, str) or not ENV_NAME.match(name):
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
