"""Reading one database for database_schema: its tables within the limits of a call, as an entry of the answer, or
an entry with `error` when it cannot be read. This runs in the reading process (database_schema_child), never in
the server: a database that stops answering, or a schema built to fill memory, takes that process down, not the
server."""

from __future__ import annotations

import json
import logging
import sqlite3
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import Connection

from .database_failures import log_failure, safe_message
from .database_row_counts import count_rows
from .database_schema_reader import (
    TableListing,
    TableName,
    close_table_names,
    describe_tables,
    find_tables,
    list_tables,
)
from .database_sources import DatabaseSource, read_only_connection
from .statement_clock import StatementClock

# A table is measured as the PRETTY format writes it (indent 2), the largest rendering a caller may ask for, at
# its depth in the answer: databases[i].tables[j] starts 8 spaces in.
_TABLE_INDENT = 8
# Tables named in the note that says the rest were not described.
_NAMED_REST = 5


@dataclass(frozen=True, slots=True)
class ReadLimits:
    """What one reading may take, as the server sets it for each call."""

    max_tables: int
    statement_seconds: float
    connect_seconds: float
    estimate_above_rows: int
    # Bytes of pretty JSON the tables of one database may take: the server cuts again across databases.
    output_bytes: int


@dataclass
class SourceResult:
    """One database's part of the answer: its entry, the notes about it, and with a `table` in the request whether
    it has that table (and the names close to it that it has)."""

    entry: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    failed: bool = False
    has_table: bool = True
    close_tables: list[str] = field(default_factory=list)
    # Tables described and then dropped to keep the answer under its limit (said in a note once, by the server).
    left_out: int = 0

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SourceResult:
        return cls(entry=dict(data["entry"]), notes=[str(note) for note in data["notes"]],
                   failed=bool(data["failed"]), has_table=bool(data["has_table"]),
                   close_tables=[str(name) for name in data["close_tables"]], left_out=int(data["left_out"]))


def failed_result(source: DatabaseSource, message: str) -> SourceResult:
    """The entry of a database that could not be read: `message` is shown to the caller, so it must be safe."""
    return SourceResult({"name": source.name, "dialect": source.dialect, "url": source.safe_url, "error": message},
                        [f"{source.name}: {message}"], failed=True)


def read_source(source: DatabaseSource, table: str | None, row_counts: bool, clock: StatementClock,
                limits: ReadLimits, logger: logging.Logger) -> SourceResult:
    """`source`'s tables (all, or those `table` names), or its failure as an entry: never raises."""
    try:
        with read_only_connection(source, clock, limits.connect_seconds) as connection:
            result = _read(connection, source, table, row_counts, clock, limits, logger)
    except Exception as exc:  # any failure of one database is its entry's error, never the whole call's
        log_failure(logger, source, "reading the schema", exc)
        return failed_result(source, safe_message(exc, source))
    [result.left_out] = cut_tables([result.entry], limits.output_bytes)
    return result


def _read(connection: Connection, source: DatabaseSource, table: str | None, row_counts: bool,
          clock: StatementClock, limits: ReadLimits, logger: logging.Logger) -> SourceResult:
    # The first tables and a few more, to name some of those not described; the others are only counted.
    listing = list_tables(connection, limits.max_tables + _NAMED_REST)
    notes: list[str] = []
    if table is not None:
        chosen = find_tables(connection, table)
        if not chosen:
            return SourceResult({}, has_table=False, close_tables=close_table_names(connection, table))
    else:
        chosen = listing.names[:limits.max_tables]
        if listing.total > limits.max_tables:
            notes.append(f"{source.name}: {listing.total} tables, the first {limits.max_tables} are described; "
                         f"name one with table=NAME ({_rest(listing, limits.max_tables)})")
    described = describe_tables(connection, chosen)
    notes.extend(f"{source.name}: {note}" for note in described.notes)
    if row_counts:
        def report(name: TableName, exc: BaseException) -> None:
            log_failure(logger, source, f"counting the rows of {name.label}", exc)
        counts = count_rows(connection, chosen, clock, report, limits.estimate_above_rows)
        for name, entry in zip(chosen, described.tables, strict=True):
            entry["row_count"] = counts[name].rows
            entry["row_count_kind"] = counts[name].kind
        timed_out = sum(1 for count in counts.values() if count.kind == "timed_out")
        if timed_out:
            notes.append(f"{source.name}: {timed_out} row counts did not finish in their time (timed_out); "
                         "count one table at a time with table=NAME")
        if any(count.kind == "unavailable" for count in counts.values()):
            notes.append(f"{source.name}: some tables could not be counted (unavailable); the server log says why")
    entry = {"name": source.name, "dialect": source.dialect, "url": source.safe_url,
             "server_version": _server_version(connection), "table_count": listing.total,
             "tables": described.tables}
    return SourceResult(entry, notes)


def _server_version(connection: Connection) -> str:
    if connection.dialect.name == "sqlite":
        return sqlite3.sqlite_version
    version = connection.dialect.server_version_info or ()
    return ".".join(str(part) for part in version)


def _rest(listing: TableListing, shown: int) -> str:
    rest = listing.names[shown:]
    named = ", ".join(table.label for table in rest)
    more = listing.total - shown - len(rest)
    return f"not described: {named}" + (f" and {more} more" if more > 0 else "")


def cut_tables(entries: list[dict[str, Any]], budget: int) -> list[int]:
    """Drop the last tables so that all of them fit in `budget` bytes of pretty JSON: how many went, by entry."""
    used = 0
    dropped = [0] * len(entries)
    for position, entry in enumerate(entries):
        tables = entry.get("tables")
        if not tables:
            continue
        if used > budget:  # an earlier database took the whole budget
            dropped[position] = len(tables)
            del tables[:]
            continue
        for index, table in enumerate(tables):
            pretty = json.dumps(table, ensure_ascii=False, sort_keys=True, indent=2)
            used += len(pretty.encode("utf-8")) + _TABLE_INDENT * (pretty.count("\n") + 1)
            if used > budget:
                dropped[position] = len(tables) - index
                del tables[index:]
                break
    return dropped


def left_out_note(name: str, count: int) -> str:
    return (f"{name}: {count} tables left out to keep the output under its limit; name one with database= and "
            "table=, or raise max_output_bytes")
