"""The databases the database_schema tool reads, and the reading: every database in a thread of a small pool of
its own, each bounded in time, one's failure an entry of its own while the others still answer."""

from __future__ import annotations

import asyncio
import difflib
import json
import logging
import sqlite3
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection

from ..config import Config
from .database_failures import log_failure, safe_message
from .database_row_counts import count_rows
from .database_schema_reader import MAX_TABLES, TableListing, TableName, describe_tables, list_tables
from .database_sources import DatabaseSource, read_only_connection, sources_from_config
from .statement_clock import StatementClock

# A dead host answers within this; a closed port at once.
CONNECT_TIMEOUT_SECONDS = 5.0
# Each row count (and on PostgreSQL each catalog query) stops after this long.
STATEMENT_TIMEOUT_SECONDS = 5.0
# Reading databases blocks: it runs in these threads, not in asyncio's default pool (name resolution, other
# tools). More databases than threads wait their turn, within the call's time.
WORKER_THREADS = 4
# Of the output limit (max_output_bytes), what the tables may take: the rest is the envelope and the notes.
_OUTPUT_SHARE = 0.85
# A table is measured as the PRETTY format writes it (indent 2), the largest rendering a caller may ask for, at
# its depth in the answer: databases[i].tables[j] starts 8 spaces in.
_TABLE_INDENT = 8


class UnknownNameError(Exception):
    """A database or table the call names does not exist; the message lists close names."""


@dataclass(frozen=True, slots=True)
class SchemaRequest:
    database: str | None = None
    table: str | None = None
    row_counts: bool = False


@dataclass
class _SourceResult:
    entry: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    failed: bool = False
    # With a `table` in the request: whether this database has it, and its table names close to it.
    has_table: bool = True
    close_tables: list[str] = field(default_factory=list)


class DatabaseSchemas:
    """The store and the configured databases (Config.databases), read on request::

        schemas = DatabaseSchemas.from_config(config)
        result = await schemas.describe(SchemaRequest(database="store"), 30.0, logger, 1024 * 1024)
        schemas.close()
    """

    def __init__(self, sources: Sequence[DatabaseSource], threads: int = WORKER_THREADS) -> None:
        self.sources = tuple(sources)
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="database-schema")

    @classmethod
    def from_config(cls, config: Config) -> DatabaseSchemas:
        return cls(sources_from_config(config))

    def names(self) -> list[str]:
        return [source.name for source in self.sources]

    def close(self) -> None:
        """Drop readings that have not started; those running end at their own timeouts."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def describe(self, request: SchemaRequest, seconds: float, logger: logging.Logger,
                       max_output_bytes: int) -> dict[str, Any]:
        """The `databases` entries and their `summary`, read within `seconds` and kept under `max_output_bytes`
        of JSON. UnknownNameError when the request names a database or table that does not exist."""
        sources = self._chosen(request.database)
        loop = asyncio.get_running_loop()
        results = await asyncio.gather(*(
            loop.run_in_executor(self._executor, _read_source, source, request,
                                 StatementClock(seconds, STATEMENT_TIMEOUT_SECONDS), logger)
            for source in sources))
        notes = [note for result in results for note in result.notes]
        if request.table is not None:
            results = _with_table(results, request.table, notes)
        entries = [result.entry for result in results]
        _keep_under(entries, int(max_output_bytes * _OUTPUT_SHARE), notes)
        described = [entry for entry in entries if "error" not in entry]
        return {
            "databases": entries,
            "summary": {
                "databases": len(entries),
                "failed": sum(1 for result in results if result.failed),
                "tables": sum(len(entry["tables"]) for entry in described),
                "tables_total": sum(entry["table_count"] for entry in described),
                "notes": notes,
            },
        }

    def _chosen(self, database: str | None) -> tuple[DatabaseSource, ...]:
        if database is None:
            return self.sources
        for source in self.sources:
            if source.name == database:
                return (source,)
        raise UnknownNameError(f"no database named {database!r}; {_choices(database, self.names())}")


def _read_source(source: DatabaseSource, request: SchemaRequest, clock: StatementClock,
                 logger: logging.Logger) -> _SourceResult:
    try:
        with read_only_connection(source, clock, CONNECT_TIMEOUT_SECONDS) as connection:
            return _read(connection, source, request, clock, logger)
    except Exception as exc:  # any failure of one database is its entry's error, never the whole call's
        log_failure(logger, source, "reading the schema", exc)
        return _SourceResult({"name": source.name, "dialect": source.dialect, "url": source.safe_url,
                              "error": safe_message(exc, source)},
                             [f"{source.name}: {safe_message(exc, source)}"], failed=True)


def _read(connection: Connection, source: DatabaseSource, request: SchemaRequest, clock: StatementClock,
          logger: logging.Logger) -> _SourceResult:
    listing = list_tables(connection)
    notes: list[str] = []
    if request.table is not None:
        chosen = listing.matching(request.table)
        if not chosen:
            return _SourceResult({}, has_table=False, close_tables=listing.close_to(request.table))
    else:
        chosen = listing.names[:MAX_TABLES]
        if len(listing.names) > MAX_TABLES:
            notes.append(f"{source.name}: {len(listing.names)} tables, the first {MAX_TABLES} are described; "
                         f"name one with table=NAME ({_rest(listing, MAX_TABLES)})")
    described = describe_tables(connection, chosen)
    notes.extend(f"{source.name}: {note}" for note in described.notes)
    if request.row_counts:
        def report(table: TableName, exc: BaseException) -> None:
            log_failure(logger, source, f"counting the rows of {table.label}", exc)
        counts = count_rows(connection, chosen, clock, report)
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
             "server_version": _server_version(connection), "table_count": len(listing.names),
             "tables": described.tables}
    return _SourceResult(entry, notes)


def _server_version(connection: Connection) -> str:
    if connection.dialect.name == "sqlite":
        return sqlite3.sqlite_version
    version = connection.dialect.server_version_info or ()
    return ".".join(str(part) for part in version)


def _rest(listing: TableListing, shown: int) -> str:
    rest = listing.names[shown:]
    named = ", ".join(table.label for table in rest[:5])
    return f"not described: {named}" + (f" and {len(rest) - 5} more" if len(rest) > 5 else "")


def _with_table(results: list[_SourceResult], table: str, notes: list[str]) -> list[_SourceResult]:
    """The databases that have `table`, and those that failed (which might). UnknownNameError when every database
    answered and none has it."""
    kept = [result for result in results if result.failed or result.has_table]
    if any(not result.failed for result in kept):
        return kept
    close = sorted({name for result in results for name in result.close_tables})
    if not kept:
        suggestion = f"close names: {', '.join(close)}" if close else "call without `table` to list the tables"
        raise UnknownNameError(f"no table named {table!r}; {suggestion}")
    notes.append(f"no database that answered has a table named {table!r}")
    return kept


def _keep_under(entries: list[dict[str, Any]], budget: int, notes: list[str]) -> None:
    """Drop the last tables so that all of them fit in `budget` bytes of pretty JSON, saying how many went."""
    used = 0
    for entry in entries:
        tables = entry.get("tables")
        if not tables:
            continue
        for index, table in enumerate(tables):
            pretty = json.dumps(table, ensure_ascii=False, sort_keys=True, indent=2)
            used += len(pretty.encode("utf-8")) + _TABLE_INDENT * (pretty.count("\n") + 1)
            if used > budget:
                left_out = len(tables) - index
                del tables[index:]
                notes.append(f"{entry['name']}: {left_out} tables left out to keep the output under its limit; "
                             "name one with database= and table=, or raise max_output_bytes")
                used = budget + 1  # everything after this one is left out too
                break


def _choices(wanted: str, names: list[str]) -> str:
    if len(names) <= 10:
        return "the databases are: " + ", ".join(names)
    close = difflib.get_close_matches(wanted, names, n=5)
    return f"close names: {', '.join(close)}" if close else "call without `database` to list them"
