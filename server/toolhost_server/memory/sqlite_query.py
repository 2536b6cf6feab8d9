"""memory_query on SQLite: a connection of its own that opens the store's file read-only, makes one temporary
view per structure, then runs the query under an authorizer that allows reading those views (and the columns of
memory_records they read) and calling sql_gate's functions, nothing else, and a progress handler that ends it at
its deadline. SQLite runs in the server's process, so its limits bound the server's memory too: no value longer than
MAX_VALUE_BYTES (read or made), no result wider than MAX_COLUMNS, and rows fetched one at a time until the result is
full."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from ..store.engine import sqlite_file
from .errors import QueryRefused, QueryTimedOut, QueryUnavailable
from .query import MAX_COLUMNS, MAX_VALUE_BYTES, QueryResult, ResultCollector
from .sql_gate import ALLOWED_FUNCTIONS
from .table import MemoryTable
from .views import sqlite_view

# How many SQLite virtual machine steps pass between two looks at the deadline (about a millisecond's worth).
_PROGRESS_STEPS = 10_000
_SCHEMA_TABLES = {"sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema", "sqlite_sequence",
                  "sqlite_stat1", "sqlite_stat4"}
_ALLOWED_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_RECURSIVE})


def run_sqlite_query(table: MemoryTable, statement: str, deadline: float, max_bytes: int) -> QueryResult:
    path = sqlite_file(table.store.url)
    if path is None:
        raise QueryUnavailable("memory_query needs the store in a SQLite file or PostgreSQL; this store is in "
                               "memory (set data_dir or database_url)")
    structures = table.list_structures()  # also creates and migrates the store when it is new
    views = {structure.name for structure in structures}
    connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None,
                                 check_same_thread=False)
    try:
        connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        connection.setlimit(sqlite3.SQLITE_LIMIT_COLUMN, MAX_COLUMNS)
        connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        for structure in structures:
            connection.execute(sqlite_view(structure.name, structure.columns))
        tables = {str(name).lower() for (name,) in connection.execute(
            "SELECT name FROM main.sqlite_master UNION SELECT name FROM temp.sqlite_master")}
        connection.set_authorizer(_authorizer(views, tables | _SCHEMA_TABLES))
        connection.set_progress_handler(lambda: int(time.monotonic() > deadline), _PROGRESS_STEPS)
        try:
            cursor = connection.execute(statement)
            collector = ResultCollector(tuple(column[0] for column in cursor.description or ()), max_bytes)
            # One row at a time: SQLite makes the next row only when asked, and it is dropped once the result is full.
            for row in cursor:
                if not collector.add(row):
                    break
        except sqlite3.Error as exc:
            if time.monotonic() > deadline and "interrupt" in str(exc):
                raise QueryTimedOut(
                    "the query ran past the tool's timeout and was ended; narrow it (a WHERE, a LIMIT, a "
                    "recursive CTE that stops)") from None
            raise QueryRefused(_refusal(exc)) from None
    finally:
        connection.close()
    return collector.result()


def _authorizer(views: set[str], tables: set[str]) -> Any:
    def authorize(action: int, first: str | None, second: str | None, database: str | None,
                  source_view: str | None) -> int:
        if action in _ALLOWED_ACTIONS:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_READ:
            # A view's column, or a column of memory_records that one of the views reads for it.
            if database == "temp" and first in views:
                return sqlite3.SQLITE_OK
            # No database: a common table expression's rows (its own reads are authorized one by one), but also
            # count(*) of a real table, which SQLite reports so: only a name that is no table may pass.
            if database is None and first is not None and (first in views or first.lower() not in tables):
                return sqlite3.SQLITE_OK
            if database == "main" and first == "memory_records" and source_view in views:
                return sqlite3.SQLITE_OK
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_FUNCTION and second is not None:
            name = second.lower()
            if name in ALLOWED_FUNCTIONS or (name == "json_extract" and source_view in views):
                return sqlite3.SQLITE_OK
        return sqlite3.SQLITE_DENY
    return authorize


def _refusal(exc: sqlite3.Error) -> str:
    message = str(exc)
    if "not authorized" in message or "prohibited" in message:
        return ("the query reads or does something memory_query does not allow: it may read only the memory views "
                "(memory_structure_get lists them) and call the allowed functions")
    if "one statement at a time" in message:
        return "one statement only: memory_query runs a single SELECT"
    if "too big" in message:
        return (f"a value the query reads or makes is longer than {MAX_VALUE_BYTES} bytes, the most memory_query "
                "handles: select a part of it (substr) or aggregate fewer rows")
    if "too many columns" in message:
        return f"the query has more than {MAX_COLUMNS} columns, the most memory_query handles: select fewer"
    return f"SQLite refused the query: {message}"
