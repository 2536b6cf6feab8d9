"""memory_query on SQLite: the query runs in a process of its own (sqlite_worker.py), started with this server's
interpreter, which opens the store's file read-only under an authorizer that allows reading the memory views and
calling sql_gate's functions, nothing else. Its rows come back one frame at a time into a ResultCollector; once the
result is full, or at the deadline, the process is killed.

A process rather than a connection in the server: SQLite bounds a query's temporary storage only through its heap
limit, which is process-wide, so a query in the server could either write gigabytes of temporary files (the
issue 20 review: 3.2 GB in 24 s from one DISTINCT) or starve the server's other SQLite connections. The process
keeps all of it in memory, at most HEAP_BYTES, and does at most MAX_STEPS steps; no value longer than
MAX_VALUE_BYTES is read or made, no result is wider than MAX_COLUMNS."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, NoReturn

from ..runners.process_reaper import spawned_leaders, spawning
from ..store.engine import sqlite_file
from .errors import QueryRefused, QueryTimedOut, QueryUnavailable
from .query import MAX_COLUMNS, MAX_VALUE_BYTES, QueryResult, ResultCollector
from .sql_gate import ALLOWED_FUNCTIONS, MAX_QUERY_CHARS
from .sqlite_worker import read_frame, write_frame
from .table import MemoryTable
from .views import sqlite_view

# SQLite's heap in the query's process: its page cache, sorters and temporary b-trees (DISTINCT, GROUP BY, ORDER BY,
# windows, materialized CTEs). Queries over a structure of 100,000 records of about 300 bytes (all of them sorted,
# grouped, ranked) took at most 31 MB; a query that needs more fails.
HEAP_BYTES = 128 * 1024 * 1024
# SQLite virtual machine steps a query may take. The same queries took at most 5 million.
MAX_STEPS = 200_000_000
# The process's address space (the interpreter takes about 30 MB of it, a row up to MAX_COLUMNS values a few
# copies), and the largest file it may write: none is expected.
ADDRESS_SPACE_BYTES = 512 * 1024 * 1024
FILE_BYTES = 1024 * 1024
# The process ends the query itself at the deadline; it is killed if it has not answered this much later.
_KILL_GRACE_SECONDS = 0.5
# The largest frame the process may send: a row of the widest values, or the column names (from the query's text
# or a view's field names).
_MAX_FRAME_BYTES = MAX_COLUMNS * (MAX_VALUE_BYTES + 64) + 4 * MAX_QUERY_CHARS
_WORKER_CODE = ("import sys; sys.path.insert(0, sys.argv[1]); "
                "from toolhost_server.memory.sqlite_worker import main; main()")
_TIMED_OUT = ("the query ran past the tool's timeout and was ended; narrow it (a WHERE, a LIMIT, a recursive CTE "
              "that stops)")

logger = logging.getLogger(__name__)


def run_sqlite_query(table: MemoryTable, statement: str, deadline: float, max_bytes: int) -> QueryResult:
    path = sqlite_file(table.store.url)
    if path is None:
        raise QueryUnavailable("memory_query needs the store in a SQLite file or PostgreSQL; this store is in "
                               "memory (set data_dir or database_url)")
    structures = table.list_structures()  # also creates and migrates the store when it is new
    request = {
        "database": f"{path.resolve().as_uri()}?mode=ro", "statement": statement, "deadline": deadline,
        "views": [sqlite_view(structure.name, structure.columns) for structure in structures],
        "view_names": [structure.name for structure in structures],
        "allowed_functions": sorted(ALLOWED_FUNCTIONS), "max_value_bytes": MAX_VALUE_BYTES,
        "max_columns": MAX_COLUMNS, "heap_bytes": HEAP_BYTES, "max_steps": MAX_STEPS,
        "address_space_bytes": ADDRESS_SPACE_BYTES, "file_bytes": FILE_BYTES, "parent": os.getpid(),
    }
    process = _start_worker()
    watchdog = threading.Timer(max(0.0, deadline - time.monotonic()) + _KILL_GRACE_SECONDS, process.kill)
    watchdog.daemon = True
    watchdog.start()
    try:
        return _collect(process, request, max_bytes, deadline)
    finally:
        watchdog.cancel()
        # Still running when the result is full or the query failed here: nothing more of it is wanted.
        process.kill()
        process.wait()
        spawned_leaders.discard(process.pid)
        for stream in (process.stdin, process.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()


def _start_worker() -> subprocess.Popen[bytes]:
    # Registered as a leader the server spawned, so that the stray reaping leaves its exit status to wait().
    with spawning():
        try:
            process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WORKER_CODE, str(Path(__file__).resolve().parents[2])],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd="/",
                # Nothing of the server's environment (it may hold the store key and database passwords).
                env={"LC_ALL": "C.UTF-8"}, start_new_session=True)
        except OSError as exc:
            logger.warning("memory_query cannot start its query process: %s", exc)
            raise QueryUnavailable("memory_query cannot start its query process on this server now; retry later "
                                   "(the server log has the detail)") from None
        spawned_leaders.add(process.pid)
    return process


def _collect(process: subprocess.Popen[bytes], request: dict[str, Any], max_bytes: int,
             deadline: float) -> QueryResult:
    assert process.stdin is not None and process.stdout is not None
    try:
        with contextlib.suppress(BrokenPipeError):  # a process that died at once is told apart by its stdout
            write_frame(process.stdin, request)
            process.stdin.close()
        kind, payload = read_frame(process.stdout, _MAX_FRAME_BYTES)
        if kind != "columns":
            _raise(payload)
        collector = ResultCollector(tuple(payload), max_bytes)
        while True:
            kind, payload = read_frame(process.stdout, _MAX_FRAME_BYTES)
            if kind == "end" or (kind == "row" and not collector.add(payload)):
                return collector.result()
            if kind != "row":
                _raise(payload)
    except EOFError:
        if time.monotonic() > deadline:
            raise QueryTimedOut(_TIMED_OUT) from None
        status = process.wait()
        logger.warning("memory_query's query process ended without answering (status %s)", status)
        if status in (-signal.SIGKILL, -signal.SIGXCPU):
            raise QueryRefused("the query's process was stopped before it answered, most likely for using more "
                               "memory or time than it may; narrow the query (a WHERE, fewer columns, a LIMIT)") \
                from None
        raise QueryUnavailable("memory_query's query process failed on this server; the server log has the "
                               "detail") from None
    except ValueError as exc:
        logger.warning("memory_query's query process sent what it must not: %s", exc)
        raise QueryUnavailable("memory_query's query process failed on this server; the server log has the "
                               "detail") from None


def _raise(error: tuple[str, str]) -> NoReturn:
    reason, message = error
    if reason == "deadline":
        raise QueryTimedOut(_TIMED_OUT)
    if reason == "memory":
        raise QueryRefused(_memory_refusal())
    if reason == "steps":
        raise QueryRefused(
            f"the query needs more than {MAX_STEPS:,} SQLite steps, the most one may take (a query over all "
            "100,000 records of a structure takes a few million); narrow it (a WHERE, a LIMIT, a recursive CTE that "
            "stops sooner)")
    if reason == "refused":
        raise QueryRefused(_refusal(message))
    logger.warning("memory_query's query process failed: %s", message)
    raise QueryUnavailable("memory_query's query process failed on this server; the server log has the detail")


def _memory_refusal() -> str:
    return (f"the query needs more than {HEAP_BYTES >> 20} MB of temporary space (the rows a DISTINCT, ORDER BY, "
            "GROUP BY, window or materialized CTE keeps), the most memory_query gives one; narrow it (a WHERE, "
            "fewer or shorter columns, ORDER BY with a LIMIT)")


def _refusal(message: str) -> str:
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
    if "disk I/O error" in message or "database or disk is full" in message:
        return _memory_refusal()  # a temporary file despite temp_store=MEMORY, stopped at FILE_BYTES
    return f"SQLite refused the query: {message}"
