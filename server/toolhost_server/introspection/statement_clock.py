"""The time one database_schema call may spend on a database, and each statement's share of it."""

from __future__ import annotations

import time


class StatementClock:
    """A deadline for the whole reading of one database, and a shorter one per statement (a row count): a slow
    count stops at its own limit and the others still run, and nothing runs past the call's time.

    SQLite has no statement timeout: its connection calls `sqlite_should_stop` every few thousand steps (a
    progress handler), which interrupts the statement once the current deadline has passed.
    """

    def __init__(self, total_seconds: float, statement_seconds: float) -> None:
        self._deadline = time.monotonic() + total_seconds
        self.statement_seconds = statement_seconds
        self._current = self._deadline

    def remaining(self) -> float:
        return max(0.0, self._deadline - time.monotonic())

    def expired(self) -> bool:
        return self.remaining() <= 0

    def start_statement(self) -> float:
        """Start one bounded statement: its time in seconds (the per-statement limit, or what remains)."""
        budget = min(self.statement_seconds, self.remaining())
        self._current = time.monotonic() + budget
        return budget

    def end_statement(self) -> None:
        """Back to the whole call's deadline (reading the catalog: many small statements)."""
        self._current = self._deadline

    def sqlite_should_stop(self) -> int:
        return 1 if time.monotonic() > self._current else 0
