"""Spotlight MCP's four read-only file search tools over the configured search roots, answered from toolhost's own
index (search.service): `search` (words in names and text), `get_metadata` (one file's facts, read from the file
itself), `search_by_kind` and `recent_files`.

Arguments are checked as the seed's ArgumentParser checks them (search.arguments); scopes and paths reach files
only through their root's PathSanitizer. get_metadata answers a path outside the roots exactly as a missing file,
so that it cannot tell whether something exists outside them. Logging follows the seed's L08: a call at DEBUG
without its arguments' values or results, a refused argument at WARNING, a failure at ERROR.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

from ..errors import InvalidArgumentsError
from ..model import Annotations, Example, Parameter
from ..search.arguments import (
    MAX_QUERY_WORDS,
    RECENT_DEFAULT_DAYS,
    SINCE_FORMAT,
    ArgumentParser,
    PaginationConfig,
    ScopeUnavailable,
    ValidatedScope,
    under_root,
    utc_now,
)
from ..search.formatting import ResultFormatter
from ..search.kinds import KINDS
from ..search.metadata import MAX_LINE_COUNT_BYTES, file_metadata
from ..search.service import SearchAnswer, SearchService
from ..workspaces.paths import FileStateError
from .base import Tool, ToolContext, ToolOutput, ToolRaisedFailure, ToolServices

NO_SEARCH_ROOTS = "no search_roots are configured (TOOLHOST_SEARCH_ROOTS)"
MAX_QUERY_CHARS = 1000

_SCOPE = Parameter("scope", "string", "Absolute path of the directory to search, inside a search root; symlinks "
                                      "are followed only when they stay inside it.", required=True)
_LIMIT = Parameter("limit", "integer", f"The most results to return (default {PaginationConfig.DEFAULT}; values "
                                      f"outside 1..{PaginationConfig.MAXIMUM} are clamped to it).",
                   default=PaginationConfig.DEFAULT)

_TIME = {"type": "string", "description": "ISO 8601 in UTC, to the second: 2026-11-18T09:30:00Z."}
_RESULT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "Absolute path, under the search root as configured."},
        "name": {"type": "string"},
        "size": {"type": "integer", "description": "Bytes."},
        "modified": _TIME,
        "kind": {"type": "string", "enum": [*KINDS, "other"]},
        "mime": {"type": "string"},
    },
    "required": ["path", "name", "size", "modified", "kind", "mime"],
}
_METADATA_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        **_RESULT_SCHEMA["properties"],
        "created": {"type": ["string", "null"], "description": "Birth time, where the filesystem records one."},
        "accessed": _TIME,
        "changed": {**_TIME, "description": "When the inode last changed (ctime), ISO 8601 UTC."},
        "owner": {"type": ["string", "integer"], "description": "User name, or uid when it has none."},
        "group": {"type": ["string", "integer"], "description": "Group name, or gid when it has none."},
        "permissions": {"type": "string", "description": "Octal mode bits, such as 0644."},
        "permissions_text": {"type": "string", "description": "As ls shows them, such as rw-r--r--."},
        "line_count": {"type": ["integer", "null"], "description": (
            f"Lines of a text file; null for other files and for text files over {MAX_LINE_COUNT_BYTES} bytes.")},
        "extended_attributes": {"type": "array", "items": {"type": "string"}, "description": "Names only."},
    },
    "required": [*_RESULT_SCHEMA["required"], "created", "accessed", "changed", "owner", "group", "permissions",
                 "permissions_text", "line_count", "extended_attributes"],
}


_PARTIAL = {"type": "boolean", "description": (
    "The index was still being built and the walk that stood in for it ran out of time: files may be missing.")}
_INDEXED_AT = {"type": ["string", "null"], "description": (
    "When the index last finished a build or rescan of the scope's root (ISO 8601 UTC); null before the first.")}


def _answer_schema(item: Mapping[str, Any], *, partial: Mapping[str, Any] = _PARTIAL,
                   indexed_at: Mapping[str, Any] = _INDEXED_AT) -> Mapping[str, Any]:
    return {
        "type": "object",
        "properties": {"results": {"type": "array", "items": item}, "partial": partial, "indexed_at": indexed_at},
        "required": ["results", "partial", "indexed_at"],
    }


class FileSearchTool(Tool, ABC):
    """A tool over the search roots: served only where some are configured. Subclasses implement `answer`; `run`
    logs as L08 says and turns a scope the server cannot open into the tool's failure."""

    category: ClassVar[str] = "search"
    tags: ClassVar[tuple[str, ...]] = ("files", "search", "index")
    annotations: ClassVar[Annotations] = Annotations(read_only=True, idempotent=True)
    output_schema: ClassVar[Mapping[str, Any] | None] = _answer_schema(_RESULT_SCHEMA)

    @classmethod
    def unserved_because(cls, services: ToolServices) -> str:
        return "" if services.search is not None else NO_SEARCH_ROOTS

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        logger = context.logger
        # The argument names only: a query or a path is the caller's business, and results never go to the log.
        logger.debug("call %s of %s with %s", context.call_id, context.tool_name, ", ".join(sorted(arguments)))
        service = context.services.search
        if service is None:  # not served then; only a direct run (a test) can get here
            raise RuntimeError(f"{context.tool_name} was run by a server without search roots")
        parser = ArgumentParser(arguments, tool=context.tool_name)
        try:
            return await self.answer(parser, service)
        except InvalidArgumentsError as exc:
            logger.warning("call %s of %s refused: %s", context.call_id, context.tool_name, exc.message)
            raise
        except (ScopeUnavailable, FileStateError) as exc:  # FileStateError: the scope changed after its check
            logger.error("call %s of %s failed: %s: %s", context.call_id, context.tool_name, exc.code, exc.message)
            raise ToolRaisedFailure(exc.message, exc.code) from None
        except ToolRaisedFailure as exc:
            logger.error("call %s of %s failed: %s: %s", context.call_id, context.tool_name, exc.code, exc.message)
            raise
        except Exception as exc:  # the runner logs the traceback; this says which call, at the level L08 asks
            logger.error("call %s of %s failed: %s", context.call_id, context.tool_name, type(exc).__name__)
            raise

    @abstractmethod
    async def answer(self, parser: ArgumentParser, service: SearchService) -> ToolOutput:
        """One call's answer; blocking file work in a thread."""


def _scope_of(parser: ArgumentParser, service: SearchService) -> ValidatedScope:
    return parser.require_validated_scope("scope", service)


def _answered(answer: SearchAnswer, pagination: PaginationConfig, *, drop_all: bool = False) -> ToolOutput:
    entries = [] if drop_all else [ResultFormatter.entry(found) for found in pagination.apply(answer.results)]
    return ToolOutput(text=ResultFormatter.format_results(entries), structured={
        "results": entries, "partial": answer.partial, "indexed_at": ResultFormatter.iso8601(answer.indexed_at)})


class SearchTool(FileSearchTool):
    name = "search"
    display_name = "Search files"
    description = (
        "Finds files under a search root whose name or text matches every word of `query` (words are matched as "
        "prefixes, case-insensitively: `conf pars` finds config_parser.py), best matches first. Answers from an "
        "index kept current by a file watcher; `partial` says when the index is still being built and the answer "
        "may miss files. Returns a JSON array of {path, name, size, modified, kind, mime} with absolute paths.")
    parameters = (
        Parameter("query", "string", f"Words to find in file names and contents, ANDed (at most {MAX_QUERY_WORDS} "
                                     "words; punctuation is ignored).", required=True,
                  schema={"maxLength": MAX_QUERY_CHARS}),
        _SCOPE,
        _LIMIT,
    )
    # Left out of `toolhost check`, as the other examples of this module: /srv is seldom a search root.
    examples = (Example("Files about retry backoff in a project", {"query": "retry backoff", "scope": "/srv/src"},
                        skip_check=True),)

    async def answer(self, parser: ArgumentParser, service: SearchService) -> ToolOutput:
        words = parser.require_words("query")
        pagination = PaginationConfig.requested(parser.optional_int("limit"))
        scope = await asyncio.to_thread(_scope_of, parser, service)
        return _answered(await service.search(words, scope.path, pagination.limit), pagination)


class SearchByKindTool(FileSearchTool):
    name = "search_by_kind"
    display_name = "Search files by kind"
    description = (
        f"Lists the files of one kind ({', '.join(KINDS)}) under a directory of a search root, by path. The kind "
        "comes from the file's extension and content. Returns a JSON array of {path, name, size, modified, kind, "
        "mime} with absolute paths.")
    parameters = (
        # No `enum` in the schema: the validator's refusal names two kinds and "4 other candidates", while the
        # seed's contract is a message that lists them all (ArgumentParser.require_kind).
        Parameter("kind", "string", f"One of: {', '.join(KINDS)}.", required=True),
        _SCOPE,
        _LIMIT,
    )
    examples = (Example("PDFs in a documents folder", {"kind": "pdf", "scope": "/srv/docs"}, skip_check=True),)

    async def answer(self, parser: ArgumentParser, service: SearchService) -> ToolOutput:
        kind = parser.require_kind("kind")
        pagination = PaginationConfig.requested(parser.optional_int("limit"))
        scope = await asyncio.to_thread(_scope_of, parser, service)
        return _answered(await service.by_kind(kind, scope.path, pagination.limit), pagination)


class RecentFilesTool(FileSearchTool):
    name = "recent_files"
    display_name = "Recent files"
    description = (
        f"Lists the files under a directory of a search root modified since `since` (default: "
        f"{RECENT_DEFAULT_DAYS} days ago), newest first. Returns a JSON array of {{path, name, size, modified, "
        "kind, mime}} with absolute paths.")
    parameters = (
        _SCOPE,
        Parameter("since", "string", f"Only files modified after this moment: {SINCE_FORMAT}; a time without a "
                                     f"zone is UTC. Default: {RECENT_DEFAULT_DAYS} days ago."),
        _LIMIT,
    )
    examples = (Example("What changed since Monday", {"scope": "/srv/src", "since": "2026-11-16"},
                        skip_check=True),)

    async def answer(self, parser: ArgumentParser, service: SearchService) -> ToolOutput:
        now = utc_now()
        since = parser.optional_since("since", now)
        pagination = PaginationConfig.requested(parser.optional_int("limit"))
        scope = await asyncio.to_thread(_scope_of, parser, service)
        answer = await service.recent(scope.path, since, pagination.limit)
        # A file whose clock is ahead of ours (touch -d tomorrow) is still no answer to "since tomorrow".
        return _answered(answer, pagination, drop_all=since > now)


class GetMetadataTool(FileSearchTool):
    name = "get_metadata"
    display_name = "File metadata"
    description = (
        "Describes one file under a search root, read from the file itself: size, created (where the filesystem "
        "records it, else null), modified, accessed and changed times (ISO 8601 UTC), kind, MIME type, owner, "
        f"group, permissions, line count (text files up to {MAX_LINE_COUNT_BYTES // (1024 * 1024)} MiB) and "
        "extended attribute names. A path that is missing, outside the search roots or left out of the index "
        "(search_exclude) is FILE_NOT_FOUND.")
    parameters = (
        Parameter("path", "string", "Absolute path of the file, inside a search root; symlinks are followed "
                                    "only when they stay inside it.", required=True),
    )
    # The one file, as the other tools' answers hold theirs; read from the file itself, never from the index.
    output_schema = _answer_schema(
        _METADATA_SCHEMA, partial={"type": "boolean", "const": False, "description": "Always false."},
        indexed_at={"type": "null", "description": "Always null: the facts come from the file, not the index."})
    examples = (Example("Facts of one file", {"path": "/srv/src/README.md"}, skip_check=True),)

    async def answer(self, parser: ArgumentParser, service: SearchService) -> ToolOutput:
        path = parser.require_absolute_path("path")
        metadata = await asyncio.to_thread(_metadata_of, path, service)
        return ToolOutput(text=ResultFormatter.format_metadata(metadata), structured={
            "results": [metadata], "partial": False, "indexed_at": None})


def _not_found(path: str) -> ToolRaisedFailure:
    """The one answer for a missing file and for a path outside the roots, whichever it is."""
    return ToolRaisedFailure(f"{path!r} not found in the search roots; give the absolute path of an existing file "
                             "under a search root", "FILE_NOT_FOUND")


def _metadata_of(path: str, service: SearchService) -> dict[str, Any]:
    root = service.root_of(path)
    # What search_exclude leaves out of the index (keys, .env files, .ssh/) is no more there for get_metadata
    # than for the searches, by the name given or by the name a symlink leads to.
    if root is None or service.exclusions.path(_after_root(path, root.path), is_directory=False):
        raise _not_found(path)
    try:
        with root.paths.open(path, argument="path", kind="file") as opened:
            if service.exclusions.path(opened.relative, is_directory=False):
                raise _not_found(path)
            return file_metadata(opened.fd, under_root(root, opened.relative))
    except FileStateError as exc:
        if exc.code in ("FILE_NOT_FOUND", "NOT_A_DIRECTORY"):
            raise _not_found(path) from None
        raise ToolRaisedFailure(exc.message, exc.code) from None


def _after_root(path: str, root: str) -> str:
    """The components of `path` after those of `root` (which it lies under), as the caller wrote them."""
    parts = [part for part in path.split("/") if part not in ("", ".")]
    return "/".join(parts[len([part for part in root.split("/") if part]):])
