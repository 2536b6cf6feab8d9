"""The reading process of database_schema, which the server starts for one call (database_schema_process) and
kills at the call's deadline: a database that stops answering blocks a thread of this process, never one of the
server's, and a schema built to fill memory meets this process's limits, not the server's.

It reads one JSON request from stdin (the databases' URLs with their passwords come through this pipe, never argv
nor the environment, which /proc shows to anyone who may read the process's files), caps its memory, reads every
database in a thread of its own, and writes to stdout one JSON line per database as soon as it is read, plus a
line per log message (with the database's secrets removed). When its deadline passes first, it says so and ends.

    {"source": NAME, "result": {"entry": ..., ...}}     one per database, as database_reading.SourceResult
    {"log": "database_schema: reading the schema of ..."}
    {"expired": true}                                 the rest did not finish in time
"""

from __future__ import annotations

import json
import logging
import os
import resource
import sqlite3
import sys
import threading
import time
from typing import IO, Any

from sqlalchemy import make_url

from .database_failures import TOO_LARGE
from .database_reading import ReadLimits, failed_result, read_source
from .database_sources import DatabaseSource
from .statement_clock import StatementClock


class _Lines:
    """Whole JSON lines on stdout, one writer at a time (each database's thread, the log, the main thread)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def write(self, line: dict[str, Any]) -> None:
        data = json.dumps(line, ensure_ascii=False).encode("utf-8", "replace") + b"\n"
        with self._lock:
            self._stream.write(data)
            self._stream.flush()


class _LogLines(logging.Handler):
    def __init__(self, lines: _Lines) -> None:
        super().__init__(logging.INFO)
        self._lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self._lines.write({"log": record.getMessage()})


def cap_memory(address_space_bytes: int, sqlite_heap_bytes: int) -> None:
    """At most `address_space_bytes` of address space for the whole process (an allocation beyond fails with
    MemoryError, or SQLite's "out of memory", in the thread that asked), and at most `sqlite_heap_bytes` of it
    for SQLite, which parses a file's whole schema when it opens it."""
    resource.setrlimit(resource.RLIMIT_AS, (address_space_bytes, address_space_bytes))
    # Process-wide: set once, through any connection.
    sqlite3.connect(":memory:").execute(f"PRAGMA hard_heap_limit = {int(sqlite_heap_bytes)}").close()


def _source(data: dict[str, Any]) -> DatabaseSource:
    url = data["url"]
    return DatabaseSource(str(data["name"]), make_url(url) if url is not None else None, str(data["problem"]))


def main() -> None:
    request = json.loads(sys.stdin.buffer.read())
    cap_memory(int(request["address_space_bytes"]), int(request["sqlite_heap_bytes"]))
    # libpq's own settings of the server (PGSSLMODE, PGPASSFILE, even PGPASSWORD), as the server would have used
    # them: set now, they are not in what /proc/PID/environ shows, which is the environment the process began with.
    os.environ.update({str(key): str(value) for key, value in request["libpq_environment"].items()})
    lines = _Lines(sys.stdout.buffer)
    logger = logging.getLogger("toolhost.database_schema.reading")
    logger.propagate = False
    logger.addHandler(_LogLines(lines))
    limits = ReadLimits(**request["limits"])
    deadline = float(request["deadline"])  # time.monotonic() of the server: the same clock in every process
    table = request["table"]
    row_counts = bool(request["row_counts"])

    def read(source: DatabaseSource) -> None:
        clock = StatementClock(deadline - time.monotonic(), limits.statement_seconds)
        try:
            result = read_source(source, table, row_counts, clock, limits, logger)
            lines.write({"source": source.name, "result": result.as_json()})
        except MemoryError:  # writing the answer (read_source's own failures are entries already)
            lines.write({"source": source.name, "result": failed_result(source, TOO_LARGE).as_json()})

    threads = [threading.Thread(target=read, args=(_source(data),), name=f"read-{data['name']}", daemon=True)
               for data in request["sources"]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    if any(thread.is_alive() for thread in threads):
        lines.write({"expired": True})
    # os._exit: a thread blocked in a read that never ends would hold an ordinary exit.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
