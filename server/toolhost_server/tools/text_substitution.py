"""Replacing text in a file's content: literally, or by a Python regular expression run in a child process.

A regular expression cannot run in the server. Python's `re` holds the GIL for the whole of one match attempt
(and for the whole of a compilation: a 4 MB pattern takes seconds), so a pattern that backtracks exponentially,
such as `(a+)+$` against a line of a's, would stall the event loop and every other call with it, and a thread
cannot be stopped. So the pattern is compiled and substituted in a short-lived child (`python -I -S`, the
standard library only, an empty environment, its own session) that is killed when the call's time budget ends,
with limits on its memory and CPU time so that it ends even if the server does not live to kill it. Its cost is
one interpreter start per call (about 20 ms). Each child may use up to _CHILD_MEMORY_BASE +
_CHILD_MEMORY_PER_BYTE x max_file_bytes (672 MiB at the 10 MiB default), so at most CONCURRENT_CHILDREN run at
once in a server; a call beyond them waits for one, within its own time budget.

Either way the result is never allowed to grow past the workspace's max_file_bytes: a literal replacement's size
is computed before it is made, and the child counts the result's bytes match by match and stops at the limit.
Both report where the replacements were made (`Change`, the first MAX_CHANGES), from which the diff is built.
"""

from __future__ import annotations

import asyncio
import json
import sys
import weakref
from dataclasses import dataclass
from typing import Any, Final

from ..errors import FieldViolation, InvalidArgumentsError
from ..runners.process_reaper import spawned_leaders, spawning
from ..workspaces.paths import quoted
from .base import ToolRaisedFailure
from .text_diff import Change

CONCURRENT_CHILDREN: Final = 2
MAX_CHANGES: Final = 1000  # replacements located for the diff, which shows at most 200 lines anyway
_CHILD_ENVIRONMENT: Final = {"LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"}
_CHILD_MEMORY_BASE: Final = 512 * 1024 * 1024  # the interpreter and re's backtracking stack
_CHILD_MEMORY_PER_BYTE: Final = 16  # text and result as str (up to 4 bytes a character) and their copies

# The child: reads a JSON header line and the UTF-8 text from stdin, writes a JSON header line and the result.
# Each match is replaced through a function, so that the result's size is known before it is built and the
# places of the replacements that changed something are recorded.
_CHILD: Final = r"""
import json, re, resource, sys
header = json.loads(sys.stdin.buffer.readline())
resource.setrlimit(resource.RLIMIT_AS, (header["memory"], header["memory"]))
resource.setrlimit(resource.RLIMIT_CPU, (header["cpu"], header["cpu"]))
text = sys.stdin.buffer.read().decode("utf-8")

class TooLarge(Exception):
    pass

def answer(head, result=b""):
    sys.stdout.buffer.write(json.dumps(head).encode() + b"\n" + result)
    sys.exit(0)

try:
    pattern = re.compile(header["pattern"])
except re.error as exc:
    answer({"error": "pattern", "message": str(exc)})
except (OverflowError, RecursionError, MemoryError):
    answer({"error": "pattern", "message": "it is too large or too deeply nested to compile"})
template, limit, most = header["replace"], header["max_bytes"], header["changes"]
literal = "\\" not in template  # as re.sub takes such a template: the text itself
size = len(text.encode("utf-8"))
shift = 0
changes = []
more = False

def replaced(match):
    global size, shift, more
    new = template if literal else match.expand(template)
    old = match.group()
    if new != old:
        size += len(new.encode("utf-8", "surrogatepass")) - len(old.encode("utf-8"))
        if size > limit:
            raise TooLarge
        if len(changes) < most:
            start = match.start() + shift
            changes.append([match.start(), match.end(), start, start + len(new)])
        else:
            more = True
        shift += len(new) - len(old)
    return new

try:
    pattern.sub(template, "")  # a template that names a group the pattern lacks fails here, matches or not
    new, count = pattern.subn(replaced, text, count=header["count"])
    result = new.encode("utf-8", "surrogatepass")
except re.error as exc:
    answer({"error": "replace", "message": str(exc)})
except TooLarge:
    answer({"error": "too_large", "size": size})
except MemoryError:
    answer({"error": "too_large", "size": None})
answer({"replacements": count, "changes": changes, "more_changes": more}, result)
"""

_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


@dataclass(frozen=True, slots=True)
class Substituted:
    """The text after the substitution, how many replacements were made, and where the first MAX_CHANGES of
    those that changed something were made (`more_changes`: there were more)."""

    text: str
    replacements: int
    changes: tuple[Change, ...] = ()
    more_changes: bool = False


def substitute_literally(text: str, search: str, replace: str, count: int, max_bytes: int,
                         relative: str) -> Substituted:
    """`search` replaced by `replace`, the first `count` times (0: every time), as str.replace does; its size is
    checked (FILE_TOO_LARGE) before it is built."""
    found = text.count(search)
    replacements = found if count == 0 else min(found, count)
    growth = replacements * (len(replace.encode("utf-8")) - len(search.encode("utf-8")))
    _check_result_size(len(text.encode("utf-8")) + growth, max_bytes, relative)
    changes: list[Change] = []
    if search != replace:
        shift = len(replace) - len(search)
        position = text.find(search)
        while position >= 0 and len(changes) < min(replacements, MAX_CHANGES):
            start = position + shift * len(changes)
            changes.append(Change(position, position + len(search), start, start + len(replace)))
            position = text.find(search, position + len(search))
    return Substituted(text.replace(search, replace, replacements), replacements, tuple(changes),
                       more_changes=len(changes) < replacements and search != replace)


async def substitute_by_pattern(text: str, pattern: str, replace: str, count: int, max_bytes: int,
                                relative: str, budget_seconds: float) -> Substituted:
    """`pattern` (Python `re`) replaced by the template `replace` (\\1, \\g<name>), the first `count` matches
    (0: all), in a child process killed after `budget_seconds`, which include the wait for a free child slot.
    INVALID_ARGUMENT naming `search` or `replace` when the child cannot compile or expand them."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + budget_seconds
    slots = _slots.get(loop)
    if slots is None:
        slots = _slots[loop] = asyncio.Semaphore(CONCURRENT_CHILDREN)
    try:
        async with asyncio.timeout_at(deadline):
            await slots.acquire()
    except TimeoutError:
        raise ToolRaisedFailure(
            f"no regular-expression replacement could start within {budget_seconds:g}s: the server runs at most "
            f"{CONCURRENT_CHILDREN} at once and they were busy; try again, or use regex false", "TIMEOUT") from None
    try:
        remaining = max(deadline - loop.time(), 0.0)
        header = {"pattern": pattern, "replace": replace, "count": count, "max_bytes": max_bytes,
                  "changes": MAX_CHANGES, "memory": _CHILD_MEMORY_BASE + _CHILD_MEMORY_PER_BYTE * max_bytes,
                  "cpu": int(remaining) + 2}
        request = json.dumps(header).encode() + b"\n" + text.encode("utf-8")
        answer, result = await _run_child(request, remaining)
    finally:
        slots.release()
    error = answer.get("error")
    if error == "pattern":
        raise InvalidArgumentsError("", [FieldViolation(
            "/search", f"is not a valid Python regular expression: {answer.get('message')}; fix it, or set regex "
                       "to false to search for the text as it is")])
    if error == "replace":
        raise InvalidArgumentsError("", [FieldViolation(
            "/replace", f"is not a valid replacement for this pattern: {answer.get('message')}; write \\1 or "
                        "\\g<name> for a group the pattern has, and \\\\ for a backslash")])
    if error == "too_large":
        size = answer.get("size")
        _check_result_size(size if isinstance(size, int) else None, max_bytes, relative, at_least=True)
    changes = tuple(Change(*map(int, place)) for place in answer.get("changes", ()))
    return Substituted(result.decode("utf-8", errors="surrogatepass"), int(answer["replacements"]), changes,
                       bool(answer.get("more_changes")))


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


def _check_result_size(size: int | None, max_bytes: int, relative: str, *, at_least: bool = False) -> None:
    """FILE_TOO_LARGE when the result is larger than the workspace allows; size None: too large to be built;
    at_least: the result was given up on once it reached `size` bytes."""
    if size is None or size > max_bytes:
        would_be = ("too large to be built" if size is None else
                    f"at least {size} bytes" if at_least else f"{size} bytes")
        raise ToolRaisedFailure(
            f"{quoted(relative)} would be {would_be} after the replacements, more than its workspace allows for a "
            f"file ({max_bytes} bytes, max_file_bytes); replace fewer matches (count) or with less text",
            "FILE_TOO_LARGE")
