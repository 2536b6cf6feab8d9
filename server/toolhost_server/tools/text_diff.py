"""A short unified diff of a file's change, for a model to check what an edit did, at a cost bounded whatever the
file: difflib compares only a small changed span; a larger one is diffed from the replacements' own places.

difflib's SequenceMatcher takes time quadratic in the lines it compares (a 200 KB file of alternating changed
and unchanged lines: minutes), and a thread cannot be stopped. So it is given at most DIFFLIB_MAX_WORK (lines
before x lines after, once the lines both texts begin and end with are set aside). Past that, the diff is built
from where the replacements were made (`Change`, which the substitution knows): each changed line is shown as
removed and added, with the lines around it as context, in one pass over the text up to the last hunk shown.
Without them it is left out and the answer says how many lines the change spans.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

DIFF_MAX_LINES: Final = 200
DIFF_LINE_CHARACTERS: Final = 400  # a minified line would otherwise fill the whole output
# Lines before x lines after that difflib may compare: about a tenth of a second.
DIFFLIB_MAX_WORK: Final = 1_000_000
_CONTEXT: Final = 3
_NO_NEWLINE: Final = "\\ No newline at end of file\n"


@dataclass(frozen=True, slots=True)
class Change:
    """One replacement, in character offsets: before[start:end] became after[new_start:new_end]."""

    start: int
    end: int
    new_start: int
    new_end: int


def short_diff(before: str, after: str, relative: str, changes: Sequence[Change] | None = None, *,
               more_changes: bool = False, max_lines: int = DIFF_MAX_LINES) -> tuple[str, bool]:
    """The unified diff (as `diff -u`, 3 lines of context) of `before` to `after`, cut after `max_lines` lines;
    and whether it was cut (or left out). `changes` are the replacements that made `after`, in order (those
    that replaced text by the same text left out); `more_changes`: there were more than those."""
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
    header = [f"--- a/{relative}\n", f"+++ b/{relative}\n"]
    if len(old_part) * len(new_part) <= DIFFLIB_MAX_WORK:
        lines = _difflib_hunks(old_part, new_part, first, header, max_lines)
    elif changes:
        lines = _hunks_of_changes(before, after, changes, header, max_lines)
    else:
        changed = max(len(old_part), len(new_part)) - 2 * _CONTEXT
        return (f"(diff left out: the change spans {changed} lines, too many to compare; read the file to see "
                "it)\n", True)
    if len(lines) <= 2:
        return "", False
    if len(lines) > max_lines:
        return "".join(lines[:max_lines]) + f"... (diff cut after {max_lines} lines)\n", True
    if more_changes:
        return "".join(lines) + f"... (diff of the first {len(changes or ())} replacements only)\n", True
    return "".join(lines), False


def _difflib_hunks(old_part: list[str], new_part: list[str], first: int, lines: list[str],
                   max_lines: int) -> list[str]:
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
    return lines


@dataclass(slots=True)
class _Region:
    """Whole lines that changed: before[start:end] became after[new_start:new_end]."""

    start: int
    end: int
    new_start: int
    new_end: int


def _hunks_of_changes(before: str, after: str, changes: Sequence[Change], lines: list[str],
                      max_lines: int) -> list[str]:
    """The hunks around `changes`, each changed line removed and added (not the smallest diff, but one whose
    cost is a pass over the text up to the last hunk shown)."""
    old_lines = _LineCounter(before)
    new_lines = _LineCounter(after)
    groups = _grouped(before, _regions(before, after, changes))
    for group in groups:
        head, tail = group[0], group[-1]
        start = _back_lines(before, head.start, _CONTEXT)
        stop = _forward_lines(before, tail.end, _CONTEXT)
        new_start = head.new_start - (head.start - start)
        new_stop = tail.new_end + (stop - tail.end)
        old_first, new_first = old_lines.line_at(start), new_lines.line_at(new_start)
        old_count = _count_lines(before, start, stop)
        new_count = _count_lines(after, new_start, new_stop)
        lines.append(f"@@ -{_range(old_first, old_first + old_count)} +{_range(new_first, new_first + new_count)} "
                     "@@\n")
        cursor = start
        for region in group:
            lines += _marked(" ", before, cursor, region.start, max_lines - len(lines))
            lines += _marked("-", before, region.start, region.end, max_lines - len(lines))
            lines += _marked("+", after, region.new_start, region.new_end, max_lines - len(lines))
            cursor = region.end
        lines += _marked(" ", before, cursor, stop, max_lines - len(lines))
        if len(lines) > max_lines:
            break
    return lines


def _regions(before: str, after: str, changes: Sequence[Change]) -> Iterator[_Region]:
    """The changes widened to whole lines (before and after alike), those that touch merged."""
    pending: _Region | None = None
    for change in changes:
        start = before.rfind("\n", 0, change.start) + 1
        end = change.end
        if not (end == len(before) or (_at_line_start(before, end) and _at_line_start(after, change.new_end))):
            newline = before.find("\n", end)
            end = len(before) if newline < 0 else newline + 1
        region = _Region(start, end, change.new_start - (change.start - start), change.new_end + (end - change.end))
        if pending is not None and region.start <= pending.end:
            pending.end, pending.new_end = region.end, region.new_end
            continue
        if pending is not None:
            yield pending
        pending = region
    if pending is not None:
        yield pending


def _grouped(before: str, regions: Iterator[_Region]) -> Iterator[list[_Region]]:
    """Regions that share a hunk: at most twice the context apart, as difflib groups them."""
    group: list[_Region] = []
    for region in regions:
        if group and before.count("\n", group[-1].end, region.start) > 2 * _CONTEXT:
            yield group
            group = []
        group.append(region)
    if group:
        yield group


class _LineCounter:
    """0-based line numbers of positions asked for in increasing order: one pass over the text in all."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.position = 0
        self.line = 0

    def line_at(self, position: int) -> int:
        self.line += self.text.count("\n", self.position, position)
        self.position = position
        return self.line


def _at_line_start(text: str, position: int) -> bool:
    return position == 0 or text[position - 1] == "\n"


def _back_lines(text: str, position: int, count: int) -> int:
    """The start of the line `count` lines before the one that starts at `position`."""
    for _ in range(count):
        if position == 0:
            break
        position = text.rfind("\n", 0, position - 1) + 1
    return position


def _forward_lines(text: str, position: int, count: int) -> int:
    """The end of the `count` lines from the line start `position` on (or of the text)."""
    for _ in range(count):
        if position >= len(text):
            break
        newline = text.find("\n", position)
        position = len(text) if newline < 0 else newline + 1
    return position


def _count_lines(text: str, start: int, stop: int) -> int:
    """Lines in text[start:stop], which starts at a line start and ends at a line end or the text's end."""
    return text.count("\n", start, stop) + (1 if stop > start and text[stop - 1] != "\n" else 0)


def _marked(mark: str, text: str, start: int, stop: int, room: int) -> list[str]:
    """The lines of text[start:stop] shown with `mark`, at most `room` + 1 of them (enough to know it is cut)."""
    shown: list[str] = []
    while start < stop and len(shown) <= room:
        newline = text.find("\n", start, stop)
        end = stop if newline < 0 else newline + 1
        shown.append(_shown(mark, text[start:end]))
        start = end
    return shown


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
