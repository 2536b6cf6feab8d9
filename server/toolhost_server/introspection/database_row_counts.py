"""Row counts of a database's tables: count(*) under a per-statement timeout, or the planner's estimate when it
says a table holds more than ESTIMATE_ABOVE_ROWS rows (counting those would scan for too long).

Each count says how it was made (`row_count_kind`): "exact", "estimate" (PostgreSQL's pg_class.reltuples, or
SQLite's sqlite_stat1 written by ANALYZE), "timed_out" (the count did not finish in its time), or
"unavailable" (the database refused it, for example no SELECT right; the server log says why).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import sqlalchemy.exc
from sqlalchemy import Connection, func, select, table, text

from .database_failures import is_timeout
from .database_schema_reader import TableName
from .statement_clock import StatementClock

# Above this many rows by the planner's estimate a table is not counted: its estimate is shown instead.
ESTIMATE_ABOVE_ROWS = 1_000_000
_INTERRUPT_REPEAT_SECONDS = 0.01


@dataclass(frozen=True, slots=True)
class RowCount:
    rows: int | None
    kind: str  # "exact" | "estimate" | "timed_out" | "unavailable"


def count_rows(connection: Connection, tables: Sequence[TableName], clock: StatementClock,
               on_failure: Callable[[TableName, BaseException], None],
               estimate_above: int = ESTIMATE_ABOVE_ROWS) -> dict[TableName, RowCount]:
    """A RowCount for each of `tables`, the planner's estimate where it says more than `estimate_above` rows. A
    count that fails is reported to `on_failure` and is "unavailable"; once the clock has run out, the remaining
    tables are "timed_out" without a statement."""
    try:
        estimates = _estimates(connection, tables)
    except sqlalchemy.exc.DBAPIError as exc:
        if not is_timeout(exc):
            raise
        estimates = {}  # the catalog is locked too: each count then waits its own time, and says so
    counts: dict[TableName, RowCount] = {}
    for name in tables:
        estimate = estimates.get(name)
        if estimate is not None and estimate > estimate_above:
            counts[name] = RowCount(estimate, "estimate")
        elif clock.expired():
            counts[name] = RowCount(None, "timed_out")
        else:
            counts[name] = _exact(connection, name, clock, on_failure)
    return counts


def _exact(connection: Connection, name: TableName, clock: StatementClock,
           on_failure: Callable[[TableName, BaseException], None]) -> RowCount:
    statement = select(func.count()).select_from(table(name.name, schema=name.schema))
    seconds = clock.start_statement()
    try:
        if connection.dialect.name == "postgresql":
            # A savepoint: a count stopped by its timeout aborts only itself, not the transaction the rest of the
            # reading runs in. (SQLite's progress handler stops the statement alone.)
            with connection.begin_nested():
                milliseconds = max(1, int(seconds * 1000))
                connection.exec_driver_sql(f"SET LOCAL statement_timeout = {milliseconds}")
                connection.exec_driver_sql(f"SET LOCAL lock_timeout = {milliseconds}")
                rows = connection.scalar(statement)
        else:
            with sqlite_interrupted_after(connection, seconds):
                rows = connection.scalar(statement)
        return RowCount(int(rows or 0), "exact")
    except sqlalchemy.exc.DBAPIError as exc:
        if is_timeout(exc):
            return RowCount(None, "timed_out")
        on_failure(name, exc)
        return RowCount(None, "unavailable")
    finally:
        clock.end_statement()


@contextmanager
def sqlite_interrupted_after(connection: Connection, seconds: float) -> Iterator[None]:
    """Interrupt SQLite's statement once `seconds` have passed. Its count(*) walks the table's b-tree without
    calling the progress handler, so only sqlite3_interrupt stops it; the interrupt is repeated until the statement
    ends, since one that lands before the statement has started does nothing."""
    raw = connection.connection.dbapi_connection
    done = threading.Event()

    def watch() -> None:
        if done.wait(seconds):
            return
        while not done.is_set():
            raw.interrupt()  # type: ignore[union-attr]
            done.wait(_INTERRUPT_REPEAT_SECONDS)

    watcher = threading.Thread(target=watch, name="database-schema-interrupt", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def _estimates(connection: Connection, tables: Sequence[TableName]) -> dict[TableName, int]:
    """What the planner believes each table holds, where it has a belief: tables never analyzed are missing."""
    if not tables:
        return {}
    if connection.dialect.name == "postgresql":
        rows = connection.execute(text(
            "SELECT n.nspname, c.relname, c.reltuples FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind IN ('r', 'p', 'm', 'f') AND n.nspname = ANY(:schemas) AND c.relname = ANY(:names)"),
            {"schemas": sorted({t.schema or "" for t in tables}), "names": sorted({t.name for t in tables})})
        # reltuples is -1 for a table never vacuumed nor analyzed (PostgreSQL 14 and later).
        return {TableName(schema, name): int(tuples) for schema, name, tuples in rows if tuples >= 0}
    return _sqlite_stat1(connection)


def _sqlite_stat1(connection: Connection) -> dict[TableName, int]:
    exists = connection.exec_driver_sql(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_stat1'").first()
    if exists is None:
        return {}
    estimates: dict[TableName, int] = {}
    for table_name, stat in connection.exec_driver_sql("SELECT tbl, stat FROM sqlite_stat1"):
        # The first number of each row is the rows of the table (or of one of its indexes: a partial index holds
        # fewer, hence the largest).
        first = str(stat or "").split(" ", 1)[0]
        if first.isdigit():
            key = TableName(None, str(table_name))
            estimates[key] = max(estimates.get(key, 0), int(first))
    return estimates

