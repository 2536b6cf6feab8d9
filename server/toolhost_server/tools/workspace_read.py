"""The workspace tools that only look: read (and drowcoder's name for it, load), ls and list_workspaces."""

from __future__ import annotations

import fnmatch
import heapq
import json
import os
import stat
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ..model import Annotations, Example, Parameter
from ..workspaces.paths import shown_name
from ..workspaces.reading import MAX_LINE_CHARS, Line, LinesRead, read_lines
from ..workspaces.workspace_set import ServedWorkspace
from .base import ToolContext, ToolOutput
from .workspace_tool import WORKSPACE_PARAMETER, WorkspaceTool, workspaces_of

READ_OUTPUT_BYTES = 256 * 1024
DEFAULT_LIMIT = 2000
MAX_LIMIT = 100_000
MAX_LS_ENTRIES = 1000
MAX_IGNORE_PATTERNS = 100

_READ_ONLY = Annotations(read_only=True, idempotent=True)

_READ_OUTPUT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "The file's path from the workspace root, symlinks resolved."},
        "size_bytes": {"type": "integer"},
        "sha256": {"type": ["string", "null"], "description": (
            "Hex sha256 of the whole file (write's and edit's expected_sha256); null for a file larger than "
            "the workspace's max_file_bytes, which is not read whole.")},
        "start_line": {"type": ["integer", "null"], "description": "The number of the first line; null: none."},
        "lines": {"type": "array", "items": {"type": "string"}, "description": (
            "The lines from start_line on, without their line endings; a line over 2000 characters is cut.")},
        "cut_lines": {"type": "array", "items": {"type": "integer"}, "description": "The numbers of cut lines."},
        "next_offset": {"type": ["integer", "null"], "description": (
            "The offset to read on from; null when the lines reach the end of the file.")},
        "total_lines": {"type": ["integer", "null"], "description": (
            "The file's number of lines, when the read reached its end (null otherwise, and for a file over "
            "max_file_bytes read from its end, whose lines are not counted).")},
        "numbered_from_end": {"type": "boolean", "description": (
            "Line numbers count back from the end (-1 is the last line): a file over max_file_bytes read with "
            "a negative offset.")},
        "crlf": {"type": "boolean", "description": "Some lines end in CR LF (shown without the CR)."},
    },
    "required": ["path", "size_bytes", "sha256", "start_line", "lines", "cut_lines", "next_offset", "total_lines",
                 "numbered_from_end", "crlf"],
}


class ReadTool(WorkspaceTool):
    name = "read"
    display_name = "Read File"
    description = (
        "Reads a text file of the workspace as numbered lines (`cat -n` style: the line number, a tab, the "
        "line). `offset` is the first line (1-based); a negative offset counts from the end (-100: the last 100 "
        f"lines). At most `limit` lines (default {DEFAULT_LIMIT}) and {READ_OUTPUT_BYTES // 1024} KiB (or the "
        f"server's max_output_bytes, if smaller) are returned; a line over {MAX_LINE_CHARS} characters is cut "
        "and marked. When more remain, the text says so and `next_offset` is the offset to read on from. Works "
        "on files of any size: only the lines asked for are read, and a file over the workspace's "
        "max_file_bytes read with a negative offset is numbered from its end (-1: the last line). The CR of "
        "CR LF line endings is not shown (`crlf` says there were some). The structured output has the file's "
        "sha256 (for write and edit's expected_sha256; null for a file over max_file_bytes) and total_lines "
        "when the read reached the end. A binary file (a NUL byte in its first 8 KiB, or not UTF-8) fails with "
        "BINARY_FILE, a directory with IS_A_DIRECTORY (use ls), a missing file with FILE_NOT_FOUND, one the "
        "server may not read with ACCESS_DENIED, one that kept changing while it was opened with FILE_CHANGED.")
    tags = ("files", "read")
    parameters = (
        Parameter("path", "string", "The file, relative to the workspace root (or absolute inside it).",
                  required=True),
        Parameter("offset", "integer", "The first line to return, 1-based (0 is 1); negative: that many lines "
                                       "before the end, so -100 returns the last 100 lines.", default=1),
        Parameter("limit", "integer", "The most lines to return.", default=DEFAULT_LIMIT,
                  schema={"minimum": 1, "maximum": MAX_LIMIT}),
        WORKSPACE_PARAMETER,
    )
    output_schema = _READ_OUTPUT_SCHEMA
    max_output_bytes = READ_OUTPUT_BYTES
    # Left out of `toolhost check`: they name files a workspace need not hold.
    examples = (
        Example("Read a file from its start", {"path": "README.md"}, skip_check=True),
        Example("The last 100 lines of a log", {"path": "logs/app.log", "offset": -100}, skip_check=True),
        Example("Lines 200 to 249", {"path": "src/main.py", "offset": 200, "limit": 50}, skip_check=True),
    )
    annotations = _READ_ONLY

    async def run_in(self, served: ServedWorkspace, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        # The operator's max_output_bytes bounds every tool's output; read's own bound may only be lower.
        cap = min(type(self).max_output_bytes or READ_OUTPUT_BYTES, context.services.max_output_bytes)
        return await self.in_thread(self._read, served, arguments, cap)

    def _read(self, served: ServedWorkspace, arguments: Mapping[str, Any], cap: int) -> ToolOutput:
        # Everything is read from this one fd: a path swapped meanwhile cannot change what is read.
        with served.paths.open(arguments["path"], argument="path", kind="file") as opened:
            # Room for what surrounds the lines: the notes of the text, the other fields of the structured
            # output (the path twice over, for a pretty rendering's escapes).
            reserve = 1024 + 2 * len(json.dumps(opened.relative).encode())
            read = read_lines(opened.fd, opened.relative, offset=int(arguments["offset"]),
                              limit=int(arguments["limit"]), budget=max(cap - reserve, 1), line_cost=_line_cost,
                              whole_file_bytes=served.workspace.max_file_bytes)
        return ToolOutput(text=_read_text(read, int(arguments["offset"]), cap),
                          structured=_read_structured(read, opened.relative))


class LoadTool(ReadTool):
    name = "load"
    display_name = "Load File"
    alias_of = "read"
    description = "drowcoder's name for `read`, the same tool: " + ReadTool.description


def _cut_note(line: Line) -> str:
    return f" … [line cut: its first {MAX_LINE_CHARS} characters of {line.cut_from_bytes} bytes]"


def _line_cost(line: Line) -> int:
    """Bytes the line adds to the text, or to the structured output rendered indented, whichever is more."""
    text = len(f"{line.number:>6}\t".encode()) + len(line.text.encode()) + 1
    structured = len(json.dumps(line.text, ensure_ascii=False).encode()) + 8
    if line.cut_from_bytes is not None:
        text += len(_cut_note(line).encode())
        structured += 16
    return max(text, structured)


def _read_text(read: LinesRead, offset: int, cap: int) -> str:
    rows = [f"{line.number:>6}\t{line.text}{_cut_note(line) if line.cut_from_bytes is not None else ''}"
            for line in read.lines]
    if read.past_end:
        rows.append("[the file is empty]" if read.total_lines == 0 else
                    f"[the file has {read.total_lines} lines; offset {offset} is past its end]")
    if read.from_end:
        rows.append("[lines are numbered from the end (-1 is the last): the file is larger than the workspace's "
                    "max_file_bytes, so its lines were not counted]")
    if read.stopped_for_bytes:
        rows.append(f"[stopped at the output limit of {cap} bytes; continue with offset={read.next_offset}]")
    elif read.next_offset is not None:
        rows.append(f"[more lines follow; continue with offset={read.next_offset}]")
    return "\n".join(rows) + "\n" if rows else ""


def _read_structured(read: LinesRead, path: str) -> dict[str, Any]:
    return {
        "path": path,
        "size_bytes": read.size_bytes,
        "sha256": read.sha256,
        "start_line": read.lines[0].number if read.lines else None,
        "lines": [line.text for line in read.lines],
        "cut_lines": [line.number for line in read.lines if line.cut_from_bytes is not None],
        "next_offset": read.next_offset,
        "total_lines": read.total_lines,
        "numbered_from_end": read.from_end,
        "crlf": read.crlf,
    }


_LS_OUTPUT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "The directory's path from the workspace root ('.': the root)."},
        "entries": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "type": {"enum": ["file", "directory", "symlink", "other"]},
                "size": {"type": ["integer", "null"], "description": "Bytes, for a file; null otherwise."},
                "modified": {"type": "string", "description": "ISO 8601, UTC."},
            },
            "required": ["name", "type", "size", "modified"],
        }},
        "total_entries": {"type": "integer", "description": "Entries not ignored, listed or not."},
        "truncated": {"type": "boolean", "description": f"More than {MAX_LS_ENTRIES} entries: the first listed."},
    },
    "required": ["path", "entries", "total_entries", "truncated"],
}


class LsTool(WorkspaceTool):
    name = "ls"
    display_name = "List Directory"
    description = (
        "Lists a directory of the workspace: each entry's name, type (file, directory, symlink, other), size "
        "(files) and modification time (ISO 8601, UTC), sorted by name, at most "
        f"{MAX_LS_ENTRIES} (then `truncated` is true). Symlinks are listed as symlinks, not followed; their "
        "targets are not shown. `ignore` leaves out entries whose name matches any of its glob patterns "
        "(such as '*.pyc' or 'node_modules'). A file fails with NOT_A_DIRECTORY (use read), a missing "
        "directory with FILE_NOT_FOUND.")
    tags = ("files", "list")
    parameters = (
        Parameter("path", "string", "The directory, relative to the workspace root; default: the root.",
                  default="."),
        Parameter("ignore", "array", "Glob patterns (*, ?, [abc]) of entry names to leave out.",
                  default=[], schema={"items": {"type": "string", "maxLength": 255},
                                      "maxItems": MAX_IGNORE_PATTERNS}),
        WORKSPACE_PARAMETER,
    )
    output_schema = _LS_OUTPUT_SCHEMA
    examples = (
        Example("The workspace root", {}),
        # Left out of `toolhost check`: a workspace need not have a src directory.
        Example("A source directory without bytecode", {"path": "src", "ignore": ["*.pyc", "__pycache__"]},
                skip_check=True),
    )
    annotations = _READ_ONLY

    async def run_in(self, served: ServedWorkspace, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        return await self.in_thread(_list, served, arguments["path"], tuple(arguments["ignore"]))


def _list(served: ServedWorkspace, path: str, ignore: tuple[str, ...]) -> ToolOutput:
    with served.paths.open(path, argument="path", kind="directory") as opened:
        total = 0

        def listed() -> Any:
            nonlocal total
            # From the opened fd: the directory that was checked, whatever its name leads to by now.
            with os.scandir(opened.fd) as scan:
                for entry in scan:
                    if not any(fnmatch.fnmatchcase(entry.name, pattern) for pattern in ignore):
                        total += 1
                        yield entry

        # The first entries by name without holding a huge directory's every entry.
        first = heapq.nsmallest(MAX_LS_ENTRIES, listed(), key=lambda entry: entry.name)
        entries = [described for described in map(_entry, first) if described is not None]
    structured = {"path": opened.relative, "entries": entries, "total_entries": total,
                  "truncated": total > len(first)}
    return ToolOutput(text=_ls_text(structured), structured=structured)


def _entry(entry: os.DirEntry[str]) -> dict[str, Any] | None:
    try:
        st = entry.stat(follow_symlinks=False)
    except FileNotFoundError:
        return None  # removed since it was listed
    mode = st.st_mode
    kind = ("file" if stat.S_ISREG(mode) else "directory" if stat.S_ISDIR(mode)
            else "symlink" if stat.S_ISLNK(mode) else "other")
    return {
        "name": shown_name(entry.name),
        "type": kind,
        "size": st.st_size if kind == "file" else None,
        "modified": datetime.fromtimestamp(st.st_mtime, UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
    }


_SUFFIX = {"directory": "/", "symlink": "@", "other": "?", "file": ""}


def _ls_text(listing: Mapping[str, Any]) -> str:
    rows = [f"{e['type']:<9}  {'-' if e['size'] is None else e['size']:>12}  {e['modified']}  "
            f"{e['name']}{_SUFFIX[e['type']]}" for e in listing["entries"]]
    if not rows:
        rows.append("[no entries]" if listing["total_entries"] == 0 else "[every entry vanished while listed]")
    if listing["truncated"]:
        rows.append(f"[the first {len(listing['entries'])} of {listing['total_entries']} entries by name; "
                    "narrow with ignore or list a subdirectory]")
    return "\n".join(rows) + "\n"


_LIST_WORKSPACES_OUTPUT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "workspaces": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "default": {"type": "boolean", "description": "Used when a call names no workspace."},
                "read_only": {"type": "boolean", "description": "write and edit refuse to change it."},
                "bash": {"type": "boolean", "description": "The bash tool may run there."},
                "max_file_bytes": {"type": "integer", "description": (
                    "The largest file write and edit change, and read hashes whole.")},
            },
            "required": ["name", "default", "read_only", "bash", "max_file_bytes"],
        }},
    },
    "required": ["workspaces"],
}


class ListWorkspacesTool(WorkspaceTool):
    name = "list_workspaces"
    display_name = "List Workspaces"
    description = (
        "Lists the workspaces the file tools work in (the `workspace` argument of every file tool names one; "
        "the first is the default): whether each is read-only, whether bash may run there, and its "
        "max_file_bytes. With `workspace`, only that one.")
    tags = ("files", "workspaces")
    parameters = (WORKSPACE_PARAMETER,)
    output_schema = _LIST_WORKSPACES_OUTPUT_SCHEMA
    examples = (Example("Every workspace", {}),)
    annotations = _READ_ONLY

    async def run_in(self, served: ServedWorkspace, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        workspaces = workspaces_of(context)
        with_bash = workspaces.with_bash
        default = next(iter(workspaces))
        chosen = (served,) if arguments.get("workspace") else tuple(workspaces)
        # The host path is left out: it is the operator's business, and an agent names a workspace, never it.
        listed = [{"name": w.name, "default": w is default, "read_only": w.workspace.read_only,
                   "bash": w in with_bash, "max_file_bytes": w.workspace.max_file_bytes} for w in chosen]
        text = "\n".join(
            f"{w['name']}{' (default)' if w['default'] else ''}: "
            f"{'read-only' if w['read_only'] else 'read-write'}, bash {'on' if w['bash'] else 'off'}, "
            f"max_file_bytes {w['max_file_bytes']}" for w in listed) + "\n"
        return ToolOutput(text=text, structured={"workspaces": listed})
