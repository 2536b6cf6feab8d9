"""Text for a person: aligned tables cut to the terminal, one-line and JSON text, and the reload summary."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Sequence
from typing import Any

from toolhost import ReloadResult


def terminal_width() -> int:
    """The terminal's width, or 0 when output is not a terminal (then nothing is cut)."""
    return shutil.get_terminal_size((0, 0)).columns


def one_line(text: str) -> str:
    return " ".join(text.split())


def trim(text: str, limit: int) -> str:
    if limit <= 0 or len(text) <= limit:
        return text
    return text[: max(limit - 3, 0)] + "..."


def format_table(headers: Sequence[str], rows: Iterable[Sequence[str]], width: int = 0, indent: str = "") -> list[str]:
    """Aligned columns; with `width`, the last column is cut so each line fits (but keeps 20 characters)."""
    table = [list(headers), *(list(row) for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(headers) - 1)]
    lead = len(indent) + sum(w + 2 for w in widths)
    last_limit = max(width - lead, 20) if width else 0
    lines = []
    for row in table:
        cells = [cell.ljust(w) for cell, w in zip(row, widths, strict=False)]
        lines.append((indent + "  ".join([*cells, trim(row[-1], last_limit)])).rstrip())
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
