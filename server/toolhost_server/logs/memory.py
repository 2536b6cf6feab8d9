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
from .record import EXTRAS_FINAL, STANDARD_ATTRIBUTES, LogRecord, from_logging_record
from .trace_context import trace_ids_of

MEMORY_SOURCE = "memory"
DEFAULT_CAPACITY = 10_000


_SCALARS = (str, int, float, bool, type(None))


class _Held:
    """A ring entry: the stdlib record until someone reads the ring, then the LogRecord made from it.

    Converting costs more than the rest of a log line and most lines are never read (the ring turns over every
    few thousand calls), so it waits for the first read. What the conversion needs from the emitting thread,
    the current span's ids, is taken at once.
    """

    __slots__ = ("converted", "position", "span_id", "stdlib", "trace_id")

    def __init__(self, stdlib: logging.LogRecord, position: tuple[int, ...]) -> None:
        self.stdlib: logging.LogRecord | None = stdlib
        self.trace_id, self.span_id = trace_ids_of(stdlib)
        self.position = position
        self.converted: LogRecord | None = None

    def record(self) -> LogRecord:
        converted = self.converted
        if converted is None:
            stdlib = self.stdlib
            if stdlib is None:  # another reader converted it meanwhile (it sets `converted` first)
                assert self.converted is not None
                return self.converted
            converted = self.converted = from_logging_record(stdlib, MEMORY_SOURCE, self.position,
                                                             (self.trace_id, self.span_id))
            self.stdlib = None
        return converted


def _holds_nothing_else(record: logging.LogRecord) -> bool:
    """Whether keeping `record` keeps nothing alive but itself, and nothing that could change before it is read
    (what the ring shows must be what was redacted): no traceback (its frames hold every local of the failing
    code), a message that is a str, arguments and extra fields that are plain values (or extras marked final)."""
    args = record.args
    if record.exc_info is not None or type(record.msg) is not str:
        return False
    if args and not (isinstance(args, tuple) and all(isinstance(arg, _SCALARS) for arg in args)):
        return False
    attributes = vars(record)
    return bool(attributes.get(EXTRAS_FINAL)) or all(
        isinstance(attributes[name], _SCALARS) for name in attributes.keys() - STANDARD_ATTRIBUTES
        if not name.startswith("_"))


class MemoryRingHandler(logging.Handler):
    """Keeps the last `capacity` records as LogRecords (the oldest go first); never blocks on I/O."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        super().__init__()
        self._records: deque[_Held] = deque(maxlen=capacity)
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
            entry = _Held(record, (next(self._sequence),))
            if not _holds_nothing_else(record):
                entry.record()
        except Exception:
            self.handleError(record)
            return
        with self._ring_lock:
            self._records.append(entry)

    def records(self) -> list[LogRecord]:
        """A copy of the ring, oldest first."""
        with self._ring_lock:
            held = list(self._records)
        # Converted outside the lock: the first read of a full ring converts thousands of records, and every
        # log line waits for the lock meanwhile. Two readers converting one entry at once make the same record.
        return [entry.record() for entry in held]

    def oldest_time(self) -> datetime | None:
        """The time of the oldest record still held: the ring is complete from there on."""
        with self._ring_lock:
            return self._records[0].record().time if self._records else None


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
