"""The search tools of the workspaces: `glob` (files by name pattern), `grep` (contents, through ripgrep), and
`search_content`, drowcoder's name for grep.

Both reach the workspace only through its PathSanitizer: the directory (or file) to search is opened by it, and
then walked by descriptor (glob) or handed to rg as that very descriptor (grep runs in /proc/self/fd/N of the
opened directory, or reads /proc/self/fd/N of the opened file), so a path swapped after the check cannot
redirect either. Neither follows a symlink found below it; and since rg's own walk opens subdirectories by path
(a directory swapped for a symlink meanwhile would be followed), rg runs under Landlock, reading beneath the
workspace only, where the kernel offers it (workspaces/read_confinement.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import fnmatch
import json
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Final

from ..errors import FieldViolation, InvalidArgumentsError
from ..model import Annotations, Example, Parameter
from ..workspaces.globbing import GlobMatches, GlobPattern, find_matches
from ..workspaces.paths import Kind, OpenedPath, PathSanitizer, shown_name
from ..workspaces.read_confinement import confine_reads
from ..workspaces.ripgrep import (
    ANSWER_RESERVE_BYTES,
    MAX_LINE_CHARS,
    OUTPUT_MODES,
    RIPGREP_MISSING,
    RipgrepFailed,
    RipgrepQuery,
    RipgrepRefused,
    RipgrepResult,
    find_ripgrep,
    run_ripgrep,
)
from ..workspaces.workspace_set import ServedWorkspace
from .base import ToolContext, ToolOutput, ToolRaisedFailure, ToolServices
from .workspace_tool import WORKSPACE_PARAMETER, WorkspaceTool

MAX_GLOB_RESULTS: Final = 1000
MAX_GREP_LIMIT: Final = 1000
MAX_CONTEXT_LINES: Final = 20
MAX_PATTERN_CHARS: Final = 10_000
_GLOB_WILDCARDS: Final = frozenset("*?[{")

_PATH_TO_SEARCH = "Directory to search, relative to the workspace root (default: the root)."

_GLOB_OUTPUT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "files": {"type": "array", "items": {"type": "string"},
                  "description": "Matching files, newest first, relative to the workspace root."},
        "matched": {"type": "integer", "description": "How many files match in all."},
        "truncated": {"type": "boolean", "description": f"More than {MAX_GLOB_RESULTS} matched."},
        "unreadable_directories": {"type": "integer", "description": "Directories the server could not open."},
    },
    "required": ["files", "matched", "truncated", "unreadable_directories"],
}

_GREP_OUTPUT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "output_mode": {"type": "string", "enum": list(OUTPUT_MODES)},
        "files": {"type": "array", "items": {"type": "string"},
                  "description": "files_with_matches: the files with a match, relative to the workspace root."},
        "counts": {"type": "array", "description": "count: matching lines per file.", "items": {
            "type": "object", "properties": {"path": {"type": "string"}, "count": {"type": "integer"}}}},
        "lines": {"type": "array", "description": "content: the matching lines, and context lines around them.",
                  "items": {"type": "object", "properties": {
                      "path": {"type": "string"}, "line": {"type": ["integer", "null"]},
                      "text": {"type": "string"}, "match": {"type": "boolean"},
                      "cut": {"type": "boolean", "description": f"Cut at {MAX_LINE_CHARS} characters."}}}},
        "truncated": {"type": "boolean", "description": "More results were there than `limit` let through."},
        "warnings": {"type": "array", "items": {"type": "string"},
                     "description": "Files or directories rg could not read."},
    },
    "required": ["output_mode", "truncated", "warnings"],
}


class GlobTool(WorkspaceTool):
    name = "glob"
    display_name = "Glob"
    description = (
        "Finds files by name pattern in a workspace, newest first (by modification time), at most "
        f"{MAX_GLOB_RESULTS}. `**` matches any number of directories, `*` and `?` any characters within one "
        "name, `[abc]` one of those characters: `**/*.py`, `src/**/test_*.ts`, `*.md`. As in a shell, wildcards "
        "do not match names starting with '.' unless the pattern's component does (`.github/**/*.yml`). Lists "
        "files (and symlinks, by their own name), never directories; symlinked directories are not entered. "
        "Paths are relative to the workspace root. Use grep to search file contents.")
    tags = ("files", "search", "workspace")
    parameters = (
        Parameter("pattern", "string", "Glob pattern relative to `path`, such as **/*.py; no '..' component and "
                                       "no leading '/'.", required=True),
        Parameter("path", "string", _PATH_TO_SEARCH, default="."),
        WORKSPACE_PARAMETER,
    )
    output_schema = _GLOB_OUTPUT_SCHEMA
    examples = (
        Example("Every Python file", {"pattern": "**/*.py"}),
        # Left out of `toolhost check`: a workspace need not have a src directory.
        Example("Test files under src", {"pattern": "**/test_*.py", "path": "src"}, skip_check=True),
    )
    annotations = Annotations(read_only=True, idempotent=True)

    async def run_in(self, served: ServedWorkspace, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        pattern = GlobPattern.parse(arguments["pattern"])
        stop = threading.Event()
        try:
            where, found = await self.in_thread(_glob, served.paths, arguments["path"], pattern, stop)
        finally:
            stop.set()  # a cancelled call's walk ends at its next directory
        prefix = "" if where == "." else f"{where}/"
        files = _within(context.services.max_output_bytes, (shown_name(prefix + path) for path in found.paths))
        return ToolOutput(text=_glob_text(files, found, pattern.text, where), structured={
            "files": files, "matched": found.matched, "truncated": found.matched > len(files),
            "unreadable_directories": found.unreadable_directories})


class GrepTool(WorkspaceTool):
    name = "grep"
    display_name = "Grep"
    description = (
        "Searches file contents in a workspace with ripgrep. `pattern` is a regular expression in ripgrep's "
        "syntax (Rust's regex crate: `fn\\s+\\w+`, `log.*Error`; escape literal braces and parentheses, "
        "`interface\\{\\}`). `output_mode`: files_with_matches (default) lists the files with a match, content "
        "shows the matching lines with their numbers (and `context` lines around them), count gives matching "
        "lines per file. Files ignored by .gitignore, .ignore or .rgignore, hidden files and binary files are "
        "skipped (`no_ignore` searches ignored files too); symlinks are not followed. At most `limit` results; "
        "`truncated` says when there were more (or when more would not fit the output limit). Paths, and `glob`, are "
        "relative to the workspace root.")
    tags = ("files", "search", "workspace", "ripgrep")
    parameters = (
        Parameter("pattern", "string", "Regular expression to search for (ripgrep's syntax).", required=True,
                  schema={"minLength": 1, "maxLength": MAX_PATTERN_CHARS}),
        Parameter("path", "string", "File or directory to search, relative to the workspace root (default: the "
                                    "root).", default="."),
        Parameter("glob", "string", "Only files whose path matches this glob, in ripgrep's --glob syntax: *.py, "
                                    "src/**/*.ts, or !*.min.js to leave files out. Like the results, it is "
                                    "relative to the workspace root, not to `path` (path=src, glob=src/*.py); "
                                    "one without '/' matches a name at any depth.",
                  schema={"maxLength": MAX_PATTERN_CHARS}),
        Parameter("output_mode", "string", "content (matching lines), files_with_matches (file paths) or count "
                                           "(matching lines per file).", default="files_with_matches",
                  enum=OUTPUT_MODES),
        Parameter("case_insensitive", "boolean", "Match regardless of case (rg -i).", default=False),
        Parameter("context", "integer", "Lines to show before and after each match, in content mode (rg -C).",
                  default=0, schema={"minimum": 0, "maximum": MAX_CONTEXT_LINES}),
        Parameter("no_ignore", "boolean", "Search files that .gitignore, .ignore or .rgignore leave out, too.",
                  default=False),
        Parameter("limit", "integer", "The most results to return: matching lines (content), files "
                                      "(files_with_matches, count).", default=100,
                  schema={"minimum": 1, "maximum": MAX_GREP_LIMIT}),
        WORKSPACE_PARAMETER,
    )
    output_schema = _GREP_OUTPUT_SCHEMA
    examples = (
        Example("Files that mention TODO", {"pattern": "TODO"}),
        Example("Function definitions in Python files, with a line of context",
                {"pattern": "def \\w+\\(", "glob": "*.py", "output_mode": "content", "context": 1}),
    )
    annotations = Annotations(read_only=True, idempotent=True)

    @classmethod
    def unserved_because(cls, services: ToolServices) -> str:
        return super().unserved_because(services) or ("" if find_ripgrep() else RIPGREP_MISSING)

    async def run_in(self, served: ServedWorkspace, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        query = RipgrepQuery(
            pattern=_program_argument(arguments["pattern"], "pattern", context.tool_name),
            output_mode=arguments["output_mode"], case_insensitive=bool(arguments["case_insensitive"]),
            context=int(arguments["context"]), no_ignore=bool(arguments["no_ignore"]),
            glob=_program_argument(arguments.get("glob") or "", "glob", context.tool_name),
            limit=int(arguments["limit"]))
        program = find_ripgrep()
        if program is None:  # removed since the server started
            raise ToolRaisedFailure(f"{RIPGREP_MISSING} on this server; an operator installs it (Debian: "
                                    "apt-get install ripgrep)", "PROGRAM_NOT_FOUND")
        opened = await _open(self, served.paths, arguments["path"], "any")
        try:
            if opened.is_directory and opened.relative != "." and query.glob:
                glob = _glob_below(query.glob, opened.relative)
                if glob is None:  # it names no file below `path`
                    return ToolOutput(text=_grep_text(RipgrepResult(), query),
                                      structured=_grep_structured(RipgrepResult(), query))
                query = dataclasses.replace(query, glob=glob)
            found = await _search(self, program, query, opened, served.paths.root, context.services)
        except RipgrepRefused as exc:
            raise InvalidArgumentsError(context.tool_name, [FieldViolation(f"/{exc.argument}", exc.message)]) \
                from None
        except RipgrepFailed as exc:
            raise ToolRaisedFailure(str(exc), "SEARCH_FAILED") from None
        finally:
            opened.close()
        return ToolOutput(text=_grep_text(found, query), structured=_grep_structured(found, query))


class SearchContentTool(GrepTool):
    name = "search_content"
    display_name = "Search Content"
    alias_of = "grep"
    description = (
        "The same tool as grep (drowcoder's content search, under this name because `search` is the file "
        "search tool): searches file contents in a workspace with ripgrep's regular expressions. See grep for "
        "the arguments and results.")


async def _search(tool: WorkspaceTool, program: str, query: RipgrepQuery, opened: OpenedPath, root: str,
                  services: ToolServices) -> RipgrepResult:
    """rg over what the sanitizer opened, reached through its descriptor, never by its path again, and kept by
    Landlock (where the kernel has it) from reading anything outside the workspace `root` meanwhile. It runs as
    the process user: what it reads is bounded by that user's rights too, Landlock or not. Its results are
    bounded by the server's max_output_bytes."""
    confinement = await tool.in_thread(confine_reads, (root,), program)
    restrict = confinement.restrict_self if confinement is not None else None
    user, budget = services.process_identity, services.max_output_bytes
    try:
        if opened.is_directory:
            # rg's working directory is the opened directory itself (entered through the descriptor by the
            # child before exec), and it searches "."; its real path is what rg sees, so ignore files above it
            # (inside the workspace) apply.
            prefix = "" if opened.relative == "." else f"{opened.relative}/"
            return await run_ripgrep(program, query, cwd=f"/proc/self/fd/{opened.fd}", target=".",
                                     shown_as=lambda path: shown_name(prefix + path.removeprefix("./")),
                                     before_exec=restrict, user=user, max_output_bytes=budget)
        relative = opened.relative
        return await run_ripgrep(program, query, cwd="/", target=f"/proc/self/fd/{opened.fd}",
                                 shown_as=lambda _: relative, pass_fds=(opened.fd,), before_exec=restrict,
                                 user=user, max_output_bytes=budget)
    finally:
        if confinement is not None:
            confinement.close()


async def _open(tool: WorkspaceTool, paths: PathSanitizer, path: object, kind: Kind) -> OpenedPath:
    """paths.open in a worker thread; what it opens is closed again if the call is cancelled meanwhile."""
    opening = asyncio.ensure_future(tool.in_thread(paths.open, path, argument="path", kind=kind))
    try:
        return await asyncio.shield(opening)
    except asyncio.CancelledError:
        opening.add_done_callback(_close_opened)
        raise


def _close_opened(opening: asyncio.Future[OpenedPath]) -> None:
    if not opening.cancelled() and opening.exception() is None:
        opening.result().close()


def _glob(paths: PathSanitizer, path: object, pattern: GlobPattern,
          stop: threading.Event) -> tuple[str, GlobMatches]:
    with paths.open(path, argument="path", kind="directory") as opened:
        return opened.relative, find_matches(opened.fd, pattern, limit=MAX_GLOB_RESULTS, stop=stop)


def _program_argument(value: str, argument: str, tool: str) -> str:
    """`value` as rg can receive it in its argv: no NUL, and encodable (JSON can carry lone surrogates)."""
    if "\x00" in value:
        raise InvalidArgumentsError(tool, [FieldViolation(
            f"/{argument}", "holds a NUL character, which cannot be passed to rg; write \\x00 to match a NUL byte")])
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgumentsError(tool, [FieldViolation(
            f"/{argument}", "is not valid Unicode (it holds a lone surrogate); send UTF-8 text")]) from None
    return value


def _within(max_output_bytes: int, paths: Iterable[str]) -> list[str]:
    """The first `paths` that fit the answer, each counted at its JSON size (a control character in a name takes
    six bytes), so that 1,000 long names never make an answer the server refuses whole."""
    budget = max(max_output_bytes - ANSWER_RESERVE_BYTES, max_output_bytes // 2)
    kept: list[str] = []
    for path in paths:
        budget -= len(json.dumps(path, ensure_ascii=False).encode()) * 2 + 8  # in the text and the structured
        if budget < 0:
            break
        kept.append(path)
    return kept


def _glob_below(glob: str, where: str) -> str | None:
    """grep's `glob` (matched against paths from the workspace root, as the results show them) as rg matches it
    from the directory `where` it searches: the components that lead to `where` taken off and the rest anchored
    there. A glob without '/' (a name at any depth) or starting with '**/' is the same either way. None: it
    names nothing below `where` (a negated one then leaves nothing out: "")."""
    negated = glob.startswith("!")
    body = glob[1:] if negated else glob
    sign = "!" if negated else ""
    if "/" not in body.rstrip("/") or body.startswith("**/"):
        return glob
    parts = body.lstrip("/").split("/")
    for index, directory in enumerate(where.split("/")):
        if index >= len(parts) - 1:  # it names `where` or a directory above it, not a file below
            return "" if negated else None
        part = parts[index]
        if part == "**":  # it may take the rest of `where` too
            return f"{sign}/{'/'.join(parts[index:])}"
        if not (part == directory or (_GLOB_WILDCARDS & set(part) and fnmatch.fnmatchcase(directory, part))):
            return "" if negated else None
    return f"{sign}/{'/'.join(parts[len(where.split('/')):])}"


def _glob_text(files: list[str], found: GlobMatches, pattern: str, where: str) -> str:
    if not files:
        text = f"No files match {pattern!r} in {where!r}."
    else:
        text = "\n".join(files)
        if found.truncated:
            text += (f"\n({found.matched} files match; the {len(files)} newest are shown: narrow the pattern or "
                     "the path)")
    if found.unreadable_directories:
        text += f"\n({found.unreadable_directories} directories could not be opened and were skipped)"
    if found.too_deep:
        text += f"\n({found.too_deep} directories were too deep to enter)"
    return text


def _grep_text(found: RipgrepResult, query: RipgrepQuery) -> str:
    if query.output_mode == "files_with_matches":
        lines = found.files
    elif query.output_mode == "count":
        lines = [f"{path}:{count}" for path, count in found.counts.items()]
    else:
        lines = _content_lines(found, query.context)
    text = "\n".join(lines) if lines else f"No matches for {query.pattern!r}."
    if found.truncated:
        text += f"\n(stopped at limit={query.limit}: there are more; narrow the pattern, path or glob)"
    if found.warnings:
        text += "\n(rg could not read everything: " + "; ".join(found.warnings) + ")"
    return text


def _content_lines(found: RipgrepResult, context: int) -> list[str]:
    """rg's own layout: `path:line:text` for a match, `path-line-text` for context, `--` between groups."""
    lines: list[str] = []
    previous: tuple[str, int | None] | None = None
    for match in found.lines:
        if context and previous is not None and (
                previous[0] != match.path or previous[1] is None or match.line != previous[1] + 1):
            lines.append("--")
        separator = ":" if match.match else "-"
        cut = f" [... cut at {MAX_LINE_CHARS} characters]" if match.cut else ""
        lines.append(f"{match.path}{separator}{match.line}{separator}{match.text}{cut}")
        previous = (match.path, match.line)
    return lines


def _grep_structured(found: RipgrepResult, query: RipgrepQuery) -> dict[str, Any]:
    results: dict[str, Any]
    if query.output_mode == "files_with_matches":
        results = {"files": found.files}
    elif query.output_mode == "count":
        results = {"counts": [{"path": path, "count": count} for path, count in found.counts.items()]}
    else:
        results = {"lines": [line.as_dict() for line in found.lines]}
    return {"output_mode": query.output_mode, **results, "truncated": found.truncated, "warnings": found.warnings}
