"""The log_inspector tool: the server's log inspector (memory, files, database; merged) for an agent."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from datetime import datetime
from typing import Any

from ..errors import InvalidPageTokenError, InvalidRequestError
from ..logs.database import DATABASE_SOURCE
from ..logs.file_reader import FILE_SOURCE
from ..logs.inspector import LogInspector, LogPage
from ..logs.memory import MEMORY_SOURCE
from ..logs.query import LogFilter
from ..logs.record import LEVELS
from ..logs.time_bounds import parse_time_bound
from ..model import Annotations, Example, Parameter
from .base import Tool, ToolContext, ToolRaisedFailure

# The order the TypeScript and Go clients' tests read back as the enum of a built-in tool.
READER_KINDS = (MEMORY_SOURCE, FILE_SOURCE, DATABASE_SOURCE)


class LogInspectorTool(Tool):
    name = "log_inspector"
    display_name = "Log Inspector"
    description = (
        "Reads the server's logs: its own recent records, the log files and the database logs table it is "
        "configured to read, merged and sorted newest first. Filter by minimum level, time range, text, trace id "
        "or source; returns the records, a next_page_token for older ones, and a summary (record_count, counts "
        "per level and source, readers that were unavailable and why, and notes). INVALID_QUERY for a bad time, "
        "level or page token.")
    category = "diagnostics"
    tags = ("logs", "diagnostics", "observability", "introspection")
    # Logs show what every caller did and which tools failed how: admins only.
    requires_admin = True
    parameters = (
        Parameter("level", "string", "Only records at this level or above.", enum=LEVELS),
        Parameter("since", "string", "Only records at or after this time: ISO 8601, or an age such as 15m, 2h, 1d."),
        Parameter("until", "string", "Only records at or before this time: ISO 8601, or an age such as 5m."),
        Parameter("text", "string", "Only records whose message contains this text (case-insensitive)."),
        Parameter("trace_id", "string", "Only records of this trace (a call result's trace_id)."),
        # An enum, as the readers are a fixed set: an unknown one is INVALID_ARGUMENT naming them, before the tool
        # runs. (The other introspection tools answer NOT_FOUND for names of what this server happens to have.)
        Parameter("source", "string", "Only records from this reader.", enum=READER_KINDS),
        Parameter("limit", "integer", "The most records to return.", default=50,
                  schema={"minimum": 1, "maximum": 1000}),
        Parameter("page_token", "string", "The next_page_token of a previous call, for older records."),
    )
    examples = (
        Example("Recent errors", {"level": "ERROR", "since": "1h"}),
        Example("Everything logged for one call's trace", {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"}),
    )
    annotations = Annotations(read_only=True, idempotent=True)

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> dict[str, Any]:
        inspector = context.services.logs
        if inspector is None:
            raise ToolRaisedFailure("this server was started without its log readers, so there are no logs to "
                                    "inspect", "LOGS_UNAVAILABLE")
        source = arguments.get("source", "")
        try:
            log_filter = LogFilter(
                min_level=arguments.get("level", ""),
                since=_time(arguments.get("since")),
                until=_time(arguments.get("until")),
                text=arguments.get("text", ""),
                trace_id=arguments.get("trace_id", ""),
                source=source,
            )
            page = await inspector.query(log_filter, int(arguments["limit"]),
                                         arguments.get("page_token", ""))
        except (ValueError, InvalidRequestError, InvalidPageTokenError) as exc:
            raise ToolRaisedFailure(getattr(exc, "message", str(exc)), "INVALID_QUERY") from None
        return {
            "records": [record.as_dict() for record in page.records],
            "next_page_token": page.next_page_token,
            "summary": _summary(page, source, inspector),
        }


def _summary(page: LogPage, source: str, inspector: LogInspector) -> dict[str, Any]:
    """The inspector's summary, with the record count and notes in words: each reader that could not answer, and
    a source this server has no reader for (kept a plain empty answer, as before: not an error)."""
    summary = page.summary
    notes = list(summary.notes)
    notes += [f"the {name} log reader could not answer: {reason}" for name, reason in summary.unavailable.items()]
    if source and not summary.sources:
        served = ", ".join(sorted({r.source for r in inspector.readers})) or "none"
        notes.append(f"this server has no {source} log reader (set log_files for files, log_database for the "
                     f"database); it reads: {served}")
    return {**asdict(summary), "record_count": len(page.records), "sources": list(summary.sources),
            "notes": notes}


def _time(value: str | None) -> datetime | None:
    return parse_time_bound(value) if value else None
