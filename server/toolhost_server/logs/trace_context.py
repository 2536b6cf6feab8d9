"""The trace and span ids a log record belongs to: those it was given, else the span current where it was
emitted (telemetry's current_trace_ids)."""

from __future__ import annotations

import logging

from ..telemetry import current_trace_ids

# Where a record keeps the current span's ids once looked up: every handler of the record asks for them.
_CURRENT_IDS = "_current_trace_ids"


def trace_ids_of(record: logging.LogRecord) -> tuple[str, str]:
    """The ids a record was given (`extra={"trace_id": ...}`, a forwarded record), else the current span's.

    Call it in the thread that emitted the record: handlers and formatters run there, the span is current.
    """
    given_trace, given_span = getattr(record, "trace_id", None), getattr(record, "span_id", None)
    if isinstance(given_trace, str) and given_trace:
        return given_trace, given_span if isinstance(given_span, str) else ""
    ids: tuple[str, str] | None = getattr(record, _CURRENT_IDS, None)
    if ids is None:
        ids = current_trace_ids()
        setattr(record, _CURRENT_IDS, ids)
    return ids
