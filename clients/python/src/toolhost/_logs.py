"""Log records, pages and the QueryLogs / TailLogs requests of the log service, for both clients.

    page = client.query_logs_page(level="WARNING", since=datetime.now(UTC) - timedelta(hours=1))
    for entry in client.query_logs(text="timeout"):       # every page, newest first
        print(entry.time, entry.level, entry.message)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from google.protobuf import json_format
from google.protobuf.timestamp_pb2 import Timestamp

from ._results import plain_value
from .v1 import log_service_pb2

__all__ = ["LogEntry", "LogLevel", "LogPage", "LogSummary"]

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

_LEVELS: dict[str, log_service_pb2.LogLevel] = {
    "DEBUG": log_service_pb2.LOG_LEVEL_DEBUG,
    "INFO": log_service_pb2.LOG_LEVEL_INFO,
    "WARNING": log_service_pb2.LOG_LEVEL_WARNING,
    "ERROR": log_service_pb2.LOG_LEVEL_ERROR,
    "CRITICAL": log_service_pb2.LOG_LEVEL_CRITICAL,
}
_LEVEL_NAMES = {value: name for name, value in _LEVELS.items()}


@dataclass(frozen=True)
class LogEntry:
    """One log record. `level` is DEBUG, INFO, WARNING, ERROR or CRITICAL; `source` the reader that found it
    ("memory", "file", "database"); `fields` everything else it carried (extra fields, "exception", "file")."""

    time: datetime
    level: str
    logger: str
    message: str
    trace_id: str
    span_id: str
    source: str
    fields: dict[str, Any]
    raw: log_service_pb2.LogRecord = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, message: log_service_pb2.LogRecord) -> LogEntry:
        return cls(
            time=message.time.ToDatetime(tzinfo=UTC), level=_LEVEL_NAMES.get(message.level, "INFO"),
            logger=message.logger, message=message.message, trace_id=message.trace_id, span_id=message.span_id,
            source=message.source, fields=plain_value(json_format.MessageToDict(message.fields)), raw=message)

    def to_dict(self) -> dict[str, Any]:
        """JSON values: the time as ISO 8601 UTC text."""
        return {"time": self.time.isoformat().replace("+00:00", "Z"), "level": self.level, "logger": self.logger,
                "message": self.message, "trace_id": self.trace_id, "span_id": self.span_id, "source": self.source,
                "fields": self.fields}


@dataclass(frozen=True)
class LogSummary:
    """What a page holds: records per level and per source, the readers asked, those that could not answer
    (source -> why) and notes (a reader that stopped before searching everything)."""

    level_counts: dict[str, int]
    source_counts: dict[str, int]
    sources: tuple[str, ...]
    unavailable: dict[str, str]
    notes: tuple[str, ...]

    @classmethod
    def from_proto(cls, message: log_service_pb2.LogSummary) -> LogSummary:
        return cls(
            level_counts=dict(message.level_counts), source_counts=dict(message.source_counts),
            sources=tuple(message.sources),
            unavailable={reader.source: reader.reason for reader in message.unavailable_readers},
            notes=tuple(message.notes))


@dataclass(frozen=True)
class LogPage:
    """A page of records, newest first; `next_page_token` is empty on the last page."""

    records: tuple[LogEntry, ...]
    next_page_token: str
    summary: LogSummary

    @classmethod
    def from_proto(cls, message: log_service_pb2.QueryLogsResponse) -> LogPage:
        return cls(tuple(LogEntry.from_proto(r) for r in message.records), message.next_page_token,
                   LogSummary.from_proto(message.summary))


def log_filter(
    level: str | None, since: datetime | None, until: datetime | None, text: str | None, trace_id: str | None,
    source: str | None,
) -> log_service_pb2.LogFilter:
    message = log_service_pb2.LogFilter(text=text or "", trace_id=trace_id or "", source=source or "")
    if level:
        try:
            message.min_level = _LEVELS[level.upper()]
        except KeyError:
            raise ValueError(f"level must be one of {', '.join(_LEVELS)}, not {level!r}") from None
    if since is not None:
        message.since.CopyFrom(_timestamp(since))
    if until is not None:
        message.until.CopyFrom(_timestamp(until))
    return message


def _timestamp(moment: datetime) -> Timestamp:
    if moment.tzinfo is None:
        raise ValueError("since and until must be timezone-aware datetimes (datetime.now(UTC), not utcnow())")
    stamp = Timestamp()
    stamp.FromDatetime(moment.astimezone(UTC))
    return stamp


def query_logs_request(
    level: str | None, since: datetime | None, until: datetime | None, text: str | None, trace_id: str | None,
    source: str | None, page_size: int, page_token: str,
) -> log_service_pb2.QueryLogsRequest:
    return log_service_pb2.QueryLogsRequest(
        filter=log_filter(level, since, until, text, trace_id, source), page_size=page_size, page_token=page_token)


def tail_logs_request(
    level: str | None, since: datetime | None, text: str | None, trace_id: str | None, source: str | None,
    backlog: int,
) -> log_service_pb2.TailLogsRequest:
    return log_service_pb2.TailLogsRequest(
        filter=log_filter(level, since, None, text, trace_id, source), backlog=backlog)


def tail_entry(message: log_service_pb2.TailLogsResponse) -> LogEntry:
    return LogEntry.from_proto(message.record)
