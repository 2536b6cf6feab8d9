"""The server's own recent records in a bounded ring, and the reader over it.

The ring is a handler on the root logger, one per process, behind the same redaction filter as the stderr
handler: what the ring holds has been redacted like every log line. It is bounded twice: by a number of records
(log_memory_records) and by their estimated size in bytes (log_memory_bytes), so that a few huge records cannot
hold more memory than many small ones; the oldest records go first when either bound is reached.
"""

from __future__ import annotations

import itertools
import logging
import sys
import threading
from collections import deque
from datetime import UTC, datetime

from ..sanitize import LearningRedactor, RedactingLogFilter, Redactor
from .query import LogQuery, ReadResult
from .reader import LogReader
from .record import EXTRAS_FINAL, STANDARD_ATTRIBUTES, LogRecord, from_logging_record, level_of_number
from .trace_context import trace_ids_of

MEMORY_SOURCE = "memory"
DEFAULT_CAPACITY = 10_000
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
# What a held record costs besides its text and fields: the record object, its time, level, names and position
# (460 to 760 bytes measured for a short message, converted or not).
RECORD_OVERHEAD_BYTES = 512


_SCALARS = (str, int, float, bool, type(None))


class _Held:
    """A ring entry: the stdlib record until someone reads the ring, then the LogRecord made from it.

    Converting costs more than the rest of a log line and most lines are never read (the ring turns over every
    few thousand calls), so it waits for the first read. What the conversion needs from the emitting thread,
    the current span's ids, is taken at once.
    """

    __slots__ = ("converted", "position", "size", "span_id", "stdlib", "trace_id")

    def __init__(self, stdlib: logging.LogRecord, position: tuple[int, ...]) -> None:
        self.stdlib: logging.LogRecord | None = stdlib
        self.trace_id, self.span_id = trace_ids_of(stdlib)
        self.position = position
        self.converted: LogRecord | None = None
        self.size = 0  # estimated bytes, set by the ring when the entry is complete

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
    """Keeps the newest records as LogRecords, at most `capacity` of them and about `max_bytes` (estimated when
    each arrives: its text and fields plus RECORD_OVERHEAD_BYTES); the oldest go first. Never blocks on I/O.

    A record larger than `max_bytes` on its own is not kept: keeping it would push every other record out (one
    huge log line would empty the inspector's view of what just happened) and still break the bound. A short
    notice with its time, level, logger and trace takes its place; the server's other destinations (stderr, the
    database) get the record itself.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        super().__init__()
        self._records: deque[_Held] = deque()
        self._capacity = capacity
        self._max_bytes = max_bytes
        self._held_bytes = 0
        self._sequence = itertools.count()
        self._ring_lock = threading.Lock()

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def max_bytes(self) -> int:
        return self._max_bytes

    @property
    def held_bytes(self) -> int:
        """The estimated size of the records held, at most `max_bytes`."""
        return self._held_bytes

    def resize(self, capacity: int, max_bytes: int | None = None) -> None:
        """Keep `capacity` records and `max_bytes` (unchanged when None) from now on: the newest, when shrinking."""
        with self._ring_lock:
            self._capacity = capacity
            if max_bytes is not None:
                self._max_bytes = max_bytes
            self._drop_beyond_bounds()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            entry = _Held(record, (next(self._sequence),))
            if _holds_nothing_else(record):
                entry.size = _stdlib_record_bytes(record)
            else:
                entry.size = _log_record_bytes(entry.record())
            if entry.size > self._max_bytes:
                _replace_with_notice(entry, record)
                if entry.size > self._max_bytes:  # a bound smaller than the notice itself: nothing is kept
                    return
        except Exception:
            self.handleError(record)
            return
        with self._ring_lock:
            self._records.append(entry)
            self._held_bytes += entry.size
            self._drop_beyond_bounds()

    def _drop_beyond_bounds(self) -> None:
        records = self._records
        while len(records) > self._capacity or self._held_bytes > self._max_bytes:
            self._held_bytes -= records.popleft().size

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


def _stdlib_record_bytes(record: logging.LogRecord) -> int:
    """The estimated size of a record kept unconverted: its message and arguments (what its text will be made
    of) and its extra fields."""
    attributes = vars(record)
    size = RECORD_OVERHEAD_BYTES + estimated_bytes(record.msg) + estimated_bytes(record.args)
    for name in attributes.keys() - STANDARD_ATTRIBUTES:
        if not name.startswith("_"):
            size += estimated_bytes(attributes[name])
    return size


def _log_record_bytes(record: LogRecord) -> int:
    return RECORD_OVERHEAD_BYTES + estimated_bytes(record.message) + estimated_bytes(record.fields)


# Rough CPython sizes: an object's header, a str's (plus a byte a character, four when not ASCII), a number's, and
# a container's slot per item (a dict's entry holds a hash, a key and a value).
_OBJECT_BYTES = 56
_NUMBER_BYTES = 32
_SEQUENCE_SLOT_BYTES = 8
_DICT_SLOT_BYTES = 24


def estimated_bytes(value: object) -> int:
    """About the memory `value` holds, with what its dicts, lists and tuples hold: from types and lengths only, so
    that it stays cheap for every record that arrives. Recursive, like the conversion of fields (json_safe): the
    values it meets are JSON-like, written by the server's own code or already converted."""
    # `type(value) is`, cheaper than isinstance: a subclass of these (rare in log records) is counted shallowly.
    if type(value) is str:
        return _OBJECT_BYTES + (len(value) if value.isascii() else 4 * len(value))
    if type(value) is dict:
        return (_OBJECT_BYTES + _DICT_SLOT_BYTES * len(value) + sum(map(estimated_bytes, value.keys()))
                + sum(map(estimated_bytes, value.values())))
    if type(value) is list or type(value) is tuple:
        return _OBJECT_BYTES + _SEQUENCE_SLOT_BYTES * len(value) + sum(map(estimated_bytes, value))
    if value is None or type(value) is int or type(value) is float or type(value) is bool:
        return _NUMBER_BYTES
    return sys.getsizeof(value)


def _replace_with_notice(entry: _Held, record: logging.LogRecord) -> None:
    """Make `entry`, not yet in the ring, the notice kept for a record over the byte bound: when, where and how
    large, nothing of its content."""
    entry.stdlib = None
    entry.converted = LogRecord(
        time=datetime.fromtimestamp(record.created, UTC), level=level_of_number(record.levelno),
        logger=record.name, message=f"a record of about {entry.size} bytes was not kept in memory: it is larger "
        "than log_memory_bytes on its own (stderr and the other log destinations have it)",
        trace_id=entry.trace_id, span_id=entry.span_id, source=MEMORY_SOURCE,
        fields={"dropped_record_bytes": entry.size}, position=entry.position)
    entry.size = _log_record_bytes(entry.converted)


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
    capacity: int = DEFAULT_CAPACITY, redactor: Redactor | LearningRedactor | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> MemoryRingHandler:
    """The process's one ring, attached to the root logger (again, after `logging.basicConfig(force=True)` took
    it off) and resized to `capacity` records and `max_bytes`. It redacts with `redactor` from now on (the
    server's, which learns the credential values calls resolve), or with a plain Redactor until one is given."""
    global _process_ring
    with _install_lock:
        ring = _process_ring
        if ring is None:
            ring = _process_ring = MemoryRingHandler(capacity, max_bytes)
            ring.addFilter(RedactingLogFilter(redactor or Redactor()))
        elif (ring.capacity, ring.max_bytes) != (capacity, max_bytes):
            ring.resize(capacity, max_bytes)
        if redactor is not None:
            for old in [f for f in ring.filters if isinstance(f, RedactingLogFilter)]:
                ring.removeFilter(old)
            ring.addFilter(RedactingLogFilter(redactor))
        root = logging.getLogger()
        if ring not in root.handlers:
            root.addHandler(ring)
        return ring
