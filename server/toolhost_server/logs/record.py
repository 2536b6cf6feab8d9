"""The LogRecord every reader returns, its levels, and its conversion from a stdlib logging record."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from .trace_context import trace_ids_of

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_RANKS = {name: rank for rank, name in enumerate(LEVELS)}
# What other logging systems call their levels, as the nearest of ours.
_ALIASES = {"TRACE": "DEBUG", "FINE": "DEBUG", "NOTICE": "INFO", "WARN": "WARNING", "ERR": "ERROR",
            "FATAL": "CRITICAL", "CRIT": "CRITICAL", "ALERT": "CRITICAL", "EMERG": "CRITICAL", "PANIC": "CRITICAL"}

# Everything a stdlib record has of its own (and what formatting adds); the other attributes came from `extra=`.
# trace_id and span_id are top-level fields of a LogRecord, not extras.
STANDARD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "taskName", "trace_id", "span_id"}

# Set (through `extra=`) by a writer whose extra fields are its own and never change after the call, such as the
# audit trail's: the memory ring may keep such a record unconverted. Other records' extras are the caller's
# objects, which could change (and then show an unredacted secret) or stay alive while the ring holds them.
EXTRAS_FINAL = "_extras_final"

SortKey = tuple[datetime, str, tuple[int, ...]]
# Every log line asks: the usual numbers without a search.
_STANDARD_LEVELS = {logging.DEBUG: "DEBUG", logging.INFO: "INFO", logging.WARNING: "WARNING",
                    logging.ERROR: "ERROR", logging.CRITICAL: "CRITICAL"}


def normalize_level(name: str) -> str:
    """One of LEVELS for a level name from any source; an unknown name counts as INFO."""
    upper = name.strip().upper()
    upper = _ALIASES.get(upper, upper)
    return upper if upper in _RANKS else "INFO"


def level_rank(level: str) -> int:
    """0 for DEBUG up to 4 for CRITICAL."""
    return _RANKS.get(level, _RANKS["INFO"])


def level_of_number(levelno: int) -> str:
    """The stdlib's numeric level (10, 20, ... or custom ones in between) as one of LEVELS."""
    known = _STANDARD_LEVELS.get(levelno)
    if known is not None:
        return known
    for name in reversed(LEVELS):
        if levelno >= logging.getLevelName(name):
            return name
    return "DEBUG"


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One log record, whichever reader found it.

    `time` is timezone-aware UTC; `level` is one of LEVELS; `source` names the reader ("memory", "file",
    "database"); `fields` holds everything else the record carried (extra fields, the file a line came from,
    an exception's traceback), JSON values only. `position` orders the records of one source that share a time
    (a sequence number, a row id, a file's inode and offset) and makes (time, source, position) unique.
    """

    time: datetime
    level: str
    logger: str
    message: str
    trace_id: str = ""
    span_id: str = ""
    source: str = ""
    fields: Mapping[str, Any] = field(default_factory=dict)
    position: tuple[int, ...] = ()

    def sort_key(self) -> SortKey:
        """Larger is newer; the inspector sorts by it, and page tokens hold it."""
        return (self.time, self.source, self.position)

    def as_dict(self) -> dict[str, Any]:
        """The record as JSON values (the log_inspector tool's output, `toolhost logs --json`)."""
        return {
            "time": format_time(self.time), "level": self.level, "logger": self.logger, "message": self.message,
            "trace_id": self.trace_id, "span_id": self.span_id, "source": self.source, "fields": dict(self.fields),
        }


def format_time(moment: datetime) -> str:
    """ISO 8601 in UTC with microseconds and a Z: 2024-05-01T12:00:00.123456Z."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def json_safe(value: Any) -> Any:
    """`value` as JSON values: containers recursively, dates as ISO text, anything else as its str()."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(item) for item in value]
    if isinstance(value, datetime):
        return format_time(value) if value.tzinfo is not None else value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


def extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The `extra=` fields of a stdlib record, as JSON values."""
    return {name: json_safe(value) for name, value in vars(record).items()
            if name not in STANDARD_ATTRIBUTES and not name.startswith("_")}


def exception_text(record: logging.LogRecord) -> str:
    """The record's traceback (and stack), as the redaction filter left it in exc_text."""
    text = record.exc_text or ""
    if record.exc_info and not text:
        text = logging.Formatter().formatException(record.exc_info)
    if record.stack_info:
        text = f"{text}\n{record.stack_info}" if text else record.stack_info
    return text


def from_logging_record(record: logging.LogRecord, source: str, position: tuple[int, ...],
                        trace_ids: tuple[str, str] | None = None) -> LogRecord:
    """A LogRecord from a stdlib record, in the thread that emitted it (where its span is current), or
    elsewhere given the `trace_ids` taken there."""
    trace_id, span_id = trace_ids if trace_ids is not None else trace_ids_of(record)
    fields = extra_fields(record)
    exception = exception_text(record)
    if exception:
        fields["exception"] = exception
    return LogRecord(
        time=datetime.fromtimestamp(record.created, UTC), level=level_of_number(record.levelno),
        logger=record.name, message=record.getMessage(), trace_id=trace_id, span_id=span_id, source=source,
        fields=fields, position=position)
