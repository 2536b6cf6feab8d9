"""Log domain objects <-> toolhost.v1 log messages."""

from __future__ import annotations

from datetime import UTC, datetime

from google.protobuf.timestamp_pb2 import Timestamp

from toolhost.v1 import log_service_pb2

from ..logs.inspector import LogPage
from ..logs.query import LogFilter
from ..logs.record import LEVELS, LogRecord
from .convert import to_struct

_LEVELS_BY_NAME = {
    "DEBUG": log_service_pb2.LOG_LEVEL_DEBUG,
    "INFO": log_service_pb2.LOG_LEVEL_INFO,
    "WARNING": log_service_pb2.LOG_LEVEL_WARNING,
    "ERROR": log_service_pb2.LOG_LEVEL_ERROR,
    "CRITICAL": log_service_pb2.LOG_LEVEL_CRITICAL,
}
_NAMES_BY_LEVEL = {value: name for name, value in _LEVELS_BY_NAME.items()}
assert set(_LEVELS_BY_NAME) == set(LEVELS)


def log_filter(message: log_service_pb2.LogFilter) -> LogFilter:
    return LogFilter(
        # An unknown enum number (a newer client) counts as no minimum rather than failing the request.
        min_level=_NAMES_BY_LEVEL.get(message.min_level, ""),
        since=_time(message.since) if message.HasField("since") else None,
        until=_time(message.until) if message.HasField("until") else None,
        text=message.text,
        trace_id=message.trace_id,
        source=message.source,
    )


def _time(message: Timestamp) -> datetime:
    return message.ToDatetime(tzinfo=UTC)


def log_record_message(record: LogRecord) -> log_service_pb2.LogRecord:
    message = log_service_pb2.LogRecord(
        level=_LEVELS_BY_NAME.get(record.level, log_service_pb2.LOG_LEVEL_INFO), logger=record.logger,
        message=record.message, trace_id=record.trace_id, span_id=record.span_id, source=record.source,
        fields=to_struct(record.fields))
    message.time.FromDatetime(record.time)
    return message


def query_logs_response(page: LogPage) -> log_service_pb2.QueryLogsResponse:
    summary = page.summary
    return log_service_pb2.QueryLogsResponse(
        records=[log_record_message(record) for record in page.records],
        next_page_token=page.next_page_token,
        summary=log_service_pb2.LogSummary(
            level_counts=summary.level_counts, source_counts=summary.source_counts, sources=summary.sources,
            unavailable_readers=[log_service_pb2.UnavailableLogReader(source=source, reason=reason)
                                 for source, reason in summary.unavailable.items()],
            notes=summary.notes),
    )
