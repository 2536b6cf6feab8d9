"""The arguments of the file search tools, checked as the Spotlight MCP seed's ArgumentParser and PaginationConfig
check them: required strings are not empty, paths are absolute, a scope is an existing directory inside a search
root (opened through that root's PathSanitizer, so symlinks are resolved and must stay inside), and a limit is
clamped rather than refused.

Every refusal is InvalidArgumentsError (INVALID_ARGUMENT) naming the argument and saying what to give instead.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Protocol, TypeVar

from ..errors import FieldViolation, InvalidArgumentsError, UnsafePathError
from ..workspaces.paths import MAX_PATH_BYTES, FileStateError, PathSanitizer
from .kinds import KINDS
from .words import query_tokens

T = TypeVar("T")

MAX_QUERY_WORDS = 32  # more words ANDed find nothing more; each one is a term the index must intersect
RECENT_DEFAULT_DAYS = 7
SINCE_FORMAT = "ISO 8601, such as 2026-11-18, 2026-11-18T09:30:00Z or 2026-11-18T09:30:00+02:00"


class SearchRootLike(Protocol):
    """A configured search root: its absolute path as configured, and the sanitizer confined to it."""

    @property
    def path(self) -> str: ...

    @property
    def paths(self) -> PathSanitizer: ...


class RootLookup(Protocol):
    """What finds the root a path lies under (search.service.SearchService)."""

    @property
    def roots(self) -> Sequence[SearchRootLike]: ...

    def root_of(self, path: str) -> SearchRootLike | None: ...


@dataclass(frozen=True, slots=True)
class ValidatedScope:
    """A scope that is an existing directory inside `root`: `path` is its absolute path as under the root's
    configured path, resolved through symlinks (which stayed inside the root)."""

    root: SearchRootLike
    path: str


class ScopeUnavailable(Exception):
    """The scope was acceptable but could not be opened for a reason of the server's (the root is gone, the
    directory kept changing): reported as the tool's failure with `code`, not as a refused argument."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def under_root(root: SearchRootLike, relative: str) -> str:
    """The absolute path, as under the root's configured path, of `relative` (a sanitizer's OpenedPath.relative)."""
    return root.path if relative == "." else f"{root.path.rstrip('/')}/{relative}"


class ArgumentParser:
    """Reads one call's arguments; each `require_*` returns the checked value or raises InvalidArgumentsError::

        parser = ArgumentParser(arguments, tool="search")
        words = parser.require_words("query")
        scope = parser.require_validated_scope("scope", service)   # blocking: opens the directory
    """

    def __init__(self, arguments: Mapping[str, Any] | None, *, tool: str = "") -> None:
        self.arguments: Mapping[str, Any] = arguments or {}
        self.tool = tool

    def refuse(self, key: str, reason: str) -> InvalidArgumentsError:
        """The refusal of argument `key`, to raise."""
        return InvalidArgumentsError(self.tool, [FieldViolation(f"/{key}", reason)])

    def require_string(self, key: str) -> str:
        value = self.arguments.get(key)
        if value is None:
            raise self.refuse(key, "required argument is missing")
        if not isinstance(value, str):
            raise self.refuse(key, f"must be a string, not {type(value).__name__}")
        if not value.strip():
            raise self.refuse(key, "is empty; give a non-empty value")
        if "\x00" in value:
            raise self.refuse(key, "holds a NUL character; remove it")
        return value

    def optional_string(self, key: str) -> str | None:
        value = self.arguments.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.refuse(key, f"must be a string, not {type(value).__name__}")
        return value

    def optional_int(self, key: str) -> int | None:
        value = self.arguments.get(key)
        if value is None:
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # a Struct carries every number as a double
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.refuse(key, f"must be an integer, not {type(value).__name__}")
        return value

    def require_absolute_path(self, key: str) -> str:
        value = self.require_string(key)
        if len(os.fsencode(value)) > MAX_PATH_BYTES:  # no file has such a path, inside the roots or outside
            raise self.refuse(key, f"is longer than {MAX_PATH_BYTES} bytes; give a shorter path")
        if not value.startswith("/"):
            raise self.refuse(key, f"{_shown_path(value)} is a relative path; give an absolute path (starting with "
                                   "'/')")
        return value

    def require_validated_scope(self, key: str, roots: RootLookup) -> ValidatedScope:
        """The scope `key`: absolute, inside a search root, an existing directory once symlinks are resolved
        (by the root's PathSanitizer, which refuses one that leaves the root). Blocking: run it in a thread."""
        scope = self.require_absolute_path(key)
        root = roots.root_of(scope)
        if root is None:
            searchable = ", ".join(r.path for r in roots.roots)
            raise self.refuse(key, f"{_shown_path(scope)} is not inside a search root; give a directory under one "
                                   f"of: {searchable}")
        try:
            with root.paths.open(scope, argument=key, kind="directory") as opened:
                return ValidatedScope(root, under_root(root, opened.relative))
        except UnsafePathError as exc:
            raise UnsafePathError(exc.argument, exc.problem, self.tool) from None
        except FileStateError as exc:
            raise self._scope_state(key, scope, root, exc) from None

    def _scope_state(self, key: str, path: str, root: SearchRootLike, exc: FileStateError) -> Exception:
        scope = _shown_path(path)
        if exc.code == "FILE_NOT_FOUND":
            return self.refuse(key, f"{scope} does not exist; give an existing directory under {root.path}")
        if exc.code == "NOT_A_DIRECTORY":
            return self.refuse(key, f"{scope} is a file, not a directory; give the directory to search")
        if exc.code == "ACCESS_DENIED":
            return self.refuse(key, f"{scope} may not be opened by the server's user; give another directory")
        if exc.code == "WORKSPACE_MISSING":
            return ScopeUnavailable("SEARCH_ROOT_MISSING", f"the search root {root.path} is gone; ask the operator "
                                                           "to restore it")
        return ScopeUnavailable(exc.code, exc.message)

    def require_words(self, key: str) -> list[str]:
        """The query's words, split on whitespace. The index matches the runs of letters and digits in them
        (search.words), so a query without any is refused, and so is one with too many."""
        query = self.require_string(key)
        words = query.split()
        tokens = query_tokens(words)
        if not tokens:
            raise self.refuse(key, f"{_shown(query)} has no letter or digit; give words to search for")
        if len(tokens) > MAX_QUERY_WORDS:
            raise self.refuse(key, f"has {len(tokens)} words, more than {MAX_QUERY_WORDS}; give fewer words")
        return words

    def require_kind(self, key: str) -> str:
        kind = self.require_string(key)
        if kind not in KINDS:
            raise self.refuse(key, f"unknown kind {_shown(kind)}; the valid kinds are: {', '.join(KINDS)}")
        return kind

    def optional_since(self, key: str, now: datetime) -> datetime:
        """The moment `key` names, in UTC (a time without a zone is taken as UTC); RECENT_DEFAULT_DAYS before
        `now` when absent."""
        value = self.optional_string(key)
        if value is None:
            return now - timedelta(days=RECENT_DEFAULT_DAYS)
        try:
            moment = datetime.fromisoformat(value.strip())
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            return moment.astimezone(UTC)
        except (ValueError, OverflowError):
            raise self.refuse(key, f"{_shown(value)} is not a date and time in {SINCE_FORMAT}") from None


@dataclass(frozen=True, slots=True)
class PaginationConfig:
    """How many results a call returns: DEFAULT when not asked, else the request clamped to [1, MAXIMUM]."""

    limit: int
    DEFAULT: ClassVar[int] = 100
    MAXIMUM: ClassVar[int] = 1000

    @classmethod
    def requested(cls, requested: int | None) -> PaginationConfig:
        if requested is None:
            return cls(cls.DEFAULT)
        return cls(max(1, min(cls.MAXIMUM, requested)))

    def apply(self, results: Sequence[T]) -> list[T]:
        return list(results[:self.limit])


def _shown(value: str, limit: int = 80) -> str:
    """`value` quoted for a message, cut when long: a refusal's message is carried three times in its status,
    which a gRPC client takes only up to 8 KiB of, so a huge value is not echoed back whole."""
    return repr(value) if len(value) <= limit else f"{value[:limit]!r}... ({len(value)} characters)"


def _shown_path(path: str) -> str:
    return _shown(path, 300)


def utc_now() -> datetime:
    return datetime.now(UTC)

