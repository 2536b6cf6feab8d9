"""The seed's ResultFormatter: the file search tools' answers as JSON text with sorted keys, absolute paths and
ISO 8601 UTC dates, and the same entries as structured output."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .service import IndexedFile

_EARLIEST = datetime.min.replace(tzinfo=UTC)
_LATEST = datetime.max.replace(tzinfo=UTC)


class ResultFormatter:
    """Turns results into what a call returns::

        entries = [ResultFormatter.entry(found) for found in answer.results]
        text = ResultFormatter.format_results(entries)     # '[\\n{"kind": "code", ...},\\n...\\n]'
    """

    @staticmethod
    def iso8601(moment: float | datetime | None) -> str | None:
        """`moment` (epoch seconds or an aware datetime) as 2026-11-18T09:30:00Z, to the second, in UTC."""
        if moment is None:
            return None
        if isinstance(moment, datetime):
            utc = moment.astimezone(UTC)
        else:
            try:
                utc = datetime.fromtimestamp(moment, UTC)
            except (OverflowError, OSError, ValueError):  # a timestamp past what a datetime holds (touch -d)
                utc = _EARLIEST if moment < 0 else _LATEST
        return utc.replace(microsecond=0, tzinfo=None).isoformat() + "Z"

    @staticmethod
    def entry(found: IndexedFile) -> dict[str, Any]:
        """One result as the tools return it."""
        return {"path": found.path, "name": found.name, "size": found.size,
                "modified": ResultFormatter.iso8601(found.modified), "kind": found.kind, "mime": found.mime}

    @staticmethod
    def format_results(entries: Sequence[Mapping[str, Any]]) -> str:
        """A JSON array with sorted keys, one entry a line (valid JSON, and a line per file to read)."""
        if not entries:
            return "[]"
        lines = ",\n".join(json.dumps(entry, sort_keys=True, ensure_ascii=False) for entry in entries)
        return f"[\n{lines}\n]"

    @staticmethod
    def format_metadata(metadata: Mapping[str, Any]) -> str:
        """A JSON object with sorted keys, indented."""
        return json.dumps(metadata, sort_keys=True, ensure_ascii=False, indent=2)
