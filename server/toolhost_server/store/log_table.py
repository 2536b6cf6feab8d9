"""The logs table: log records written in batches (toolhost_server.logs.database) and read back by query."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, false, func, insert, not_, or_, select, true

from ..logs.database import DATABASE_SOURCE
from ..logs.query import LogQuery
from ..logs.record import LogRecord, SortKey, level_rank
from .database import Store, batch_errors_reported
from .schema import logs


class LogTable:
    """Appends records and answers log queries. Blocking: callers run it in a thread."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def append(self, records: Sequence[LogRecord], instance: str) -> None:
        """Store `records`, written by the process `instance`."""
        if not records:
            return
        rows = [{
            "time": record.time.astimezone(UTC), "level": record.level, "level_number": level_rank(record.level),
            "logger": _storable(record.logger[:256]), "message": _storable(record.message),
            "trace_id": record.trace_id[:32], "span_id": record.span_id[:16], "instance": instance[:128],
            "fields": dict(record.fields),
        } for record in records]
        with batch_errors_reported(), self.store.begin() as connection:
            connection.execute(insert(logs), rows)

    def read(self, query: LogQuery, *, skip_instance: str = "", skip_from: datetime | None = None) -> list[LogRecord]:
        """Up to `query.limit` records that pass `query`, newest first. Rows that `skip_instance` wrote at or
        after `skip_from` are left out (the server's memory ring holds those)."""
        conditions = _conditions(query)
        if skip_instance and skip_from is not None:
            conditions.append(not_(and_(logs.c.instance == skip_instance, logs.c.time >= skip_from.astimezone(UTC))))
        statement = (select(logs).where(*conditions).order_by(logs.c.time.desc(), logs.c.id.desc())
                     .limit(query.limit))
        with self.store.begin() as connection:
            rows = connection.execute(statement).mappings().all()
        return [_record(row) for row in rows]


def _storable(text: str) -> str:
    """PostgreSQL text holds no NUL character: a log message may (a tool logs what it read); it is written
    as the escape \\x00 rather than losing the record."""
    return text.replace("\x00", "\\x00") if "\x00" in text else text


def _conditions(query: LogQuery) -> list[ColumnElement[bool]]:
    log_filter = query.filter
    conditions: list[ColumnElement[bool]] = []
    if log_filter.min_level:
        conditions.append(logs.c.level_number >= level_rank(log_filter.min_level))
    if log_filter.since is not None:
        conditions.append(logs.c.time >= log_filter.since.astimezone(UTC))
    if log_filter.until is not None:
        conditions.append(logs.c.time <= log_filter.until.astimezone(UTC))
    if log_filter.trace_id:
        conditions.append(logs.c.trace_id == log_filter.trace_id)
    if log_filter.text:
        conditions.append(func.lower(logs.c.message).contains(log_filter.text.lower(), autoescape=True))
    if query.before is not None:
        conditions.append(_beyond(query.before, older=True))
    if query.after is not None:
        conditions.append(_beyond(query.after, older=False))
    return conditions


def _beyond(key: SortKey, *, older: bool) -> ColumnElement[bool]:
    """Rows whose sort key (time, "database", (id,)) is below `key` (older) or above it (newer)."""
    moment, source, position = key
    moment = moment.astimezone(UTC)
    strictly = logs.c.time < moment if older else logs.c.time > moment
    if source != DATABASE_SOURCE:
        # The same time with another source: the source name decides, as in LogRecord.sort_key.
        same_time_wins = (source > DATABASE_SOURCE) == older
        return or_(strictly, logs.c.time == moment) if same_time_wins else strictly
    if not position:
        tie: ColumnElement[bool] = true() if older else false()
    else:
        tie = logs.c.id < position[0] if older else logs.c.id > position[0]
    return or_(strictly, and_(logs.c.time == moment, tie))


def _record(row: Any) -> LogRecord:
    moment: datetime = row["time"]
    # SQLite keeps no time zone: the times written were UTC.
    moment = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return LogRecord(
        time=moment, level=row["level"], logger=row["logger"], message=row["message"], trace_id=row["trace_id"],
        span_id=row["span_id"], source=DATABASE_SOURCE, fields={**(row["fields"] or {}), "instance": row["instance"]},
        position=(row["id"],))
