"""Warns about process tools whose argv hands a parameter to a shell or interpreter as code.

A process tool never runs a shell, but its argv may start one: ["sh", "-c", "{command}"] makes a parameter the
script, and every caller runs any command. Such an argv is not refused (an operator may mean it), but warned
about, at load (in the log) and by `toolhost catalog validate`. A program counts by its basename wherever it
appears in argv, so wrappers (env, sudo, timeout, kubectl exec ... --) do not hide it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from .definition import DocumentPath

_PLACEHOLDER: Final = re.compile(r"\{([^{}\s]+)\}")  # the process runner's: a whole argv element


def _prefixes(word: str) -> str:
    return "|".join(word[:length] for length in range(1, len(word) + 1))


# (program basename, the flag that takes code to run), both matched in full. A shell's -c may sit in a cluster
# (-ec, -lc); python's code ends its cluster (-Ic) or follows it directly; perl's and ruby's -e ends theirs
# (-ne, -lne) after flags that take no value; PowerShell takes any prefix of its parameter names.
_INTERPRETERS: Final = tuple(
    (re.compile(program), re.compile(flag)) for program, flag in (
        (r"(?:ba|da|z|k|mk|pdk|a|ya|c|tc|rba)?sh|ksh93|fish|xonsh|nu|elvish",
         r"-[A-Za-z]*c[A-Za-z]*|--command(?:=.*)?"),
        (r"(?:python|pypy)[0-9.]*[mw]?", r"-[bBdEhiIOPqRsSuvVx]*c.*"),
        (r"perl[0-9.]*", r"-[aAcfFlnpsStTuUvwWX0-9]*[eE]"),
        (r"(?:j|truffle)?ruby[0-9.]*", r"-[acdlnpsSvwWy0-9]*e|--eval(?:=.*)?"),
        (r"node(?:js)?[0-9]*|bun", r"-[pe]|-pe|--eval(?:=.*)?|--print(?:=.*)?"),
        (r"deno", r"eval"),
        (r"php[0-9.]*(?:-cli)?", r"-[rBRE]"),
        (r"lua(?:jit)?[0-9.]*", r"-e"),
        (r"expect", r"-c"),
        (r"osascript|rscript", r"-e"),
        (r"julia", r"-[eE]|--eval|--print"),
        (r"g?awk", r"-e|--source(?:=.*)?"),
        (r"pwsh|powershell",
         rf"(?i)[-/](?:{_prefixes('command')}|{_prefixes('encodedcommand')}|ec|cwa|commandwithargs)"),
        (r"cmd", r"/[ckCK]"),
    ))


@dataclass(frozen=True, slots=True)
class InlineCodeWarning:
    """An argv that passes a parameter to inline code: `path` leads to the placeholder in the document."""

    path: DocumentPath
    message: str


def inline_code_warnings(runner: Mapping[str, Any]) -> list[InlineCodeWarning]:
    """The warnings for a tool's `runner:` mapping (none unless it is a process runner with such an argv)."""
    argv = runner.get("argv")
    if runner.get("type") != "process" or not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        return []
    for index, element in enumerate(argv):
        flags = _code_flag_of(element)
        if flags is None:
            continue
        for flag_index in range(index + 1, len(argv)):
            if flags.fullmatch(argv[flag_index]):
                warning = _warning(argv, index, flag_index)
                if warning is not None:
                    return [warning]
                break
    return []


def _code_flag_of(element: str) -> re.Pattern[str] | None:
    """The code flag of the interpreter `element` names (by basename, any case, without .exe), or None."""
    program = element.replace("\\", "/").rsplit("/", 1)[-1].lower().removesuffix(".exe")
    for name, flag in _INTERPRETERS:
        if name.fullmatch(program):
            return flag
    return None


def _warning(argv: Sequence[str], program_index: int, flag_index: int) -> InlineCodeWarning | None:
    placeholders = [(i, argv[i]) for i in range(flag_index + 1, len(argv)) if _PLACEHOLDER.fullmatch(argv[i])]
    if not placeholders:
        return None
    flag = argv[flag_index]
    program = f"{argv[program_index]} {flag}"
    # The code is the flag's own value (--eval=...), or else the element after it ("--" aside).
    code_index = flag_index + 1
    if code_index < len(argv) and argv[code_index] == "--":
        code_index += 1
    index, placeholder = placeholders[0]
    if "=" not in flag and index == code_index:
        message = (f"argv runs `{program} {placeholder}`: the parameter is the code {argv[program_index]} runs, so "
                   "any caller runs any command with the server's rights. Prefer a fixed program that takes the "
                   "value as one argument, or a script runner (arguments arrive as environment variables)")
    else:
        message = (f"argv runs `{program}` with inline code and passes {placeholder} after it: if that code "
                   "evaluates the value (eval, exec, source, or perl -n/-p opening it as a file name), any caller "
                   "runs any command with the server's rights. Prefer a script runner (arguments arrive as "
                   "environment variables) or a program that takes the value as data")
    return InlineCodeWarning(("runner", "argv", index), message)
