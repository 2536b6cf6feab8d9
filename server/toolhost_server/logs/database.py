"""The store's logs table as a log destination (a batched handler) and as a LogReader.

The handler never waits for the database: records are converted where they are emitted (where their span is
current) and queued; a BatchWriter stores them in a worker thread, as the audit trail does, keeping them while
the database is down within store_buffer_bytes.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..batching import DEFAULT_MAX_WAITING_BYTES, BatchWriter
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


# The record object with its datetime and position tuple, besides its text and fields. An audit line's record
# held 0.9 KiB measured with tracemalloc, and is estimated at 1.8 KiB: the estimate errs high (it counts the
# field names, which records share, each time).
_RECORD_OVERHEAD_BYTES = 256
_CONTAINER_SLOT_BYTES = 8


def estimated_size(record: LogRecord) -> int:
    """Roughly the memory `record` holds, in bytes: what store_buffer_bytes counts."""
    texts = (record.logger, record.message, record.trace_id, record.span_id)
    return _RECORD_OVERHEAD_BYTES + sum(map(sys.getsizeof, texts)) + _value_size(record.fields)


def _value_size(value: Any) -> int:
    # Fields are JSON values (json_safe made them): containers are walked, the rest measured as they are. This
    # runs for every record logged: leaves are measured in the loops, without a call each, and exact types are
    # tested before the (slow) isinstance of an ABC.
    size = sys.getsizeof(value)
    kind = type(value)
    if kind is dict or (kind not in _LEAF_TYPES and isinstance(value, Mapping)):
        for key, item in value.items():
            size += sys.getsizeof(key) + _CONTAINER_SLOT_BYTES + (
                sys.getsizeof(item) if type(item) in _LEAF_TYPES else _value_size(item))
    elif kind is list or kind is tuple:
        for item in value:
            size += sys.getsizeof(item) if type(item) in _LEAF_TYPES else _value_size(item)
    return size


_LEAF_TYPES = frozenset({str, int, float, bool, type(None)})


class DatabaseLogHandler(logging.Handler):
    """Writes the records it handles to the logs table, in batches, off the emitting thread.

    `start()` on the event loop before use (it attaches the handler to the root logger), `close_async()` to
    detach it and write what is still waiting. While the database is down, up to `max_waiting_bytes` of records
    wait for it (see BatchWriter).
    """

    def __init__(
        self,
        table: LogTable,
        redactor: Redactor | LearningRedactor,
        *,
        batch_size: int = 500,
        flush_seconds: float = 1.0,
        max_waiting_bytes: int = DEFAULT_MAX_WAITING_BYTES,
        retry_seconds: float = 0.5,
    ) -> None:
        super().__init__()
        self.table = table
        self.addFilter(RedactingLogFilter(redactor))
        self.writer: BatchWriter[LogRecord] = BatchWriter(
            self._store, what="log records", logger=writer_logger, size_of=estimated_size,
            max_waiting_bytes=max_waiting_bytes, batch_size=batch_size, flush_seconds=flush_seconds,
            retry_seconds=retry_seconds)

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
