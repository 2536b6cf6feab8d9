"""The script runner: runs a script kept in the catalog, with the call's arguments in environment variables.

    runner:
      type: script
      script: |
        #!/bin/bash
        echo "hello $TOOL_ARG_NAME"
      interpreter: bash            # optional: a program, or a list such as [python3, -u]; default: the #! line
      env: {LC_ALL: C}             # optional, as for the process runner; so are cwd and install_hint

Each call writes the script to a private file (mode 0700) in the call's own temporary directory and runs
[*interpreter, file] exactly as the process runner runs a program (same environment, capture, limits, time
out and tree kill). The interpreter is read at load from `interpreter:` or from the #! line, split as the
kernel splits it (the program, then the rest as one argument; "#!/usr/bin/env NAME" runs NAME from the fixed
PATH), so the file need not be executable and a noexec /tmp does not matter.

The file is written per call rather than once at load: a Runner has no close hook, so files written at load
would pile up across reloads, and temp cleaners delete old files under a long-running server.

Arguments: each declared parameter present in the call is in TOOL_ARG_<NAME> (the name upper-cased, any
character other than a letter or digit as "_"): strings as they are, other values as JSON (null as "null"),
a whole number written as an integer where the schema admits no fraction ("3", not "3.0").
An absent parameter leaves its variable unset. Nothing is ever spliced into the script's text. A NUL byte is
refused (InvalidArgumentsError); a leading "-" is harmless in a variable and is accepted.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any, Final

from ..errors import FieldViolation, InvalidArgumentsError
from ..model import ToolSpec
from .base import Invocation, Runner, RunnerConfigError, RunnerSettings, RunOutcome
from .process import refusal
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

ARGUMENT_PREFIX: Final = "TOOL_ARG_"
_KEYS: Final = frozenset({"type", "script", "interpreter", "env", "cwd", "install_hint", "run_as_server_user"})


def argument_variable(name: str) -> str:
    """The environment variable that carries the argument `name`: TOOL_ARG_ and the name upper-cased."""
    return ARGUMENT_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def interpreter_of(value: Any, script: str) -> tuple[str, ...]:
    """The argv that runs the script file: `interpreter:` if given, else the script's #! line."""
    if value is not None:
        if isinstance(value, str) and value.strip() and len(value.split()) == 1:
            return (value.strip(),)
        if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
            return tuple(value)
        raise RunnerConfigError("interpreter must be one program such as bash or /usr/bin/python3, or a list "
                                "with its options such as [python3, -u]")
    first_line = script.split("\n", 1)[0]
    words = first_line[2:].strip().split(None, 1) if first_line.startswith("#!") else []
    if not words:
        raise RunnerConfigError("the script must start with a #! line such as #!/bin/bash, or the runner must "
                                "name an `interpreter:` such as bash")
    if len(words) == 2 and os.path.basename(words[0]) == "env" and len(words[1].split()) == 1 \
            and not words[1].startswith("-"):
        return (words[1],)
    return tuple(words)


class ScriptRunner(Runner):
    """Runs a catalog script per call; see the module docstring for how it is run and gets its arguments."""

    kind = "script"

    def __init__(self, interpreter: tuple[str, ...], script: bytes, variables: Mapping[str, str],
                 env: Mapping[str, str], cwd: str | None, hint: str, settings: RunnerSettings,
                 numbers: WholeNumbers) -> None:
        self._interpreter = interpreter
        self._numbers = numbers
        self._script = script
        self._variables = variables
        self._env = env
        self._cwd = cwd
        self._install_hint = hint
        self._settings = settings
        self._identity: tuple[int, int] | None = settings.process_identity

    @classmethod
    def from_config(cls, config: Mapping[str, Any], tool: ToolSpec, settings: RunnerSettings) -> ScriptRunner:
        check_keys(config, _KEYS, cls.kind)
        script = config.get("script")
        if not isinstance(script, str) or not script.strip():
            raise RunnerConfigError('a script runner needs `script:`, the script\'s text, e.g. "#!/bin/bash\\n'
                                    'echo $TOOL_ARG_NAME"')
        if "\0" in script:
            raise RunnerConfigError("the script contains a NUL byte")
        interpreter = interpreter_of(config.get("interpreter"), script)
        variables: dict[str, str] = {}
        taken: dict[str, str] = {}
        for name in declared_parameters(tool):
            variable = argument_variable(name)
            if variable in taken:
                raise RunnerConfigError(f"parameters {taken[variable]!r} and {name!r} would both arrive as "
                                        f"{variable}; rename one")
            taken[variable] = name
            variables[name] = variable
        env = static_env(config, reserved_prefix=ARGUMENT_PREFIX)
        runner = cls(interpreter, script.encode("utf-8"), variables, env, working_directory(config),
                     install_hint(config), settings, WholeNumbers(tool))
        runner._identity = None if runs_as_server_user(config) else settings.process_identity
        return runner

    async def run(self, invocation: Invocation) -> RunOutcome:
        env = dict(self._env)
        problems: list[FieldViolation] = []
        for name, variable in self._variables.items():
            if name not in invocation.arguments:
                continue
            value = self._numbers.apply(name, invocation.arguments[name])
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
            reason = refusal(text, allow_leading_dash=True)
            if reason:
                problems.append(FieldViolation("/" + name.replace("~", "~0").replace("/", "~1"), reason))
            env[variable] = text
        if problems:
            raise InvalidArgumentsError(invocation.tool.name, problems)
        env.update(invocation.credentials.env())  # TOOL_CRED_<NAME>_<KEY>, only the ones the tool declares
        command = ChildCommand(tool=invocation.tool.name, argv=self._interpreter,
                               program=os.path.basename(self._interpreter[0]), env=env, cwd=self._cwd,
                               install_hint=self._install_hint, script=self._script, identity=self._identity,
                               max_output_bytes=invocation.tool.max_output_bytes)
        return await run_command(command, self._settings, invocation.events)
