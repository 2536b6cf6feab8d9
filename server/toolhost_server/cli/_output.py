"""Text for a person: aligned tables cut to the terminal, one-line and JSON text, and the reload summary."""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

from toolhost import ReloadResult

ELLIPSIS = "\N{HORIZONTAL ELLIPSIS}"
# The width of a table whose output reaches no terminal we can ask, as dpkg and others assume.
FALLBACK_WIDTH = 80


def terminal_width() -> int:
    """The terminal's width (COLUMNS first), or 0 when output is not a terminal (then nothing is cut)."""
    return shutil.get_terminal_size((0, 0)).columns


def summary_width() -> int:
    """The width for lines that summarise (a table of tools, whose whole descriptions `tools get` and --json
    give): COLUMNS, else stdout's terminal, else stderr's, else 80.

    Piped into less, grep or head, the output still ends on the terminal stderr writes to, and each tool stays
    one line there; only COLUMNS (an explicit wish, e.g. COLUMNS=1000) or a terminal of its own widens it.
    """
    width = terminal_width()
    if width > 0:
        return width
    try:
        width = os.get_terminal_size(sys.__stderr__.fileno()).columns if sys.__stderr__ else 0
    except (OSError, ValueError):  # not a terminal, or a closed stderr
        width = 0
    return width if width > 0 else FALLBACK_WIDTH


def one_line(text: str) -> str:
    return " ".join(text.split())


def trim(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, an ellipsis marking the cut; whole when it fits or `limit` is 0."""
    if limit <= 0 or len(text) <= limit:
        return text
    return text[: limit - 1].rstrip() + ELLIPSIS


# What the last column keeps, at least, before a table drops its optional columns to make room.
MIN_LAST_COLUMN = 24


def format_table(headers: Sequence[str], rows: Iterable[Sequence[str]], width: int = 0, indent: str = "",
                 wrap: bool = False, optional: Sequence[int] = ()) -> list[str]:
    """Aligned columns. With `width`, each line is cut to fit (the last column, the long one, goes first); with
    `wrap` too, the last column is wrapped under itself instead, so nothing is lost (it keeps 20 characters
    even where that overflows). `optional` lists columns, in the order they may go, that are left out while the
    last column would get fewer than MIN_LAST_COLUMN characters: long names must not leave a description of
    three letters."""
    table = [list(headers), *(list(row) for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(headers) - 1)]
    if width:
        dropped: set[int] = set()
        for column in optional:
            used = len(indent) + sum(w + 2 for i, w in enumerate(widths) if i not in dropped)
            if width - used >= MIN_LAST_COLUMN:
                break
            dropped.add(column)
        if dropped:
            table = [[cell for i, cell in enumerate(row) if i not in dropped] for row in table]
            widths = [w for i, w in enumerate(widths) if i not in dropped]
    lines = []
    for row in table:
        lead = indent + "".join(cell.ljust(w) + "  " for cell, w in zip(row, widths, strict=False))
        if wrap and width:
            parts = textwrap.wrap(row[-1], max(width - len(lead), 20)) or [""]
            lines.append((lead + parts[0]).rstrip())
            lines += [" " * len(lead) + part for part in parts[1:]]
        else:
            lines.append(trim((lead + row[-1]).rstrip(), width))
    return lines


def json_text(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def format_reload(result: ReloadResult) -> list[str]:
    if result.success:
        lines = [f"reloaded: generation {result.generation}, {plural(result.count, 'tool')}"]
    else:
        lines = [f"reload failed: generation {result.generation} with {plural(result.count, 'tool')} "
                 "keeps serving"]
    changes = [("added", result.added), ("removed", result.removed), ("changed", result.changed)]
    lines += [f"  {label + ':':<9}{', '.join(names)}" for label, names in changes if names]
    if result.success and not any(names for _, names in changes):
        lines.append("  no changes")
    if result.errors:
        lines.append(f"{plural(len(result.errors), 'problem')}:")
        lines += [f"  {error}" for error in result.errors]
    if result.missing_required:
        lines.append(f"missing required tools: {', '.join(result.missing_required)}")
    return lines
