"""The audit_records table: the database side of the audit trail (toolhost_server.audit), written in batches."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import insert, select

from ..audit import AuditRecord
from .database import Store, batch_errors_reported
from .schema import audit_records


class AuditTable:
    """Appends audit records and reads the latest back. Blocking: the audit trail calls it in a thread."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def append(self, records: Sequence[AuditRecord]) -> None:
        if not records:
            return
        rows = [{**record.as_dict(), "time": record.time} for record in records]
        with batch_errors_reported(), self.store.begin() as connection:
            connection.execute(insert(audit_records), rows)

    def latest(self, limit: int = 100) -> list[AuditRecord]:
        """The `limit` most recent records, newest first."""
        query = select(audit_records).order_by(audit_records.c.time.desc(), audit_records.c.id.desc()).limit(limit)
        with self.store.begin() as connection:
            rows = connection.execute(query).mappings().all()
        return [AuditRecord(
            time=_utc(row["time"]), caller=row["caller"], auth_method=row["auth_method"], tool=row["tool"],
            call_id=row["call_id"], trace_id=row["trace_id"], duration_ms=row["duration_ms"], outcome=row["outcome"],
            argument_keys=tuple(row["argument_keys"]), argument_key_count=row["argument_key_count"],
            client_trace_id=row["client_trace_id"]) for row in rows]


def _utc(moment: datetime) -> datetime:
    # SQLite keeps no time zone: the times written were UTC.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
