"""The process runner: runs one program, its argv built from a template where each placeholder is one argument.

    runner:
      type: process
      argv: ["ping", "-c", "{count}", "--", "{host}"]
      env: {LC_ALL: C}                # optional, added to the minimal environment
      cwd: /srv/tools                 # optional; default: a fresh temporary directory per call
      install_hint: iputils-ping      # optional, quoted when the program is missing

Rules of the template, checked at load:
  * argv[0], the program, is fixed: never a placeholder. It is looked up in the child's fixed PATH.
  * A placeholder `{name}` is a whole argv element and names a declared parameter. It is never spliced into
    a longer string: "--count={count}" is refused at load; write "--count", "{count}". There is no shell.
  * Other braces are literal: "{}" (as in find -exec) and "{print $1}" (it holds a space) are no
    placeholders. An element that is exactly {word} always is one, so such a literal cannot be written.
How a value becomes arguments, at each call:
  * a string is one element as is; a number is str(value), a whole one as an integer where the schema
    admits no fraction ("3", not "3.0"); a boolean is "true" or "false";
  * an array gives one element per item (an empty array gives none); an object gives one element, its JSON;
  * an absent optional parameter without default, or null, gives no element at all.
  * A value (or array item) starting with "-" is refused unless the parameter has `allow_leading_dash: true`,
    since the program would read it as an option; a NUL byte is always refused. Refusals are the caller's
    mistake: InvalidArgumentsError, which the API reports as INVALID_ARGUMENT.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..errors import FieldViolation, InvalidArgumentsError
from ..model import ToolSpec
from ..tools.base import ToolRaisedFailure
from .base import Invocation, Runner, RunnerConfigError, RunnerSettings, RunOutcome, ToolFailure
from .egress_hosts import egress_hosts, pin_egress_hosts
from .process_config import (
    WholeNumbers,
    check_keys,
    declared_parameters,
    install_hint,
    runs_as_server_user,
    static_env,
    working_directory,
)
from .process_launch import ChildCommand, run_command

_PLACEHOLDER: Final = re.compile(r"\{([^{}\s]+)\}")
_EMBEDDED_PLACEHOLDER: Final = re.compile(r"\{[^{}\s]+\}")
_KEYS: Final = frozenset({"type", "argv", "env", "cwd", "install_hint", "run_as_server_user", "egress_hosts"})


@dataclass(frozen=True, slots=True)
class _Slot:
    """An argv element filled from the argument `name` at each call."""

    name: str
    allow_leading_dash: bool


class ArgvTemplate:
    """A checked argv template (see the module docstring): literal strings and argument slots."""

    def __init__(self, parts: tuple[str | _Slot, ...], numbers: WholeNumbers) -> None:
        self._parts = parts
        self._numbers = numbers

    @property
    def program(self) -> str:
        """The program's name as messages show it."""
        first = self._parts[0]
        assert isinstance(first, str)
        return os.path.basename(first)

    @classmethod
    def parse(cls, argv: Any, tool: ToolSpec) -> ArgvTemplate:
        """The template `argv` describes for `tool`, or RunnerConfigError saying how to fix it."""
        if not isinstance(argv, list) or not argv:
            raise RunnerConfigError('a process runner needs `argv:`, a list such as ["ping", "-c", "{count}", '
                                    '"--", "{host}"]')
        declared = declared_parameters(tool)
        parts: list[str | _Slot] = []
        for index, element in enumerate(argv):
            if not isinstance(element, str):
                raise RunnerConfigError(f"argv element #{index + 1} ({element!r}) must be a string; quote it")
            if "\0" in element:
                raise RunnerConfigError(f"argv element #{index + 1} contains a NUL byte")
            match = _PLACEHOLDER.fullmatch(element)
            if match is None:
                if _EMBEDDED_PLACEHOLDER.search(element):
                    raise RunnerConfigError(
                        f"argv element {element!r} puts a placeholder inside a longer string; a placeholder must "
                        'be a whole element, so that a value is always exactly one argument: write "--count", '
                        '"{count}" rather than "--count={count}"')
                parts.append(element)
                continue
            if index == 0:
                raise RunnerConfigError(f"argv[0] is the program and must be fixed, not the placeholder {element}")
            name = match.group(1)
            if name not in declared:
                known = ", ".join(sorted(declared)) or "none"
                raise RunnerConfigError(f"argv placeholder {element} names no parameter of tool {tool.name!r} "
                                        f"(declared parameters: {known}); declare it or fix the name")
            parameter = declared[name]
            parts.append(_Slot(name, parameter is not None and parameter.allow_leading_dash))
        if not parts[0]:
            raise RunnerConfigError("argv[0] must name the program to run, e.g. ping or /usr/bin/ping")
        return cls(tuple(parts), WholeNumbers(tool))

    def render(self, tool: str, arguments: Mapping[str, Any]) -> tuple[str, ...]:
        """The argv for one call, or InvalidArgumentsError listing every refused value."""
        argv: list[str] = []
        problems: list[FieldViolation] = []
        for part in self._parts:
            if isinstance(part, str):
                argv.append(part)
                continue
            value = arguments.get(part.name)
            if value is None:
                continue
            value = self._numbers.apply(part.name, value)
            pointer = "/" + part.name.replace("~", "~0").replace("/", "~1")
            if isinstance(value, list):
                items = [(f"{pointer}/{i}", _argument_text(item)) for i, item in enumerate(value)]
            else:
                items = [(pointer, _argument_text(value))]
            for where, text in items:
                reason = refusal(text, part.allow_leading_dash)
                if reason:
                    problems.append(FieldViolation(where, reason))
                else:
                    argv.append(text)
        if problems:
            raise InvalidArgumentsError(tool, problems)
        return tuple(argv)


def _argument_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def refusal(text: str, allow_leading_dash: bool) -> str:
    """Why `text` cannot be handed to a program, or "" when it can."""
    if "\0" in text:
        return "contains a NUL byte, which cannot be passed to a program"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode text (it holds a lone surrogate)"
    if text.startswith("-") and not allow_leading_dash:
        return ("starts with '-', which the program would read as an option; this parameter does not accept "
                "such values (the tool can allow them with allow_leading_dash: true)")
    return ""


class ProcessRunner(Runner):
    """Runs a program per call with the arguments in argv; see the module docstring for the rules."""

    kind = "process"

    def __init__(self, template: ArgvTemplate, env: Mapping[str, str], cwd: str | None, hint: str,
                 settings: RunnerSettings) -> None:
        self._template = template
        self._env = env
        self._cwd = cwd
        self._install_hint = hint
        self._settings = settings
        self._identity: tuple[int, int] | None = settings.process_identity
        self._egress_hosts: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, config: Mapping[str, Any], tool: ToolSpec, settings: RunnerSettings) -> ProcessRunner:
        check_keys(config, _KEYS, cls.kind)
        template = ArgvTemplate.parse(config.get("argv"), tool)
        runner = cls(template, static_env(config), working_directory(config), install_hint(config), settings)
        runner._identity = None if runs_as_server_user(config) else settings.process_identity
        runner._egress_hosts = egress_hosts(config, tool)
        return runner

    async def run(self, invocation: Invocation) -> RunOutcome:
        arguments = invocation.arguments
        if self._egress_hosts:
            try:
                arguments = await pin_egress_hosts(arguments, self._egress_hosts, invocation.timeout_seconds)
            except ToolRaisedFailure as exc:
                return RunOutcome(failure=ToolFailure(exc.code, exc.message))
        argv = self._template.render(invocation.tool.name, arguments)
        env = {**self._env, **invocation.credentials.env()} if invocation.credentials else self._env
        command = ChildCommand(tool=invocation.tool.name, argv=argv, program=self._template.program, env=env,
                               cwd=self._cwd, install_hint=self._install_hint, identity=self._identity,
                               max_output_bytes=invocation.tool.max_output_bytes)
        return await run_command(command, self._settings, invocation.events)
