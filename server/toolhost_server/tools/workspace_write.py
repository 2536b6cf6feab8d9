"""The tools that change files in a workspace: `write` and `edit` (PocketDev's file operations) and
drowcoder's `search_and_replace`. Every change is an atomic replace (workspaces.writing); what a change starts
from is read through the workspace's PathSanitizer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ..errors import FieldViolation, InvalidArgumentsError
from ..model import Annotations, Example, Parameter
from ..workspaces.paths import quoted
from ..workspaces.workspace_set import ServedWorkspace
from ..workspaces.writing import ChangeGate, CurrentText, check_expected, read_text, replace_file
from .base import ToolContext, ToolOutput, ToolRaisedFailure
from .text_diff import DIFF_MAX_LINES, short_diff
from .text_substitution import Substituted, substitute_by_pattern, substitute_literally
from .workspace_tool import WORKSPACE_PARAMETER, WorkspaceTool, require_writable

SHA256_PATTERN: Final = "^[0-9a-f]{64}$"
MAX_PATTERN_CHARS: Final = 10_000  # as grep's
# The share of the call's time a regular expression may take; the rest reads and writes the file.
_REGEX_SHARE: Final = 0.8
_MIN_REGEX_SECONDS: Final = 1.0

_PATH = Parameter("path", "string", "The file, relative to the workspace root (or absolute inside it).",
                  required=True)
_EXPECTED_SHA256 = Parameter(
    "expected_sha256", "string", "The sha256 (lowercase hex) the file had when you read it (`read` returns it): "
    "the call fails with STALE_FILE, changing nothing, when the file holds anything else now or was deleted.",
    schema={"pattern": SHA256_PATTERN})

_WRITE_OUTPUT_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "The file written, from the workspace root, after symlinks."},
        "bytes_written": {"type": "integer", "description": "The file's new size."},
        "sha256": {"type": "string", "description": "The sha256 of the new content (lowercase hex)."},
        "created": {"type": "boolean", "description": "Whether the file did not exist before."},
    },
    "required": ["path", "bytes_written", "sha256", "created"],
}

_CHANGE_OUTPUT_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "The file changed, from the workspace root, after symlinks."},
        "replacements": {"type": "integer", "description": "How many occurrences were replaced."},
        "bytes_written": {"type": "integer", "description": "The file's new size (0: nothing was written, the "
                                                            "replacements left the content as it was)."},
        "sha256": {"type": "string", "description": "The sha256 of the file's content now (lowercase hex)."},
        "diff": {"type": "string", "description": f"A unified diff of the change, at most {DIFF_MAX_LINES} "
                                                  "lines."},
        "diff_truncated": {"type": "boolean", "description": "Whether the diff was cut."},
    },
    "required": ["path", "replacements", "bytes_written", "sha256", "diff", "diff_truncated"],
}


class WriteTool(WorkspaceTool):
    name = "write"
    display_name = "Write File"
    description = (
        "Writes `content` to the file at `path` in a workspace, replacing what it held, or creating it and any "
        "missing parent directories. The write is atomic: readers see the old content or the new, never a part. "
        "An existing file keeps its owner and mode (set-ID bits aside); a new one gets mode 0644 and the "
        "workspace's owner. Writing "
        "through a symlink changes its target. Give `expected_sha256` (from `read`) to refuse with STALE_FILE "
        "when the file changed since you read it. Returns the bytes written and the new sha256. Fails with "
        "WORKSPACE_READ_ONLY, FILE_TOO_LARGE (past the workspace's max_file_bytes) or NO_SPACE (the original is "
        "then intact).")
    tags = ("files", "workspace", "write")
    parameters = (
        _PATH,
        Parameter("content", "string", "The file's whole new content (UTF-8 text).", required=True),
        _EXPECTED_SHA256,
        WORKSPACE_PARAMETER,
    )
    output_schema = _WRITE_OUTPUT_SCHEMA
    examples = (
        Example("Create a file", {"path": "notes/todo.md", "content": "# To do\n- write tests\n"}),
        Example("Replace a file only if it is still what was read",
                {"path": "setup.cfg", "content": "[metadata]\nname = demo\n", "expected_sha256": "0" * 64}),
    )
    annotations = Annotations(destructive=True, idempotent=True)

    async def run_in(self, served: ServedWorkspace, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        require_writable(served)
        content = _utf8(arguments["content"], "content")
        written = await self.change_in_thread(lambda gate: replace_file(
            served, arguments["path"], content, expected_sha256=arguments.get("expected_sha256"), gate=gate))
        verb = "Created" if written.created else "Wrote"
        return ToolOutput(
            text=f"{verb} {written.relative}: {written.size} bytes, sha256 {written.sha256}.",
            structured={"path": written.relative, "bytes_written": written.size, "sha256": written.sha256,
                        "created": written.created})


class EditTool(WorkspaceTool):
    name = "edit"
    display_name = "Edit File"
    description = (
        "Replaces the exact text `old_string` with `new_string` in the UTF-8 text file at `path`, atomically, "
        "keeping the file's mode and owner; returns a unified diff of the change. `old_string` must occur exactly "
        "once (include a few surrounding lines to make it unique), unless `replace_all` replaces every "
        "occurrence. Fails with NO_MATCH when it does not occur, MATCH_NOT_UNIQUE (with the count) when it occurs "
        "more than once, STALE_FILE when `expected_sha256` is given and the file changed since you read it (or "
        "changes during the edit), BINARY_FILE, FILE_TOO_LARGE, WORKSPACE_READ_ONLY or NO_SPACE.")
    tags = ("files", "workspace", "edit")
    parameters = (
        _PATH,
        Parameter("old_string", "string", "The exact text to replace, whitespace and line ends included.",
                  required=True, schema={"minLength": 1}),
        Parameter("new_string", "string", "The text to put in its place (different from old_string; empty "
                                          "deletes it).", required=True),
        Parameter("replace_all", "boolean", "Replace every occurrence instead of requiring exactly one.",
                  default=False),
        _EXPECTED_SHA256,
        WORKSPACE_PARAMETER,
    )
    output_schema = _CHANGE_OUTPUT_SCHEMA
    examples = (
        Example("Change one line", {"path": "src/app.py", "old_string": "DEBUG = True\n",
                                    "new_string": "DEBUG = False\n"}),
        Example("Rename everywhere in a file", {"path": "src/app.py", "old_string": "old_name",
                                                "new_string": "new_name", "replace_all": True}),
    )
    annotations = Annotations(destructive=True)

    async def run_in(self, served: ServedWorkspace, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        require_writable(served)
        old, new = arguments["old_string"], arguments["new_string"]
        if old == new:
            raise InvalidArgumentsError("", [FieldViolation(
                "/new_string", "is the same as old_string, so nothing would change; give the text old_string "
                               "is to become")])
        _utf8(new, "new_string")
        return await self.change_in_thread(lambda gate: self._edit(served, arguments, gate))

    @staticmethod
    def _edit(served: ServedWorkspace, arguments: Mapping[str, Any], gate: ChangeGate) -> ToolOutput:
        current = read_text(served, arguments["path"])
        check_expected(current.relative, current.sha256, arguments.get("expected_sha256"))
        old, new = arguments["old_string"], arguments["new_string"]
        found = current.text.count(old)
        if found == 0:
            raise ToolRaisedFailure(f"old_string does not occur in {quoted(current.relative)}"
                                    f"{_line_end_hint(current, old)}; read the file again and copy the text "
                                    "exactly, whitespace included", "NO_MATCH")
        if found > 1 and not arguments["replace_all"]:
            raise ToolRaisedFailure(
                f"old_string occurs {found} times in {quoted(current.relative)}; add surrounding lines to "
                f"old_string so that it matches once, or set replace_all to replace all {found}", "MATCH_NOT_UNIQUE")
        # Sized before it is built: 10 MiB of "a" with a longer new_string for each would be gigabytes.
        changed = substitute_literally(current.text, old, new, 0 if arguments["replace_all"] else 1,
                                       served.workspace.max_file_bytes, current.relative)
        return _write_change(served, arguments["path"], current, changed, gate)


class SearchAndReplaceTool(WorkspaceTool):
    name = "search_and_replace"
    display_name = "Search and Replace"
    description = (
        "Replaces the text `search` with `replace` in the UTF-8 text file at `path`, every occurrence or the "
        "first `count`, atomically; returns the number of replacements and a unified diff. With `regex`, "
        "`search` is a Python regular expression (re module syntax; flags inline, such as (?i) or (?m)) and "
        "`replace` may refer to its groups as \\1 or \\g<name>. Fails with NO_MATCH when nothing matches, "
        "BINARY_FILE, FILE_TOO_LARGE, WORKSPACE_READ_ONLY or NO_SPACE, and TIMEOUT when a pattern takes too long "
        "(nested repetition such as (a+)+ can take exponential time) or, the server running few regular "
        "expressions at once, none could start in time.")
    category = "agent"
    tags = ("files", "workspace", "edit", "regex")
    parameters = (
        _PATH,
        Parameter("search", "string", "The text to find, or with regex the pattern.", required=True,
                  schema={"minLength": 1, "maxLength": MAX_PATTERN_CHARS}),
        Parameter("replace", "string", "The text to put in place of each match (empty deletes it).",
                  required=True),
        Parameter("regex", "boolean", "Whether `search` is a Python regular expression.", default=False),
        Parameter("count", "integer", "Replace at most this many matches, first ones first; 0 or absent: all.",
                  schema={"minimum": 0}),
        WORKSPACE_PARAMETER,
    )
    output_schema = _CHANGE_OUTPUT_SCHEMA
    examples = (
        Example("Replace a word everywhere", {"path": "README.md", "search": "colour", "replace": "color"}),
        Example("Reorder dates with a regex", {"path": "log.txt", "search": r"(\d{2})/(\d{2})/(\d{4})",
                                               "replace": r"\3-\2-\1", "regex": True}),
    )
    annotations = Annotations(destructive=True)

    async def run_in(self, served: ServedWorkspace, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        require_writable(served)
        search, replace, count = arguments["search"], arguments["replace"], int(arguments.get("count") or 0)
        _utf8(replace, "replace")
        path = arguments["path"]
        current = await self.in_thread(read_text, served, path)
        limit = served.workspace.max_file_bytes
        if arguments["regex"]:
            budget = max(_MIN_REGEX_SECONDS, context.timeout_seconds * _REGEX_SHARE)
            changed = await substitute_by_pattern(current.text, search, replace, count, limit, current.relative,
                                                  budget)
        else:
            changed = await self.in_thread(substitute_literally, current.text, search, replace, count, limit,
                                           current.relative)
        if changed.replacements == 0:
            raise ToolRaisedFailure(f"{'the pattern matches' if arguments['regex'] else 'search occurs'} nowhere "
                                    f"in {quoted(current.relative)}{_line_end_hint(current, search)}; nothing was "
                                    "changed", "NO_MATCH")
        return await self.change_in_thread(lambda gate: _write_change(served, path, current, changed, gate))


def _write_change(served: ServedWorkspace, path: str, current: CurrentText, changed: Substituted,
                  gate: ChangeGate) -> ToolOutput:
    """Write `changed` over the file read as `current` (STALE_FILE if it changed meanwhile) and report it. The
    diff is made first: whatever time it takes is then spent before the change, which the call may still give
    up, never after it."""
    plural = "" if changed.replacements == 1 else "s"
    if changed.text == current.text:  # each match replaced by itself: the file is left as it is
        return ToolOutput(
            text=f"Replaced {changed.replacements} occurrence{plural} in {current.relative} by identical text; "
                 "the file is unchanged.",
            structured={"path": current.relative, "replacements": changed.replacements, "bytes_written": 0,
                        "sha256": current.sha256, "diff": "", "diff_truncated": False})
    diff, cut = short_diff(current.text, changed.text, current.relative, changed.changes,
                           more_changes=changed.more_changes)
    written = replace_file(served, path, changed.text.encode("utf-8"), expected_sha256=current.sha256, gate=gate)
    return ToolOutput(
        text=f"Replaced {changed.replacements} occurrence{plural} in {written.relative}: now {written.size} bytes, "
             f"sha256 {written.sha256}.\n\n{diff}",
        structured={"path": written.relative, "replacements": changed.replacements, "bytes_written": written.size,
                    "sha256": written.sha256, "diff": diff, "diff_truncated": cut})


def _utf8(value: str, argument: str) -> bytes:
    """`value` as UTF-8; INVALID_ARGUMENT for a lone surrogate (JSON can carry one, no UTF-8 file can)."""
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgumentsError("", [FieldViolation(
            f"/{argument}", f"holds a lone surrogate (U+{ord(value[exc.start]):04X}) at character {exc.start}, "
                            "which UTF-8 cannot encode; send text made of whole characters")]) from None


def _line_end_hint(current: CurrentText, searched: str) -> str:
    """A hint for the commonest reason an exact match fails: the file's lines end in CRLF."""
    if "\n" in searched and "\r\n" not in searched and searched.replace("\n", "\r\n") in current.text:
        return " (its lines end in \\r\\n: write them so)"
    return ""

