"""Glob patterns (`**/*.py`) and the walk that finds the files they match, through file descriptors only.

A pattern is split on "/": `**` is any number of directories (none included), and `*`, `?` and `[...]` match
within one name (fnmatch's syntax, no backslash escapes: `[*]` is a literal star). As in a shell, a wildcard
never matches a name that starts with "."; a component written with a leading "." does (`.github/**/*.yml`).

The walk opens each directory relative to its parent with O_NOFOLLOW | O_DIRECTORY, so it never enters a
symlink, even one swapped in after the listing saw a directory. A symlink is listed by its own name and its own
modification time when its name matches (it is an entry of the tree), and never followed: what it points at,
inside the workspace or out, is not looked at. Only files (and such symlinks) are listed, never directories.
The pattern drives the walk: a directory is entered only while some part of the pattern can still match below
it, and literal names (`src/pkg/*.py`) are looked up directly instead of listing their parent.
"""

from __future__ import annotations

import fnmatch
import heapq
import os
import re
import stat
import threading
from dataclasses import dataclass, field
from typing import Final

from ..errors import UnsafePathError

GLOBSTAR: Final = "**"
MAX_PATTERN_BYTES: Final = 4095  # a path's length: no longer pattern can match anything
# Directories below this depth are not entered: each level holds one fd open while the walk is below it.
MAX_DEPTH: Final = 128

_OPEN_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_WILDCARDS = re.compile(r"[*?\[]")
_NOT_HIDDEN = r"(?!\.)"  # as in a shell, a wildcard does not match a leading "."


@dataclass(frozen=True, slots=True)
class _Part:
    """One "/"-separated component of a pattern: `**`, or a name pattern compiled to a regular expression (that
    refuses a leading "." unless the component starts with one)."""

    text: str
    globstar: bool
    literal: bool
    source: str  # the regular expression matching one name (globstar: any name not starting with ".")

    @classmethod
    def of(cls, component: str) -> _Part:
        if component == GLOBSTAR:
            return cls(component, True, False, _NOT_HIDDEN + ".*")
        if _WILDCARDS.search(component) is None:
            return cls(component, False, True, re.escape(component))
        hidden = "" if component.startswith(".") else _NOT_HIDDEN
        return cls(component, False, False, hidden + _translate(component))


@dataclass(frozen=True, slots=True)
class _Plan:
    """What the walk does in a directory where it stands at `states`: the names that can match a file there
    (one regular expression for all of the pending parts), and the literal names to look up instead of
    listing the directory, when only literal parts are pending."""

    file_names: re.Pattern[str] | None
    literal_names: tuple[str, ...] | None


class GlobPattern:
    """A parsed pattern, as a small automaton over path components: its states are indexes into the parts
    (len(parts) is "matched"), and a set of them is where the walk stands in a directory::

        pattern = GlobPattern.parse("src/**/*.py")
        states = pattern.step(pattern.start, "src")   # what can still match below src/
        pattern.accepts(pattern.step(states, "mod.py"))  # True
    """

    def __init__(self, text: str, parts: tuple[_Part, ...]) -> None:
        self.text = text
        self.parts = parts
        self._regexes = tuple(re.compile(part.source, re.DOTALL) for part in parts)
        self._closures: dict[frozenset[int], frozenset[int]] = {}
        self._plans: dict[frozenset[int], _Plan] = {}
        self.start = self._closure(frozenset({0}))

    @classmethod
    def parse(cls, text: object, argument: str = "pattern") -> GlobPattern:
        """The pattern `text`; UnsafePathError (INVALID_ARGUMENT naming `argument`) for one that could leave the
        directory searched (a `..` component, a leading "/") or that is no pattern at all."""
        if not isinstance(text, str) or not text:
            raise UnsafePathError(argument, "must be a non-empty glob pattern, such as **/*.py")
        if "\x00" in text:
            raise UnsafePathError(argument, "holds a NUL character, which no file name may contain")
        if len(os.fsencode(text)) > MAX_PATTERN_BYTES:
            raise UnsafePathError(argument, f"is longer than {MAX_PATTERN_BYTES} bytes; no path could match it")
        if text.startswith("/"):
            raise UnsafePathError(argument, "starts with '/'; patterns are relative to `path` (give `path` for "
                                            "where to search, and a pattern such as **/*.py)")
        components = [c for c in text.split("/") if c not in ("", ".")]
        if ".." in components:
            raise UnsafePathError(argument, "has a '..' component; a pattern matches below `path` only (give "
                                            "`path` for where to search)")
        if not components:
            raise UnsafePathError(argument, "matches no file; give a pattern such as **/*.py")
        parts: list[_Part] = []
        for component in components:
            if not (component == GLOBSTAR and parts and parts[-1].globstar):  # `**/**` is `**`
                parts.append(_Part.of(component))
        return cls(text, tuple(parts))

    def step(self, states: frozenset[int], name: str) -> frozenset[int]:
        """Where the walk stands after the name `name` (a directory entered, or a file looked at)."""
        reached = set()
        end = len(self.parts)
        for index in states:
            if index == end:
                continue
            if self._regexes[index].fullmatch(name) is not None:
                reached.add(index if self.parts[index].globstar else index + 1)
        return self._closure(frozenset(reached)) if reached else frozenset()

    def accepts(self, states: frozenset[int]) -> bool:
        return len(self.parts) in states

    def may_match_below(self, states: frozenset[int]) -> bool:
        return any(index < len(self.parts) for index in states)

    def literal_names(self, states: frozenset[int]) -> tuple[str, ...] | None:
        """The only names that can advance `states` when every pending part is a literal, so that they can be
        looked up instead of listing the directory; None when a wildcard is pending."""
        return self.plan(states).literal_names

    def plan(self, states: frozenset[int]) -> _Plan:
        plan = self._plans.get(states)
        if plan is None:
            plan = self._plans[states] = self._make_plan(states)
        return plan

    def _make_plan(self, states: frozenset[int]) -> _Plan:
        end = len(self.parts)
        pending = sorted(index for index in states if index < end)
        # A file's name ends the match from `index` when the parts after it may all match nothing (`**`).
        ending = [self.parts[index].source for index in pending
                  if end in self._closure(frozenset({index if self.parts[index].globstar else index + 1}))]
        file_names = re.compile("|".join(f"(?:{source})" for source in ending), re.DOTALL) if ending else None
        literal = bool(pending) and all(self.parts[index].literal for index in pending)
        names = tuple(sorted({self.parts[index].text for index in pending})) if literal else None
        return _Plan(file_names, names)

    def _closure(self, states: frozenset[int]) -> frozenset[int]:
        """`states` with the index after each `**` added: `**` also matches no directory at all."""
        closed = self._closures.get(states)
        if closed is None:
            grown = set(states)
            for index in states:
                while index < len(self.parts) and self.parts[index].globstar:
                    index += 1
                    grown.add(index)
            closed = self._closures[states] = frozenset(grown)
        return closed


def _translate(component: str) -> str:
    """fnmatch's translation of one name pattern, without its own anchoring (the caller uses fullmatch)."""
    translated = fnmatch.translate(component)
    # fnmatch gives "(?s:BODY)\Z"; only BODY is wanted, to be combined with others.
    assert translated.startswith("(?s:") and translated.endswith(")\\Z"), translated
    return translated[len("(?s:"):-len(")\\Z")]


@dataclass(slots=True)
class GlobMatches:
    """The newest `limit` matches (paths relative to the directory walked), how many there were in all, and how
    many directories could not be read."""

    paths: list[str]
    matched: int
    unreadable_directories: int = 0
    too_deep: int = 0

    @property
    def truncated(self) -> bool:
        return self.matched > len(self.paths)


class _PathLast(str):
    """A path that sorts in reverse: in the heap of (mtime_ns, _PathLast(path)) the least entry, dropped first,
    is the oldest and, among equally old ones, the path that sorts last."""

    __slots__ = ()

    def __lt__(self, other: str) -> bool:
        return str.__gt__(self, other)

    def __gt__(self, other: str) -> bool:
        return str.__lt__(self, other)


@dataclass(slots=True)
class _Walk:
    pattern: GlobPattern
    limit: int
    stop: threading.Event
    heap: list[tuple[int, _PathLast]] = field(default_factory=list)
    matched: int = 0
    unreadable: int = 0
    too_deep: int = 0

    def found(self, path: str, mtime_ns: int) -> None:
        self.matched += 1
        heap = self.heap
        if len(heap) < self.limit:
            heapq.heappush(heap, (mtime_ns, _PathLast(path)))
        elif mtime_ns >= heap[0][0]:  # older than every kept one: dropped without building anything
            entry = (mtime_ns, _PathLast(path))
            if heap[0] < entry:
                heapq.heapreplace(heap, entry)

    def directory(self, fd: int, relative: str, states: frozenset[int], depth: int) -> None:
        if self.stop.is_set():
            return
        plan = self.pattern.plan(states)
        if plan.literal_names is not None:
            self._look_up(fd, relative, states, depth, plan.literal_names)
            return
        # The hot loop: a file costs one regular expression, and a stat only when it matches.
        file_names = plan.file_names
        try:
            listing = os.scandir(fd)
        except OSError:
            self.unreadable += 1
            return
        with listing:
            for entry in listing:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        reached = self.pattern.step(states, entry.name)
                        if reached and self.pattern.may_match_below(reached):
                            self._enter(fd, entry.name, f"{relative}{entry.name}", reached, depth + 1)
                    elif file_names is not None and file_names.fullmatch(entry.name) is not None and (
                            entry.is_file(follow_symlinks=False) or entry.is_symlink()):
                        self.found(f"{relative}{entry.name}", entry.stat(follow_symlinks=False).st_mtime_ns)
                except OSError:  # gone since it was listed
                    continue

    def _look_up(self, fd: int, relative: str, states: frozenset[int], depth: int, names: tuple[str, ...]) -> None:
        """Only `names` can match here: each is looked up (lstat), and the directory is not listed."""
        for name in names:
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            reached = self.pattern.step(states, name)
            if stat.S_ISDIR(st.st_mode):
                if self.pattern.may_match_below(reached):
                    self._enter(fd, name, f"{relative}{name}", reached, depth + 1)
            elif (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)) and self.pattern.accepts(reached):
                self.found(f"{relative}{name}", st.st_mtime_ns)

    def _enter(self, parent: int, name: str, path: str, states: frozenset[int], depth: int) -> None:
        if depth > MAX_DEPTH:
            self.too_deep += 1
            return
        try:
            fd = os.open(name, _OPEN_DIRECTORY, dir_fd=parent)
        except OSError:  # unreadable, gone, or swapped for a symlink (ELOOP) or a file since it was listed
            self.unreadable += 1
            return
        try:
            self.directory(fd, f"{path}/", states, depth)
        finally:
            os.close(fd)


def find_matches(directory_fd: int, pattern: GlobPattern, *, limit: int,
                 stop: threading.Event | None = None) -> GlobMatches:
    """The files under the open directory `directory_fd` that `pattern` matches, newest first (ties by path),
    at most `limit` of them. Setting `stop` ends the walk early (a call cancelled meanwhile)."""
    walk = _Walk(pattern, limit, stop or threading.Event())
    walk.directory(directory_fd, "", pattern.start, 0)
    newest = sorted(walk.heap, reverse=True)
    return GlobMatches([str(path) for _, path in newest], walk.matched, walk.unreadable, walk.too_deep)
