"""The process that runs one memory_query on SQLite (started by sqlite_query.py, one per query): it opens the
store's file read-only, makes one temporary view per structure, and runs the query under an authorizer that allows
reading those views (and the columns of memory_records they read) and calling the allowed functions, nothing else.

SQLite has no bound on a query's temporary storage: a DISTINCT, ORDER BY or GROUP BY over a large recursive CTE
wrote gigabytes of temporary files. Here temp_store=MEMORY keeps every sorter and temporary b-tree in SQLite's heap,
and hard_heap_limit caps that heap; the limit is process-wide, which is why the query has a process of its own.
A progress handler ends the query at its deadline or after a number of virtual machine steps, and the process's
own limits (address space, file size, CPU time, death with its parent) hold if anything escapes those.

It imports only the standard library, so that it starts in tens of milliseconds. It reads one request frame on
stdin and writes frames on stdout: ("columns", names), ("row", values)..., then ("end", None) or ("error", (reason,
message)). A frame is a 4-byte big-endian length and a marshal payload; marshal carries SQLite's values (None, int,
float, str, bytes) as they are, lone surrogates included."""

from __future__ import annotations

import contextlib
import ctypes
import marshal
import os
import resource
import signal
import sqlite3
import struct
import sys
import time
from typing import IO, Any

_LENGTH = struct.Struct(">I")
# How many virtual machine steps pass between two looks at the deadline and the step budget (well under a ms).
PROGRESS_STEPS = 10_000
_SCHEMA_TABLES = {"sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema", "sqlite_sequence",
                  "sqlite_stat1", "sqlite_stat4"}
_ALLOWED_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_RECURSIVE})
_PR_SET_PDEATHSIG = 1


def write_frame(stream: IO[bytes], value: Any) -> None:
    payload = marshal.dumps(value)
    stream.write(_LENGTH.pack(len(payload)) + payload)


def read_frame(stream: IO[bytes], max_bytes: int) -> Any:
    """The next frame's value; EOFError at the end of the stream, ValueError for a frame over `max_bytes`."""
    header = stream.read(_LENGTH.size)
    if len(header) < _LENGTH.size:
        raise EOFError("the stream ended")
    (length,) = _LENGTH.unpack(header)
    if length > max_bytes:
        raise ValueError(f"a frame of {length} bytes, more than {max_bytes}")
    payload = stream.read(length)
    if len(payload) < length:
        raise EOFError("the stream ended inside a frame")
    return marshal.loads(payload)


def main() -> None:
    request: dict[str, Any] = read_frame(sys.stdin.buffer, 1 << 30)
    output = sys.stdout.buffer
    try:
        _limit_process(request)
        _answer(request, output)
    except BrokenPipeError:
        return  # the server stopped reading: the result was full, or the call is over
    except MemoryError:
        write_frame(output, ("error", ("memory", "")))
    except Exception as exc:  # any failure is reported: the server logs it
        write_frame(output, ("error", ("failed", f"{type(exc).__name__}: {exc}")))
    with contextlib.suppress(BrokenPipeError):
        output.flush()


def _limit_process(request: dict[str, Any]) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (request["address_space_bytes"],) * 2)
    # SQLite writes no file here (temp_store=MEMORY); a temporary file despite that fails at this size instead of
    # growing. Python ignores SIGXFSZ, so the write fails with EFBIG and the query with an I/O error.
    resource.setrlimit(resource.RLIMIT_FSIZE, (request["file_bytes"],) * 2)
    seconds = max(1, int(request["deadline"] - time.monotonic()) + 2)
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
    # Linux: killed when the server's thread that started it ends, so a server that dies leaves no query behind.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if request["parent"] != os.getppid():
        os._exit(1)  # the server was gone before the line above


def _answer(request: dict[str, Any], output: IO[bytes]) -> None:
    connection = sqlite3.connect(request["database"], uri=True, isolation_level=None)
    connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, request["max_value_bytes"])
    connection.setlimit(sqlite3.SQLITE_LIMIT_COLUMN, request["max_columns"])
    connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    connection.execute("PRAGMA temp_store = MEMORY")
    connection.execute(f"PRAGMA hard_heap_limit = {int(request['heap_bytes'])}")
    for view in request["views"]:
        connection.execute(view)
    tables = {str(name).lower() for (name,) in connection.execute(
        "SELECT name FROM main.sqlite_master UNION SELECT name FROM temp.sqlite_master")}
    connection.set_authorizer(_authorizer(set(request["view_names"]), tables | _SCHEMA_TABLES,
                                          frozenset(request["allowed_functions"])))
    budget = _Budget(request["deadline"], request["max_steps"])
    connection.set_progress_handler(budget.exceeded, PROGRESS_STEPS)
    try:
        cursor = connection.execute(request["statement"])
        write_frame(output, ("columns", tuple(column[0] for column in cursor.description or ())))
        # One row at a time: SQLite makes the next row only when asked, and the pipe holds back a query whose
        # rows the server no longer reads.
        for row in cursor:
            write_frame(output, ("row", tuple(row)))
    except sqlite3.Error as exc:
        if budget.ended_by and "interrupt" in str(exc):
            write_frame(output, ("error", (budget.ended_by, "")))
        else:
            write_frame(output, ("error", ("refused", str(exc))))
        return
    write_frame(output, ("end", None))


class _Budget:
    """The progress handler: ends the query (a true answer) at its deadline or after `max_steps` steps."""

    def __init__(self, deadline: float, max_steps: int) -> None:
        self.deadline = deadline
        self.calls_left = max_steps // PROGRESS_STEPS
        self.ended_by = ""

    def exceeded(self) -> int:
        self.calls_left -= 1
        if self.calls_left < 0:
            self.ended_by = "steps"
        elif time.monotonic() > self.deadline:
            self.ended_by = "deadline"
        return int(bool(self.ended_by))


def _authorizer(views: set[str], tables: set[str], functions: frozenset[str]) -> Any:
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
            if name in functions or (name == "json_extract" and source_view in views):
                return sqlite3.SQLITE_OK
        return sqlite3.SQLITE_DENY
    return authorize


if __name__ == "__main__":
    main()
