"""The databases the database_schema tool reads, and the reading: all the databases of one call in a reading
process of their own (database_schema_process), killed at the call's deadline; one database's failure or silence
is an entry of its own while the others still answer. At most READERS calls read at once: another is refused
as busy (RESOURCE_EXHAUSTED) at once rather than queued."""

from __future__ import annotations

import asyncio
import difflib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..config import Config
from ..errors import OverCapacityError
from . import database_row_counts
from .database_reading import ReadLimits, SourceResult, cut_tables, failed_result, left_out_note
from .database_schema_process import Reading, ReadingOutcome, read_in_child
from .database_schema_reader import MAX_TABLES
from .database_sources import DatabaseSource, sources_from_config

# A dead host answers within this; a closed port at once.
CONNECT_TIMEOUT_SECONDS = 5.0
# Each row count (and on PostgreSQL each catalog query) stops after this long.
STATEMENT_TIMEOUT_SECONDS = 5.0
# Calls that may read at once, each in a process of its own of at most 512 MiB (database_schema_process).
READERS = 4
# Of the output limit (max_output_bytes), what the tables may take: the rest is the envelope and the notes.
_OUTPUT_SHARE = 0.85


class UnknownNameError(Exception):
    """A database or table the call names does not exist; the message lists close names."""


@dataclass(frozen=True, slots=True)
class SchemaRequest:
    database: str | None = None
    table: str | None = None
    row_counts: bool = False


class DatabaseSchemas:
    """The store and the configured databases (Config.databases), read on request::

        schemas = DatabaseSchemas.from_config(config)
        result = await schemas.describe(SchemaRequest(database="store"), 30.0, logger, 1024 * 1024)
        schemas.close()
    """

    def __init__(self, sources: Sequence[DatabaseSource], readers: int = READERS) -> None:
        self.sources = tuple(sources)
        self._readers = readers
        self._reading = 0
        self._processes: set[asyncio.subprocess.Process] = set()

    @classmethod
    def from_config(cls, config: Config) -> DatabaseSchemas:
        return cls(sources_from_config(config))

    def names(self) -> list[str]:
        return [source.name for source in self.sources]

    def close(self) -> None:
        """Kill the reading processes still running: their calls answer with what was read."""
        for process in list(self._processes):
            if process.returncode is None:
                process.kill()

    async def describe(self, request: SchemaRequest, seconds: float, logger: logging.Logger,
                       max_output_bytes: int) -> dict[str, Any]:
        """The `databases` entries and their `summary`, read within `seconds` and kept under `max_output_bytes`
        of JSON. UnknownNameError when the request names a database or table that does not exist;
        OverCapacityError when READERS calls are reading already."""
        sources = self._chosen(request.database)
        if self._reading >= self._readers:
            raise OverCapacityError(
                f"database_schema is already reading databases for {self._readers} calls, the most it may at once "
                "(a database that does not answer holds its call until the call's deadline); retry in a moment, "
                "or name one database with database=NAME")
        budget = int(max_output_bytes * _OUTPUT_SHARE)
        reading = Reading(sources, request.table, request.row_counts,
                          ReadLimits(max_tables=MAX_TABLES, statement_seconds=STATEMENT_TIMEOUT_SECONDS,
                                     connect_seconds=CONNECT_TIMEOUT_SECONDS,
                                     estimate_above_rows=database_row_counts.ESTIMATE_ABOVE_ROWS,
                                     output_bytes=budget),
                          time.monotonic() + seconds)
        self._reading += 1
        try:
            outcome = await read_in_child(reading, logger, self._processes)
        finally:
            self._reading -= 1
        results = [outcome.results.get(source.name) or _unanswered(source, outcome, seconds) for source in sources]
        notes = [note for result in results for note in result.notes]
        if request.table is not None:
            results = _with_table(results, request.table, notes)
        entries = [result.entry for result in results]
        dropped = cut_tables(entries, budget)
        for result, more in zip(results, dropped, strict=True):
            if result.left_out + more:
                notes.append(left_out_note(result.entry["name"], result.left_out + more))
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


def _unanswered(source: DatabaseSource, outcome: ReadingOutcome, seconds: float) -> SourceResult:
    """The entry of a database the reading process did not answer for."""
    if outcome.expired:
        return failed_result(source, f"timed out: no answer within the call's {seconds:.3g} s; the database may be "
                                     "hung or overloaded: try again, or read it alone with database=NAME")
    return failed_result(source, "the reading ended before this database was read (it ran out of memory, or "
                                 "failed); the server log has the detail")


def _with_table(results: list[SourceResult], table: str, notes: list[str]) -> list[SourceResult]:
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


def _choices(wanted: str, names: list[str]) -> str:
    if len(names) <= 10:
        return "the databases are: " + ", ".join(names)
    close = difflib.get_close_matches(wanted, names, n=5)
    return f"close names: {', '.join(close)}" if close else "call without `database` to list them"
