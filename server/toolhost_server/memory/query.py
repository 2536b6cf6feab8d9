"""One memory_query: the text checked (sql_gate), then run the way the store's database allows (SQLite or
PostgreSQL), its rows taken one batch at a time into a ResultCollector until MAX_ROWS or the result's byte budget,
so that what the server holds for a query is bounded by that budget and one row (MAX_COLUMNS values of at most
MAX_VALUE_BYTES each), however many rows the query could make."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from .errors import QueryRefused
from .sql_gate import checked_query
from .structures import MAX_RECORD_BYTES
from .table import MemoryTable

MAX_ROWS = 1000
# The longest value a query may read or make: every stored record fits (its JSON is at most MAX_RECORD_BYTES), and
# a value the query builds (group_concat, string_agg) fails the query past it instead of growing.
MAX_VALUE_BYTES = MAX_RECORD_BYTES
# The widest result (and, on SQLite, table or view) a query may have: a structure's view has at most 203 columns.
MAX_COLUMNS = 256


@dataclass(frozen=True, slots=True)
class QueryResult:
    """The columns and rows (as JSON values) of a query; `truncated` when rows were left out, `note` says why."""

    columns: tuple[str, ...]
    rows: tuple[list[Any], ...]
    truncated: bool
    note: str = ""


def run_memory_query(table: MemoryTable, sql: str, deadline: float, max_bytes: int) -> QueryResult:
    """Run one read-only SELECT over the memory views, ended at `deadline` (time.monotonic()), its rows kept to
    MAX_ROWS and to `max_bytes` of JSON; QueryRefused, QueryTimedOut or QueryUnavailable else."""
    statement = checked_query(sql)
    if table.store.dialect == "postgresql":
        from .postgres_query import run_postgres_query

        return run_postgres_query(table, statement, deadline, max_bytes)
    from .sqlite_query import run_sqlite_query

    return run_sqlite_query(table, statement, deadline, max_bytes)


class ResultCollector:
    """The rows of a query as the database hands them over, each turned into JSON values and counted at its JSON
    size; `add` says False once the result is full (MAX_ROWS, or the next row would pass `max_bytes`):

        collector = ResultCollector(columns, max_bytes)
        for row in cursor:
            if not collector.add(row):
                break
        result = collector.result()
    """

    def __init__(self, columns: tuple[str, ...], max_bytes: int) -> None:
        if len(columns) > MAX_COLUMNS:
            raise QueryRefused(f"the query has {len(columns)} columns; memory_query returns at most {MAX_COLUMNS}: "
                               "select the columns you need")
        self.columns = columns
        self.max_bytes = max_bytes
        self._rows: list[list[Any]] = []
        self._spent = _json_bytes(list(columns))
        if self._spent > max_bytes:
            raise QueryRefused(f"the query's column names alone take {self._spent} bytes of the {max_bytes} a "
                               "result may hold: name long expressions shorter with AS")
        self._note = ""

    def add(self, row: tuple[Any, ...] | list[Any]) -> bool:
        if self._note:
            return False
        if len(self._rows) == MAX_ROWS:
            self._note = f"cut at {MAX_ROWS} rows: the query had more; narrow it or add a LIMIT"
            return False
        values = [json_value(value) for value in row]
        size = _json_bytes(values) + 2  # the separator, in the text and in the structured rows
        if self._spent + size > self.max_bytes:
            self._note = (f"cut after {len(self._rows)} rows: the next row ({size} bytes as JSON) would pass the "
                          f"{self.max_bytes} bytes a result may hold (the server's max_output_bytes); select fewer "
                          "or shorter columns (substr), or narrow the query")
            return False
        self._spent += size
        self._rows.append(values)
        return True

    def result(self) -> QueryResult:
        return QueryResult(self.columns, tuple(self._rows), bool(self._note), self._note)


def json_value(value: Any) -> Any:
    """A database value as JSON: numbers stay numbers, times ISO 8601, durations (PostgreSQL's interval, from the
    allowed age()) seconds, bytes base64, arrays lists, and any other type PostgreSQL hands over (uuid, inet,
    ranges) its text."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (list, tuple)):
        return [json_value(item) for item in value]
    if isinstance(value, dict):
        return {str(key): json_value(item) for key, item in value.items()}
    return str(value)


def _json_bytes(value: Any) -> int:
    # surrogatepass: a lone surrogate counts as the 3 bytes it is sent as once the pipeline replaces it.
    return len(json.dumps(value, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass"))
