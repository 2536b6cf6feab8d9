"""Running ripgrep (`rg`) for the grep tool and reading its JSON lines, within bounds.

rg runs as `rg --no-config --json --no-require-git [-i] [-C n] [--glob=G] -e PATTERN -- TARGET`: no config file
and a minimal environment (so neither RIPGREP_CONFIG_PATH nor a user's global gitignore can change a search), no
symlink following (rg's default: no -L), ignore files (.gitignore, .ignore, .rgignore) respected in any
workspace, git repository or not, unless `no_ignore`. The pattern always follows -e, so one that starts with
"-" is still a pattern; TARGET follows "--".

Output is read as it comes and rg is stopped as soon as the call has what it asked for (`limit` results, or the
answer's budget), so a pattern that matches everywhere costs what the caller sees, not what the tree holds. Any
one line of rg's output is kept to MAX_EVENT_BYTES; a longer one is reported cut, from its start. The budget is
in bytes of the answer, each result counted as its JSON encoding (where a control character takes six bytes and
"é" two), so that a result always fits the output limit (an answer over it would be refused whole).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ..runners.process_launch import NO_HOME, SAFE_PATH
from ..runners.process_reaper import spawned_leaders, spawning

RIPGREP_MISSING: Final = "ripgrep (rg) is not installed"

OutputMode = Literal["content", "files_with_matches", "count"]
OUTPUT_MODES: Final = ("content", "files_with_matches", "count")

MAX_LINE_CHARS: Final = 2000  # of one line shown; longer ones are cut and said so
# Bytes of the answer kept for what surrounds the results (warnings, the other fields).
ANSWER_RESERVE_BYTES: Final = 32 * 1024
MAX_WARNING_CHARS: Final = 300
# A result's cost beyond its JSON encoding: the separators, the pretty rendering's indent, a cut line's note.
_RESULT_OVERHEAD_BYTES: Final = 48
MAX_EVENT_BYTES: Final = 1 << 20  # of one JSON line of rg's
MAX_STDERR_BYTES: Final = 64 * 1024
MAX_WARNINGS: Final = 20
_CHUNK_BYTES: Final = 1 << 16
_TAIL_BYTES: Final = 4096
_ENVIRONMENT: Final = {"PATH": SAFE_PATH, "LANG": "C.UTF-8", "HOME": NO_HOME}


def find_ripgrep() -> str | None:
    """The rg program on the server's PATH, or None."""
    return shutil.which("rg")


@dataclass(frozen=True, slots=True)
class RipgrepQuery:
    """One search, as the grep tool's arguments give it."""

    pattern: str
    output_mode: OutputMode = "files_with_matches"
    case_insensitive: bool = False
    context: int = 0
    glob: str = ""
    no_ignore: bool = False
    limit: int = 100

    def argv(self, program: str, target: str) -> list[str]:
        argv = [program, "--no-config", "--json", "--no-require-git"]
        if self.case_insensitive:
            argv.append("-i")
        if self.output_mode == "content" and self.context:
            argv += ["-C", str(self.context)]
        if self.output_mode == "files_with_matches":
            argv += ["--max-count", "1"]  # a file's first match is all this mode needs of it
        if self.no_ignore:
            argv.append("--no-ignore")
        if self.glob:
            argv.append(f"--glob={self.glob}")  # one argument, whatever the glob starts with
        return [*argv, "-e", self.pattern, "--", target]


@dataclass(frozen=True, slots=True)
class MatchLine:
    """A line rg reported: a match, or (match False) a context line around one."""

    path: str
    line: int | None
    text: str
    match: bool
    cut: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "text": self.text, "match": self.match, "cut": self.cut}


@dataclass(slots=True)
class RipgrepResult:
    """What one search found, sorted by path (then line): `lines` in content mode, `files` in
    files_with_matches mode, `counts` (matching lines per file) in count mode. `truncated` when more was there
    than the limit (or the text budget) let through; `warnings` are rg's complaints about files it could not
    read."""

    lines: list[MatchLine] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    truncated: bool = False
    warnings: list[str] = field(default_factory=list)


class RipgrepRefused(Exception):
    """rg refused an argument before searching (a pattern or glob that does not compile): its own message."""

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(message)
        self.argument = argument
        self.message = message


class RipgrepFailed(Exception):
    """rg ended in a way that is neither a result nor a refusal."""


async def run_ripgrep(program: str, query: RipgrepQuery, *, cwd: str, target: str,
                      shown_as: Callable[[str], str], pass_fds: tuple[int, ...] = (),
                      before_exec: Callable[[], None] | None = None,
                      user: tuple[int, int] | None = None, max_output_bytes: int = 1024 * 1024) -> RipgrepResult:
    """Search `target` (as rg is to be given it, from `cwd`) for `query`; `shown_as` turns a path rg reports into
    the path shown to the caller; `pass_fds` are inherited by rg (a file it is to read as /proc/self/fd/N);
    `max_output_bytes` bounds the answer (results at their JSON size; see the module docstring);
    `before_exec` runs in the child (a LandlockRuleset's restrict_self); `user` is the (uid, gid) rg runs as,
    None the server's own. Raises RipgrepRefused or RipgrepFailed; rg is stopped on every way out, cancellation
    included."""
    # The child enters `cwd` before it drops to `user` (subprocess's order), so a working directory reached through
    # /proc/self/fd works even beneath directories the user may not enter; the files rg opens are checked as the
    # user's. No supplementary group of the server's carries over.
    uid, gid = user if user is not None else (None, None)
    groups: list[int] | None = None if user is None else []
    with spawning():
        process = await asyncio.create_subprocess_exec(
            *query.argv(program, target), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, cwd=cwd, env=_ENVIRONMENT, start_new_session=True, pass_fds=pass_fds,
            preexec_fn=before_exec, user=uid, group=gid, extra_groups=groups)
        spawned_leaders.add(process.pid)
    assert process.stdout is not None and process.stderr is not None
    collector = _Collector(query, shown_as, max_output_bytes)
    stderr = asyncio.ensure_future(_read_capped(process.stderr, MAX_STDERR_BYTES))
    try:
        stopped = await _collect(process.stdout, collector)
        if stopped:
            _kill(process)
        returncode = await process.wait()
        errors = (await stderr).decode("utf-8", errors="replace").strip()
    finally:
        if process.returncode is None:  # cancelled: the call's time ran out, or its caller went away
            _kill(process)
            # asyncio reaps it; until then the server's stray reaper must leave it alone.
            pid = process.pid
            asyncio.ensure_future(process.wait()).add_done_callback(lambda _: spawned_leaders.discard(pid))
        else:
            spawned_leaders.discard(process.pid)
        stderr.cancel()
    if not stopped and returncode not in (0, 1):
        if returncode == 2 and not collector.events:
            raise RipgrepRefused("glob" if errors.startswith("error parsing glob") else "pattern",
                                 errors or "rg refused the arguments")
        if returncode != 2:
            raise RipgrepFailed(f"rg exited with status {returncode}: {_last_line(errors)}")
    return collector.result(errors.splitlines() if returncode == 2 else [])


class _Collector:
    """Keeps what the call asked for from rg's events; `feed` says when that is complete."""

    def __init__(self, query: RipgrepQuery, shown_as: Callable[[str], str], max_output_bytes: int) -> None:
        self.query = query
        self.shown_as = shown_as
        self.events = 0
        self.truncated = False
        self.lines: list[MatchLine] = []
        self.files: dict[str, None] = {}
        self.counts: dict[str, int] = {}
        self._matches = 0
        self._budget = max(max_output_bytes - ANSWER_RESERVE_BYTES, max_output_bytes // 2)
        self._spent = 0
        self._last_match: MatchLine | None = None

    def feed(self, event: Mapping[str, Any]) -> bool:
        """Take one event; True when nothing more is wanted (and `truncated` says whether more was there)."""
        self.events += 1
        kind = event.get("type")
        data = event.get("data")
        if kind not in ("match", "context", "end") or not isinstance(data, Mapping):
            return False
        path = self.shown_as(_decoded(data.get("path"), "backslashreplace"))
        mode = self.query.output_mode
        if mode == "files_with_matches":
            if kind == "match" and path not in self.files:
                if len(self.files) == self.query.limit or not self._afford(path):
                    return self._cut()
                self.files[path] = None
        elif mode == "count":
            matched = _matched_lines(data) if kind == "end" else 0
            if matched:
                if len(self.counts) == self.query.limit or not self._afford({"path": path, "count": matched}):
                    return self._cut()
                self.counts[path] = matched
        elif kind != "end":
            text, cut = _line_text(data.get("lines"), bool(event.get("overlong")))
            line = data.get("line_number")
            shown = MatchLine(path, line if isinstance(line, int) else None, text, kind == "match", cut)
            if (shown.match and self._matches == self.query.limit) or not self._afford(shown.as_dict()):
                self._drop_context_of_the_next_match()
                return self._cut()
            if shown.match:
                self._matches += 1
                self._last_match = shown
            self.lines.append(shown)
        return False

    def result(self, warnings: list[str]) -> RipgrepResult:
        return RipgrepResult(
            lines=sorted(self.lines, key=lambda m: (m.path, m.line or 0)),
            files=sorted(self.files), counts=dict(sorted(self.counts.items())),
            truncated=self.truncated,
            warnings=[_cut_warning(warning) for warning in warnings[:MAX_WARNINGS]])

    def _afford(self, result: object) -> bool:
        """Whether `result` still fits the answer's budget; if so it is counted."""
        cost = len(json.dumps(result, ensure_ascii=False).encode("utf-8", "replace")) + _RESULT_OVERHEAD_BYTES
        if self._spent + cost > self._budget:
            return False
        self._spent += cost
        return True

    def _cut(self) -> bool:
        self.truncated = True
        return True

    def _drop_context_of_the_next_match(self) -> None:
        """Context lines that came after the last match kept and are not its trailing context belong to the
        match that was left out."""
        kept = self._last_match
        while self.lines and not self.lines[-1].match:
            last = self.lines[-1]
            if (kept is not None and last.path == kept.path and last.line is not None and kept.line is not None
                    and last.line <= kept.line + self.query.context):
                break
            self.lines.pop()


async def _collect(stdout: asyncio.StreamReader, collector: _Collector) -> bool:
    """Feed rg's output to `collector` until it has enough (True) or rg's output ends (False)."""
    lines = _JsonLines()
    while chunk := await stdout.read(_CHUNK_BYTES):
        for event in lines.feed(chunk):
            if collector.feed(event):
                return True
    return False


class _JsonLines:
    """Splits rg's output into its JSON events, keeping at most MAX_EVENT_BYTES of any one line (and its last
    few KiB, where a match's line number is): a longer event is rebuilt from those, marked "overlong"."""

    def __init__(self) -> None:
        self._line = bytearray()
        self._overlong = False
        self._tail = b""

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            self._add(chunk[start:] if end < 0 else chunk[start:end])
            if end < 0:
                return events
            event = self._finish()
            if event is not None:
                events.append(event)
            start = end + 1

    def _add(self, piece: bytes) -> None:
        if not self._overlong:
            room = MAX_EVENT_BYTES - len(self._line)
            self._line += piece[:room]
            if len(piece) <= room:
                return
            self._overlong = True
            piece = piece[room:]
        self._tail = (self._tail + piece)[-_TAIL_BYTES:]

    def _finish(self) -> dict[str, Any] | None:
        line, overlong, tail = bytes(self._line), self._overlong, self._tail
        self._line.clear()
        self._overlong = False
        self._tail = b""
        if overlong:
            return _overlong_event(line, tail)
        try:
            event = json.loads(line)
        except ValueError:
            return None
        return event if isinstance(event, dict) else None


# The start of a match or context event, as rg writes it: its type, then its path, then its line.
_EVENT_HEAD = re.compile(rb'^\{"type":"(match|context)","data":\{"path":(\{"(?:text|bytes)":"(?:[^"\\]|\\.)*"\})'
                         rb',"lines":\{"(text|bytes)":"((?:[^"\\]|\\.)*)')
_LINE_NUMBER = re.compile(rb'"line_number":(\d+),')


def _overlong_event(head: bytes, tail: bytes) -> dict[str, Any] | None:
    """An event longer than MAX_EVENT_BYTES, rebuilt from its start and end: the line's first characters and,
    when the end still holds it, its number."""
    found = _EVENT_HEAD.match(head)
    if found is None:
        return None
    kind, path, encoding, partial = found.groups()
    number = _LINE_NUMBER.search(tail)
    return {"type": kind.decode(), "overlong": True, "data": {
        "path": json.loads(path), "lines": {encoding.decode(): _partial_json_string(partial, encoding)},
        "line_number": int(number.group(1)) if number else None}}


def _partial_json_string(partial: bytes, encoding: bytes) -> str:
    """The beginning of a JSON string's content that was cut anywhere, an escape sequence included."""
    partial = partial[:MAX_LINE_CHARS * 8]
    for _ in range(6):  # back off over a cut escape sequence (\uXXXX is the longest)
        try:
            text = json.loads(b'"' + partial + b'"')
        except ValueError:
            partial = partial[:-1]
            continue
        return str(text)[:len(text) // 4 * 4] if encoding == b"bytes" else str(text)
    return ""


def _decoded(value: object, errors: str) -> str:
    """rg's {"text": ...} (valid UTF-8) or {"bytes": base64} (anything else) as text."""
    if not isinstance(value, Mapping):
        return ""
    if isinstance(value.get("text"), str):
        return str(value["text"])
    try:
        return base64.b64decode(str(value.get("bytes", ""))).decode("utf-8", errors=errors)
    except (binascii.Error, ValueError):
        return ""


def _line_text(value: object, overlong: bool) -> tuple[str, bool]:
    text = _decoded(value, "replace").rstrip("\r\n")
    if len(text) > MAX_LINE_CHARS:
        return text[:MAX_LINE_CHARS], True
    return text, overlong


def _cut_warning(warning: str) -> str:
    return warning if len(warning) <= MAX_WARNING_CHARS else warning[:MAX_WARNING_CHARS] + " [...]"


def _matched_lines(data: Mapping[str, Any]) -> int:
    stats = data.get("stats")
    matched = stats.get("matched_lines") if isinstance(stats, Mapping) else None
    return matched if isinstance(matched, int) else 0


async def _read_capped(stream: asyncio.StreamReader, limit: int) -> bytes:
    """The first `limit` bytes of `stream`, read to its end so that the writer never blocks on it."""
    kept = bytearray()
    while chunk := await stream.read(_CHUNK_BYTES):
        kept += chunk[:max(0, limit - len(kept))]
    return bytes(kept)


def _kill(process: asyncio.subprocess.Process) -> None:
    """SIGKILL rg's whole process group (its own: start_new_session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else "(nothing on stderr)"
