"""What a log query asks for: the caller's filter, and the window one reader is asked to fill."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from .record import LogRecord, SortKey, level_rank


@dataclass(frozen=True, slots=True)
class LogFilter:
    """Every set field must match. `min_level` keeps that level and above; `since` and `until` are inclusive;
    `text` is a case-insensitive part of the message; `source` is a reader's name (memory, file, database)."""

    min_level: str = ""
    since: datetime | None = None
    until: datetime | None = None
    text: str = ""
    trace_id: str = ""
    source: str = ""

    def admits_source(self, source: str) -> bool:
        return not self.source or self.source == source

    def admits(self, record: LogRecord) -> bool:
        if self.min_level and level_rank(record.level) < level_rank(self.min_level):
            return False
        if self.since is not None and record.time < self.since:
            return False
        if self.until is not None and record.time > self.until:
            return False
        if self.trace_id and record.trace_id != self.trace_id:
            return False
        if self.text and self.text.casefold() not in record.message.casefold():
            return False
        return self.admits_source(record.source)

    def digest(self) -> str:
        """What a page token is bound to: a token from one filter is refused for another. Not the time range:
        a token continues just before a record whatever the window, and a window given as an age ("since 1h")
        moves between two requests for consecutive pages."""
        key = [self.min_level, self.text, self.trace_id, self.source]
        return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class LogQuery:
    """What one reader is asked: up to `limit` records that pass `filter`, strictly older than `before` and
    strictly newer than `after` (sort keys, see LogRecord.sort_key), newest first."""

    filter: LogFilter = LogFilter()
    limit: int = 100
    before: SortKey | None = None
    after: SortKey | None = None

    def admits(self, record: LogRecord) -> bool:
        key = record.sort_key()
        if self.before is not None and not key < self.before:
            return False
        if self.after is not None and not key > self.after:
            return False
        return self.filter.admits(record)

    def oldest_time(self) -> datetime | None:
        """No record older than this can pass: a reader going back in time may stop there."""
        bounds = [t for t in (self.filter.since, self.after[0] if self.after else None) if t is not None]
        return max(bounds) if bounds else None

    def newest_time(self) -> datetime | None:
        """No record newer than this can pass."""
        bounds = [t for t in (self.filter.until, self.before[0] if self.before else None) if t is not None]
        return min(bounds) if bounds else None


@dataclass(frozen=True, slots=True)
class ReadResult:
    """What a reader found, newest first, and anything the caller should know about how complete it is (a file
    reader that stopped at its scan limit says so)."""

    records: Sequence[LogRecord]
    notes: tuple[str, ...] = ()
