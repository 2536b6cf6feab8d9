"""The LogReader contract: one place logs can be read from (the server's memory, files, a database)."""

from __future__ import annotations

from abc import ABC, abstractmethod

from .query import LogQuery, ReadResult


class LogReaderError(Exception):
    """A reader cannot answer now; the message says why, for the inspector's summary."""


class LogReader(ABC):
    """A source of log records that the inspector queries alongside the others.

    `read` is blocking (the inspector calls it in a worker thread) and returns at most `query.limit` records
    that `query.admits`, newest first, each with `source` set to the reader's `source`. A reader that cannot
    answer raises LogReaderError, or says so beforehand through `unavailable_reason`::

        class JournalLogReader(LogReader):
            source = "journal"

            def unavailable_reason(self) -> str | None:
                return None if shutil.which("journalctl") else "journalctl is not installed"

            def read(self, query: LogQuery) -> ReadResult:
                records = [r for r in self._newest_first() if query.admits(r)]
                return ReadResult(records[:query.limit])
    """

    source: str

    @abstractmethod
    def read(self, query: LogQuery) -> ReadResult:
        """Up to `query.limit` matching records, newest first."""

    def unavailable_reason(self) -> str | None:
        """Why the reader cannot be read now, or None when it can."""
        return None

    def is_available(self) -> bool:
        return self.unavailable_reason() is None

    def close(self) -> None:  # noqa: B027  - optional: a reader that holds nothing open has nothing to do
        """Release what the reader holds open (files, connections)."""
