"""One memory_query: the text checked (sql_gate), then run the way the store's database allows (SQLite or
PostgreSQL), at most MAX_ROWS rows back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .sql_gate import checked_query
from .table import MemoryTable

MAX_ROWS = 1000


@dataclass(frozen=True, slots=True)
class QueryResult:
    """The columns and rows of a query; `truncated` when it had more than MAX_ROWS rows."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    truncated: bool


def run_memory_query(table: MemoryTable, sql: str, deadline: float) -> QueryResult:
    """Run one read-only SELECT over the memory views, ended at `deadline` (time.monotonic()); QueryRefused,
    QueryTimedOut or QueryUnavailable else."""
    statement = checked_query(sql)
    if table.store.dialect == "postgresql":
        from .postgres_query import run_postgres_query

        return run_postgres_query(table, statement, deadline, MAX_ROWS)
    from .sqlite_query import run_sqlite_query

    return run_sqlite_query(table, statement, deadline, MAX_ROWS)
