"""Replacing text in a file's content: literally, or by a Python regular expression run in a child process.

A regular expression cannot run in the server. Python's `re` holds the GIL for the whole of one match attempt,
so a pattern that backtracks exponentially, such as `(a+)+$` against a line of a's, would stall the event loop
and every other call with it, and a thread cannot be stopped. So the substitution runs in a short-lived child
(`python -I -S`, the standard library only, an empty environment, its own session) that is killed when the
call's time budget ends, with limits on its memory and CPU time so that it ends even if the server does not
live to kill it. Its cost is one interpreter start per call (about 20 ms).

Either way the result is never allowed to grow past the workspace's max_file_bytes: a literal replacement's size
is computed before it is made, and the child checks its result (within its memory limit) before sending it.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from dataclasses import dataclass
from typing import Any, Final

from ..errors import FieldViolation, InvalidArgumentsError
from ..runners.process_reaper import spawned_leaders, spawning
from .base import ToolRaisedFailure

_CHILD_ENVIRONMENT: Final = {"LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"}
_CHILD_MEMORY_BASE: Final = 512 * 1024 * 1024  # the interpreter and re's backtracking stack
_CHILD_MEMORY_PER_BYTE: Final = 16  # text and result as str (up to 4 bytes a character) and their copies

# The child: reads a JSON header line and the UTF-8 text from stdin, writes a JSON header line and the result.
_CHILD: Final = r"""
import json, re, resource, sys
header = json.loads(sys.stdin.buffer.readline())
resource.setrlimit(resource.RLIMIT_AS, (header["memory"], header["memory"]))
resource.setrlimit(resource.RLIMIT_CPU, (header["cpu"], header["cpu"]))
text = sys.stdin.buffer.read().decode("utf-8")
result = b""
try:
    new, count = re.compile(header["pattern"]).subn(header["replace"], text, count=header["count"])
    result = new.encode("utf-8", "surrogatepass")
    answer = {"replacements": count} if len(result) <= header["max_bytes"] else {"error": "too_large",
                                                                                 "size": len(result)}
except re.error as exc:
    answer = {"error": "replace", "message": str(exc)}
except MemoryError:
    answer = {"error": "too_large", "size": None}
if "error" in answer:
    result = b""
sys.stdout.buffer.write(json.dumps(answer).encode() + b"\n" + result)
"""


@dataclass(frozen=True, slots=True)
class Substituted:
    """The text after the substitution, and how many replacements were made."""

    text: str
    replacements: int


def substitute_literally(text: str, search: str, replace: str, count: int, max_bytes: int,
                         relative: str) -> Substituted:
    """`search` replaced by `replace`, the first `count` times (0: every time), as str.replace does."""
    found = text.count(search)
    replacements = found if count == 0 else min(found, count)
    growth = replacements * (len(replace.encode("utf-8")) - len(search.encode("utf-8")))
    _check_result_size(len(text.encode("utf-8")) + growth, max_bytes, relative)
    return Substituted(text.replace(search, replace, replacements), replacements)


def compile_pattern(search: str) -> None:
    """INVALID_ARGUMENT when `search` is no Python regular expression; compiled here, where it is cheap, so that
    the caller learns of it before a child is started."""
    try:
        re.compile(search)
    except re.error as exc:
        raise InvalidArgumentsError("", [FieldViolation(
            "/search", f"is not a valid Python regular expression: {exc}; fix it, or set regex to false to "
                       "search for the text as it is")]) from None
    except (OverflowError, RecursionError):
        raise InvalidArgumentsError("", [FieldViolation(
            "/search", "is a regular expression too large or too deeply nested to compile; simplify it")]) from None


async def substitute_by_pattern(text: str, pattern: str, replace: str, count: int, max_bytes: int,
                                relative: str, budget_seconds: float) -> Substituted:
    """`pattern` (Python `re`) replaced by the template `replace` (\\1, \\g<name>), the first `count` matches
    (0: all), in a child process killed after `budget_seconds`."""
    compile_pattern(pattern)
    header = {"pattern": pattern, "replace": replace, "count": count, "max_bytes": max_bytes,
              "memory": _CHILD_MEMORY_BASE + _CHILD_MEMORY_PER_BYTE * max_bytes,
              "cpu": int(budget_seconds) + 2}
    request = json.dumps(header).encode() + b"\n" + text.encode("utf-8")
    answer, result = await _run_child(request, budget_seconds)
    error = answer.get("error")
    if error == "replace":
        raise InvalidArgumentsError("", [FieldViolation(
            "/replace", f"is not a valid replacement for this pattern: {answer.get('message')}; write \\1 or "
                        "\\g<name> for a group the pattern has, and \\\\ for a backslash")])
    if error == "too_large":
        size = answer.get("size")
        _check_result_size(size if isinstance(size, int) else None, max_bytes, relative)
    return Substituted(result.decode("utf-8", errors="surrogatepass"), int(answer["replacements"]))


async def _run_child(request: bytes, budget_seconds: float) -> tuple[dict[str, Any], bytes]:
    # Registered as a leader the server spawned, so that its stray reaping leaves the exit status to asyncio.
    with spawning():
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-S", "-c", _CHILD, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=_CHILD_ENVIRONMENT, cwd="/",
            start_new_session=True)
        spawned_leaders.add(child.pid)
    try:
        async with asyncio.timeout(budget_seconds):
            output, errors = await child.communicate(request)
    except TimeoutError:
        raise ToolRaisedFailure(
            f"the regular expression did not finish within {budget_seconds:g}s and was stopped; a pattern with "
            "nested repetition such as (a+)+ can take exponential time: make it more specific", "TIMEOUT") from None
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
        spawned_leaders.discard(child.pid)
    header, _, result = output.partition(b"\n")
    try:
        answer = json.loads(header)
    except ValueError:
        # Killed by its CPU limit, or out of memory before it could answer.
        raise ToolRaisedFailure(
            "the regular expression used more time or memory than a substitution may "
            f"({errors.decode(errors='replace').strip()[-200:] or 'no message'}); make the pattern more "
            "specific", "TIMEOUT") from None
    return answer, result


def _check_result_size(size: int | None, max_bytes: int, relative: str) -> None:
    """FILE_TOO_LARGE when the result is larger than the workspace allows; size None: too large to be built."""
    if size is None or size > max_bytes:
        would_be = "too large to be built" if size is None else f"{size} bytes"
        raise ToolRaisedFailure(
            f"{relative!r} would be {would_be} after the replacements, more than its workspace allows for a file "
            f"({max_bytes} bytes, max_file_bytes); replace fewer matches (count) or with less text",
            "FILE_TOO_LARGE")
