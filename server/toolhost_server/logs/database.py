"""The store's logs table as a log destination (a batched handler) and as a LogReader.

The handler never waits for the database: records are converted where they are emitted (where their span is
current) and queued; a BatchWriter stores them in a worker thread, as the audit trail does.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from ..batching import BatchWriter
from ..sanitize import LearningRedactor, RedactingLogFilter, Redactor
from .query import LogQuery, ReadResult
from .reader import LogReader, LogReaderError
from .record import LogRecord, from_logging_record

if TYPE_CHECKING:
    from ..store.log_table import LogTable

DATABASE_SOURCE = "database"
# The writer's own complaints (the database is down) must not be queued for the database again.
WRITER_LOGGER_NAME = "toolhost.logs.database"
writer_logger = logging.getLogger(WRITER_LOGGER_NAME)

# Names this process in the rows it writes: replicas share a database, and a server reads its own recent
# records from its memory ring instead (see DatabaseLogReader).
INSTANCE = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class DatabaseLogHandler(logging.Handler):
    """Writes the records it handles to the logs table, in batches, off the emitting thread.

    `start()` on the event loop before use (it attaches the handler to the root logger), `close_async()` to
    detach it and write what is still waiting.
    """

    def __init__(
        self,
        table: LogTable,
        redactor: Redactor | LearningRedactor,
        *,
        batch_size: int = 500,
        flush_seconds: float = 1.0,
        max_waiting: int = 50_000,
    ) -> None:
        super().__init__()
        self.table = table
        self.addFilter(RedactingLogFilter(redactor))
        self.writer: BatchWriter[LogRecord] = BatchWriter(
            self._store, what="log records", logger=writer_logger, batch_size=batch_size,
            flush_seconds=flush_seconds, max_waiting=max_waiting)

    def _store(self, records: Sequence[LogRecord]) -> None:
        self.table.append(records, INSTANCE)

    def start(self) -> None:
        self.writer.start()
        logging.getLogger().addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == WRITER_LOGGER_NAME or record.name.startswith(WRITER_LOGGER_NAME + "."):
            return
        try:
            self.writer.add(from_logging_record(record, DATABASE_SOURCE, ()))
        except Exception:
            self.handleError(record)

    async def close_async(self) -> None:
        logging.getLogger().removeHandler(self)
        await self.writer.close()
        self.close()


class DatabaseLogReader(LogReader):
    """Reads the logs table. `own_records_from` says since when this process's records are in its memory
    ring (None: none are); those rows are left out, so the inspector shows each record once."""

    source = DATABASE_SOURCE

    def __init__(self, table: LogTable, own_records_from: Callable[[], datetime | None] | None = None) -> None:
        self.table = table
        self._own_records_from = own_records_from

    def read(self, query: LogQuery) -> ReadResult:
        from ..store.errors import StoreError

        skip_from = self._own_records_from() if self._own_records_from is not None else None
        try:
            return ReadResult(self.table.read(query, skip_instance=INSTANCE, skip_from=skip_from))
        except StoreError as exc:
            raise LogReaderError(str(exc)) from None

    def close(self) -> None:
        self.table.store.close()
