"""Security review finding 3, second half (issue 16): a value PostgreSQL refuses made it refuse the whole batched
INSERT, so other callers' audit and log records were lost. Against a real PostgreSQL: a refused row loses only
itself, and a NUL in a log message is stored escaped rather than refused."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

from toolhost_server.audit import AuditRecord, AuditTrail
from toolhost_server.config import Config
from toolhost_server.logs.database import DatabaseLogHandler
from toolhost_server.logs.query import LogFilter, LogQuery
from toolhost_server.sanitize import Redactor
from toolhost_server.store.audit_table import AuditTable
from toolhost_server.store.database import Store
from toolhost_server.store.log_table import LogTable


def record(index: int, auth_method: str = "token") -> AuditRecord:
    return AuditRecord(time=datetime.now(UTC), caller="agent", auth_method=auth_method, tool="echo",
                       call_id=f"batch-{index}", trace_id="ab" * 16, duration_ms=1.0, outcome="OK",
                       argument_keys=("text",))


async def test_an_audit_row_postgresql_refuses_loses_only_itself(postgres_url, tmp_path):
    store = Store.from_config(Config(database_url=postgres_url.render_as_string(hide_password=False),
                                     data_dir=tmp_path))
    table = AuditTable(store)
    trail = AuditTrail(table.append, batch_size=100, flush_seconds=3600)
    trail.start()
    try:
        for index in range(20):
            # auth_method is a varchar(32): one value PostgreSQL refuses, in the middle of the batch.
            trail.record(record(index, auth_method="x" * 40 if index == 7 else "token"))
        await trail.close()
        stored = await asyncio.to_thread(table.latest, 100)
    finally:
        store.close()
    assert sorted(r.call_id for r in stored) == sorted(f"batch-{i}" for i in range(20) if i != 7)
    assert trail.failed == 1


async def test_a_nul_in_a_log_message_is_stored_escaped_with_the_records_around_it(postgres_url, tmp_path):
    store = Store.from_config(Config(database_url=postgres_url.render_as_string(hide_password=False),
                                     data_dir=tmp_path))
    table = LogTable(store)
    handler = DatabaseLogHandler(table, Redactor(), batch_size=100, flush_seconds=3600)
    handler.start()
    log = logging.getLogger("toolhost.test.nul")  # the handler is on the root logger, where start() puts it
    log.setLevel(logging.INFO)
    try:
        for index in range(5):
            log.info("nul-check %d%s", index, " read \x00 from a file" if index == 2 else "")
        await handler.close_async()
        stored = await asyncio.to_thread(table.read, LogQuery(LogFilter(text="nul-check")))
    finally:
        store.close()
    messages = sorted(r.message for r in stored)
    assert messages == ["nul-check 0", "nul-check 1", "nul-check 2 read \\x00 from a file", "nul-check 3",
                        "nul-check 4"]
    assert handler.writer.failed == 0

