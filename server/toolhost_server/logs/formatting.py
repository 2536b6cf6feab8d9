"""How the server writes its log lines: one JSON object per line for collectors, or a human line for a terminal.

    {"time": "2024-05-01T12:00:00.123456Z", "level": "INFO", "logger": "toolhost.audit", "message": "call ...",
     "trace_id": "4bf92f...", "span_id": "00f067...", "audit": {...}}
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from typing import TextIO

from .record import STANDARD_ATTRIBUTES, exception_text, extra_fields, json_safe, level_of_number
from .trace_context import trace_ids_of

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LOG_FORMATS = ("json", "text")
# The keys every JSON line has; an extra field of the same name cannot replace one of them.
CORE_KEYS = ("time", "level", "logger", "message", "trace_id", "span_id")
# Built once: json.dumps with options builds an encoder per call. ensure_ascii off keeps non-English messages
# readable; a newline in a message is escaped either way. json handles the plain values of nearly every record
# itself and calls json_safe for the rest (dates, sets): cheaper than walking every extra field first.
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=json_safe)
_FALLBACK_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)


class _SecondsText:
    """A record time as 2024-05-01T12:00:00.123456Z, its date and time of day formatted once per second (a
    busy server writes hundreds of lines a second; formatting a datetime each time cost a tenth of a line)."""

    __slots__ = ("_cached",)

    def __init__(self) -> None:
        self._cached = (-1, "")

    def format(self, created: float) -> str:
        # Rounded as datetime.fromtimestamp rounds, so that the ring's record of a line shows the same time.
        second = math.floor(created)
        micros = round((created - second) * 1_000_000)
        if micros == 1_000_000:
            second, micros = second + 1, 0
        cached = self._cached  # one tuple, read and replaced whole: threads format lines concurrently
        if cached[0] != second:
            cached = self._cached = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
        return f"{cached[1]}.{micros:06d}Z"


class JsonLogFormatter(logging.Formatter):
    """One JSON object per record: the core keys, `exception` when there is a traceback, then the record's
    `extra=` fields (an audit record's `audit` dict, for example). Run the redaction filter first: it leaves
    the redacted traceback in exc_text, which this formatter uses."""

    def __init__(self) -> None:
        super().__init__()
        self._time = _SecondsText()

    def format(self, record: logging.LogRecord) -> str:
        trace_id, span_id = trace_ids_of(record)
        entry: dict[str, object] = {
            "time": self._time.format(record.created),
            "level": level_of_number(record.levelno),
            "logger": record.name,
            "message": record.getMessage(),
            "trace_id": trace_id,
            "span_id": span_id,
        }
        exception = exception_text(record)
        if exception:
            entry["exception"] = exception
        # A set difference finds the few extra fields without a walk over every attribute in Python.
        attributes = vars(record)
        extras = {name for name in attributes.keys() - STANDARD_ATTRIBUTES if not name.startswith("_")}
        if extras:
            # In the order the record has them; never in place of a core key or the exception.
            extras = {name for name in attributes if name in extras and name not in entry}
            entry.update((name, attributes[name]) for name in attributes if name in extras)
        try:
            return _ENCODER.encode(entry)
        except (TypeError, ValueError):
            # Keys json refuses (a tuple, say): the walk turns them into text.
            entry.update((name, value) for name, value in extra_fields(record).items() if name in extras)
            return _FALLBACK_ENCODER.encode(entry)


def default_log_format(stream: TextIO | None = None) -> str:
    """text on a terminal, where a person reads; json elsewhere, where a collector does."""
    target = stream if stream is not None else sys.stderr
    try:
        return "text" if target.isatty() else "json"
    except ValueError:  # a closed stream
        return "json"


def make_formatter(log_format: str) -> logging.Formatter:
    """The formatter for "json" or "text" ("" picks by whether stderr is a terminal)."""
    chosen = log_format or default_log_format()
    if chosen == "json":
        return JsonLogFormatter()
    if chosen == "text":
        return logging.Formatter(TEXT_FORMAT)
    raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, not {log_format!r}")
