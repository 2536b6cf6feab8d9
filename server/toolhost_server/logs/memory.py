"""The server's own recent records in a bounded ring, and the reader over it.

The ring is a handler on the root logger, one per process, behind the same redaction filter as the stderr
handler: what the ring holds has been redacted like every log line.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import deque
from datetime import datetime

from ..sanitize import LearningRedactor, RedactingLogFilter, Redactor
from .query import LogQuery, ReadResult
from .reader import LogReader
from .record import LogRecord, from_logging_record

MEMORY_SOURCE = "memory"
DEFAULT_CAPACITY = 10_000


class MemoryRingHandler(logging.Handler):
    """Keeps the last `capacity` records as LogRecords (the oldest go first); never blocks on I/O."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        super().__init__()
        self._records: deque[LogRecord] = deque(maxlen=capacity)
        self._sequence = itertools.count()
        self._ring_lock = threading.Lock()

    @property
    def capacity(self) -> int:
        return self._records.maxlen or 0

    def resize(self, capacity: int) -> None:
        """Keep `capacity` records from now on (the newest ones, when shrinking)."""
        with self._ring_lock:
            self._records = deque(self._records, maxlen=capacity)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            entry = from_logging_record(record, MEMORY_SOURCE, (next(self._sequence),))
        except Exception:
            self.handleError(record)
            return
        with self._ring_lock:
            self._records.append(entry)

    def records(self) -> list[LogRecord]:
        """A copy of the ring, oldest first."""
        with self._ring_lock:
            return list(self._records)

    def oldest_time(self) -> datetime | None:
        """The time of the oldest record still held: the ring is complete from there on."""
        with self._ring_lock:
            return self._records[0].time if self._records else None


class MemoryLogReader(LogReader):
    """Reads the ring: always available, and as recent as the last record emitted."""

    source = MEMORY_SOURCE

    def __init__(self, ring: MemoryRingHandler) -> None:
        self.ring = ring

    def read(self, query: LogQuery) -> ReadResult:
        # Threads append in the order they emit, not strictly by time: sort, it is a few thousand records.
        matching = [record for record in self.ring.records() if query.admits(record)]
        matching.sort(key=LogRecord.sort_key, reverse=True)
        return ReadResult(matching[:query.limit])


_process_ring: MemoryRingHandler | None = None
_install_lock = threading.Lock()


def install_memory_ring(
    capacity: int = DEFAULT_CAPACITY, redactor: Redactor | LearningRedactor | None = None
) -> MemoryRingHandler:
    """The process's one ring, attached to the root logger (again, after `logging.basicConfig(force=True)` took
    it off) and resized to `capacity`. It redacts with `redactor` from now on (the server's, which learns the
    credential values calls resolve), or with a plain Redactor until one is given."""
    global _process_ring
    with _install_lock:
        ring = _process_ring
        if ring is None:
            ring = _process_ring = MemoryRingHandler(capacity)
            ring.addFilter(RedactingLogFilter(redactor or Redactor()))
        elif ring.capacity != capacity:
            ring.resize(capacity)
        if redactor is not None:
            for old in [f for f in ring.filters if isinstance(f, RedactingLogFilter)]:
                ring.removeFilter(old)
            ring.addFilter(RedactingLogFilter(redactor))
        root = logging.getLogger()
        if ring not in root.handlers:
            root.addHandler(ring)
        return ring
