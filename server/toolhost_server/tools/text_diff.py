"""A short unified diff of a file's change, for a model to check what an edit did."""

from __future__ import annotations

import difflib
from typing import Final

DIFF_MAX_LINES: Final = 200
DIFF_LINE_CHARACTERS: Final = 400  # a minified line would otherwise fill the whole output
_CONTEXT: Final = 3
_NO_NEWLINE: Final = "\\ No newline at end of file\n"


def short_diff(before: str, after: str, relative: str, max_lines: int = DIFF_MAX_LINES) -> tuple[str, bool]:
    """The unified diff (as `diff -u`, 3 lines of context) of `before` to `after`, cut after `max_lines` lines;
    and whether it was cut.

    The lines both texts begin and end with are set aside before difflib compares the rest, so an edit of a
    few lines in a large file costs a comparison of those lines only.
    """
    old, new = _lines(before), _lines(after)
    shortest = min(len(old), len(new))
    start = 0
    while start < shortest and old[start] == new[start]:
        start += 1
    end = 0
    while end < shortest - start and old[-1 - end] == new[-1 - end]:
        end += 1
    first = max(0, start - _CONTEXT)
    cut = max(0, end - _CONTEXT)
    old_part, new_part = old[first:len(old) - cut], new[first:len(new) - cut]
    lines = [f"--- a/{relative}\n", f"+++ b/{relative}\n"]
    matcher = difflib.SequenceMatcher(None, old_part, new_part)
    for group in matcher.get_grouped_opcodes(_CONTEXT):
        _, i1, _, j1, _ = group[0]
        _, _, i2, _, j2 = group[-1]
        lines.append(f"@@ -{_range(first + i1, first + i2)} +{_range(first + j1, first + j2)} @@\n")
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                lines += (_shown(" ", line) for line in old_part[a1:a2])
                continue
            lines += (_shown("-", line) for line in old_part[a1:a2])
            lines += (_shown("+", line) for line in new_part[b1:b2])
        if len(lines) > max_lines:
            break
    if len(lines) <= 2:
        return "", False
    if len(lines) > max_lines:
        return "".join(lines[:max_lines]) + f"... (diff cut after {max_lines} lines)\n", True
    return "".join(lines), False


def _lines(text: str) -> list[str]:
    """Lines split at "\\n" only (str.splitlines also splits at \\r, \\f, U+2028, ... which a diff shows as they
    are), each with its newline; the last without one when the text does not end with one."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _shown(mark: str, line: str) -> str:
    body = line[:-1] if line.endswith("\n") else line
    if len(body) > DIFF_LINE_CHARACTERS:
        body = body[:DIFF_LINE_CHARACTERS] + f"... ({len(body) - DIFF_LINE_CHARACTERS} more characters)"
    return f"{mark}{body}\n" if line.endswith("\n") else f"{mark}{body}\n{_NO_NEWLINE}"


def _range(start: int, stop: int) -> str:
    """A hunk's range as `diff -u` writes it: 1-based first line and count; an empty range is the line before."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start if length == 0 else start + 1},{length}"
