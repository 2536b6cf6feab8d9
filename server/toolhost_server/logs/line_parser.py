"""Turns one line of a log file into a record: JSON objects by their usual keys, other lines through a regular
expression with named groups (time, level, logger, message, trace_id, span_id; any other group is a field).

Any program may have written the line, so a record holds only what every surface can carry (protobuf for
QueryLogs and TailLogs, strict JSON for log_inspector and `toolhost logs --json`): text without lone surrogates
(JSON escapes can spell them; each becomes U+FFFD), fields nested at most MAX_FIELD_DEPTH levels (deeper values
become their JSON text), numbers a double holds (larger ones, NaN and the infinities become text). A line nested
too deeply for the JSON reader at all is no JSON record; it is read as text like any other line.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .record import normalize_level

# The server's own text format (formatting.TEXT_FORMAT): "2024-05-01 12:00:00,123 INFO toolhost: message".
DEFAULT_LINE_PATTERN = (
    r"^(?P<time>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\s+"
    r"(?P<level>[A-Za-z]+)\s+(?P<logger>[^\s:]+):\s?(?P<message>.*)$"
)
REQUIRED_GROUPS = ("time", "message")

_TIME_KEYS = ("time", "timestamp", "@timestamp", "ts", "asctime", "datetime")
_LEVEL_KEYS = ("level", "levelname", "severity", "lvl", "log.level")
_LOGGER_KEYS = ("logger", "name", "logger_name", "log.logger")
_MESSAGE_KEYS = ("message", "msg", "event")
_TRACE_KEYS = ("trace_id", "traceId", "trace.id", "otelTraceID")
_SPAN_KEYS = ("span_id", "spanId", "span.id", "otelSpanID")
# Epoch numbers above this are milliseconds (1e11 seconds is the year 5138).
_MILLISECONDS_FROM = 1e11
# A google.protobuf.Struct nests at most 100 levels, with two per level of JSON; the python runner's outputs
# stop at 32 as well.
MAX_FIELD_DEPTH = 32
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class ParsedLine:
    """The parts of a record one line gave; the file reader adds source, position and the file's name."""

    time: datetime
    level: str
    logger: str
    message: str
    trace_id: str = ""
    span_id: str = ""
    fields: dict[str, Any] = field(default_factory=dict)


def compile_line_pattern(pattern: str) -> re.Pattern[str]:
    """The compiled pattern; ValueError when it does not compile or lacks a required named group."""
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"is not a regular expression: {exc}") from None
    missing = [name for name in REQUIRED_GROUPS if name not in compiled.groupindex]
    if missing:
        raise ValueError(f"needs the named groups {', '.join(f'(?P<{m}>...)' for m in missing)}")
    return compiled


def parse_time(value: Any) -> datetime | None:
    """A UTC time from ISO 8601 text (without a zone: local time) or epoch seconds/milliseconds; else None."""
    if isinstance(value, bool):
        return None
    try:
        if isinstance(value, int | float):
            seconds = value / 1000 if value > _MILLISECONDS_FROM else value
            return datetime.fromtimestamp(seconds, UTC)
        if isinstance(value, str):
            moment = datetime.fromisoformat(value.strip())
            return moment.astimezone(UTC)
    except (ValueError, OverflowError, OSError):
        return None
    return None


class LineParser:
    """Parses JSON lines and, through `pattern`, text lines. A line it cannot parse (no time found) gives None:
    the file reader then treats it as a continuation of the record before it, such as a traceback's lines."""

    def __init__(self, pattern: str = DEFAULT_LINE_PATTERN) -> None:
        self._pattern = compile_line_pattern(pattern)

    def parse(self, line: str) -> ParsedLine | None:
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except (ValueError, RecursionError):
                data = None
            if isinstance(data, dict):
                return _from_object(data)
        match = self._pattern.match(line)
        return _from_groups(match.groupdict()) if match else None


def _take(data: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if key in data:
            return data.pop(key)
    return None


def _from_object(data: dict[str, Any]) -> ParsedLine | None:
    data = dict(data)
    moment = parse_time(_take(data, _TIME_KEYS))
    if moment is None:
        return None
    level, logger, message = _take(data, _LEVEL_KEYS), _take(data, _LOGGER_KEYS), _take(data, _MESSAGE_KEYS)
    trace_id, span_id = _take(data, _TRACE_KEYS), _take(data, _SPAN_KEYS)
    return ParsedLine(
        time=moment, level=normalize_level(_text(level or "INFO")), logger=_text(logger or ""),
        message=_text(message if message is not None else ""), trace_id=_text(trace_id or ""),
        span_id=_text(span_id or ""), fields={_text(k): _field(v, 1) for k, v in data.items()})


def _text(value: Any) -> str:
    """A value read from JSON as text: a string with any lone surrogate replaced, anything else as JSON."""
    text = value if isinstance(value, str) else _json_text(value)
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (RecursionError, ValueError):
        return "(a value nested too deeply to show)"


def _field(value: Any, depth: int) -> Any:
    """A JSON value as a record field may hold it (see the module docstring)."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        try:
            float(value)
        except OverflowError:
            return str(value)
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else json.dumps(value)  # as proto3 JSON spells them: NaN, Infinity
    if depth > MAX_FIELD_DEPTH:
        return _text(value)
    if isinstance(value, dict):
        return {_text(k): _field(v, depth + 1) for k, v in value.items()}
    return [_field(item, depth + 1) for item in value]


def _from_groups(groups: dict[str, str | None]) -> ParsedLine | None:
    moment = parse_time(groups.pop("time", None))
    if moment is None:
        return None
    text = {name: groups.pop(name, None) or "" for name in ("level", "logger", "message", "trace_id", "span_id")}
    return ParsedLine(
        time=moment, level=normalize_level(text["level"] or "INFO"), logger=text["logger"],
        message=text["message"], trace_id=text["trace_id"], span_id=text["span_id"],
        fields={name: value for name, value in groups.items() if value is not None})
