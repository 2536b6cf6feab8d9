"""memory_query on PostgreSQL: a connection of its own, logged in as the memory role that `toolhost db
init-memory-role` made (which may read the memory views and nothing of toolhost's tables, checked again on each
connection), in a READ ONLY transaction with the memory schema as its search_path and a statement timeout, the query
run as a cursor (which PostgreSQL takes only for one SELECT or VALUES without writes), then rolled back and closed.

Logged in as the role rather than switching to it with SET ROLE: a query could switch back (set_config('role',
'none', true)) to the server's user, which may read every table.

PostgreSQL builds values up to 1 GB, so the query's own cursor only names its columns; the rows come through a
second one that wraps it (_bounded) and sends a value only when it is at most MAX_VALUE_BYTES long, with the
widest value's length beside it, fetched a few rows at a time until the result is full."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

import psycopg
import psycopg.errors

from .errors import QueryRefused, QueryTimedOut, QueryUnavailable
from .postgres_role import TEMP_FILE_LIMIT_KB, WORK_MEM, reach_outside_memory, temp_file_limit_kb
from .query import MAX_VALUE_BYTES, QueryResult, ResultCollector
from .table import MemoryTable
from .views import POSTGRES_SCHEMA

CONNECT_TIMEOUT_SECONDS = 10
SETUP_COMMAND = "toolhost db init-memory-role"
# Bytes of values one FETCH may bring at most (rows of the widest values the query may have).
_BATCH_BYTES = 4 * 1024 * 1024

logger = logging.getLogger(__name__)


def run_postgres_query(table: MemoryTable, statement: str, deadline: float, max_bytes: int) -> QueryResult:
    login = table.sync_postgres_views()
    if login is None:
        raise QueryUnavailable(
            f"memory_query on PostgreSQL needs the memory role, which this database does not have yet: whoever may "
            f"create roles runs `{SETUP_COMMAND}` once (see `{SETUP_COMMAND} --help`)")
    role, password = login
    url = table.store.url
    parameters: dict[str, Any] = {str(key): value for key, value in url.query.items() if isinstance(value, str)}
    parameters.update(
        host=url.host or parameters.get("host"), port=url.port, dbname=url.database, user=role, password=password,
        application_name="toolhost memory_query")
    # What is left once the views are synced, for connecting (bounded by it too) and the query.
    timeout_ms = max(1, int((deadline - time.monotonic()) * 1000))
    parameters["connect_timeout"] = max(1, min(CONNECT_TIMEOUT_SECONDS, timeout_ms // 1000))
    # work_mem is the role's default too; set here as well, since the role may set it and a default can be changed.
    parameters["options"] = (f"-c search_path={POSTGRES_SCHEMA} -c default_transaction_read_only=on "
                             f"-c statement_timeout={timeout_ms} -c lock_timeout={timeout_ms} -c work_mem={WORK_MEM}")
    try:
        connection = psycopg.connect(**{key: value for key, value in parameters.items() if value is not None})
    except psycopg.Error as exc:
        raise QueryUnavailable(
            f"the memory role {role!r} cannot log in ({_first_line(exc)}): run `{SETUP_COMMAND}` again, and let it "
            "connect as the server's user does (pg_hba.conf)") from None
    # statement_timeout bounds each FETCH alone; this ends the whole query at its deadline.
    watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), connection.cancel_safe)
    watchdog.daemon = True
    watchdog.start()
    try:
        _check_reach(connection, role)
        _check_temp_file_limit(connection, role)
        return _fetch(connection, statement, max_bytes)
    except psycopg.errors.QueryCanceled:
        raise QueryTimedOut(
            "the query ran past the tool's timeout and was ended; narrow it (a WHERE, a LIMIT, a recursive "
            "CTE that stops)") from None
    except psycopg.errors.ConfigurationLimitExceeded as exc:
        if "temp_file_limit" not in str(exc):
            raise QueryRefused(f"PostgreSQL refused the query: {_first_line(exc)}") from None
        raise QueryRefused(
            f"the query needs more than {TEMP_FILE_LIMIT_KB // 1024} MB of temporary space on the database server "
            "(the rows a DISTINCT, ORDER BY, GROUP BY or CTE keeps beyond memory), the most memory_query gives one; "
            "narrow it (a WHERE, fewer or shorter columns, ORDER BY with a LIMIT)") from None
    except psycopg.Error as exc:
        if exc.sqlstate is None:
            raise QueryUnavailable(f"the connection to PostgreSQL failed during the query: {_first_line(exc)}") \
                from None
        raise QueryRefused(f"PostgreSQL refused the query: {_first_line(exc)}") from None
    finally:
        watchdog.cancel()
        with contextlib.suppress(psycopg.Error):  # a cancel that came as the query ended may hit the rollback
            connection.rollback()
        connection.close()


def _check_reach(connection: psycopg.Connection[Any], role: str) -> None:
    """QueryUnavailable when the role may use a table outside the memory schema (a grant to it or to PUBLIC made
    after init-memory-role): the SQL gate lets a query name any schema, so the role's privileges are the fence."""
    reached = reach_outside_memory(connection, role)
    if reached:
        logger.error("memory_query refused to run: the memory role %s may use %s outside the %s schema; revoke "
                     "that (from PUBLIC too) or run `%s` again", role, ", ".join(reached), POSTGRES_SCHEMA,
                     SETUP_COMMAND)
        raise QueryUnavailable(
            f"memory_query is off: the memory role may use tables outside the memory views, which it must not; the "
            f"operator revokes that (the server log names them) or runs `{SETUP_COMMAND}` again")


def _check_temp_file_limit(connection: psycopg.Connection[Any], role: str) -> None:
    """QueryUnavailable when the role's connections have no temp_file_limit, or a larger one than
    init-memory-role sets (a role made before it did, a setting changed since): one query could fill the database
    server's disk with temporary files."""
    limit = temp_file_limit_kb(connection)
    if 0 <= limit <= TEMP_FILE_LIMIT_KB:
        return
    logger.error("memory_query refused to run: the memory role %s has temp_file_limit %s kB, more than %s kB or none; "
                 "run `%s` again as a superuser", role, limit, TEMP_FILE_LIMIT_KB, SETUP_COMMAND)
    raise QueryUnavailable(
        f"memory_query is off: the memory role has no bound on its temporary files (temp_file_limit); the operator "
        f"runs `{SETUP_COMMAND}` again as a superuser")


def _fetch(connection: psycopg.Connection[Any], statement: str, max_bytes: int) -> QueryResult:
    # DECLARE names the columns without running the query (and refuses anything but one SELECT or VALUES).
    with connection.cursor(name="memory_query_columns") as described:
        described.execute(statement)
        columns = tuple(column.name for column in described.description or ())
    collector = ResultCollector(columns, max_bytes)
    batch = max(1, _BATCH_BYTES // (max(1, len(columns)) * MAX_VALUE_BYTES))
    with connection.cursor(name="memory_query") as cursor:
        cursor.execute(_bounded(statement, len(columns)))
        while True:
            rows = cursor.fetchmany(batch)
            for widest, *values in rows:
                if widest is not None and widest > MAX_VALUE_BYTES:
                    raise QueryRefused(
                        f"a value of the query is {widest} bytes long; memory_query returns values of at most "
                        f"{MAX_VALUE_BYTES} bytes: select a part of it (substr, left) or aggregate fewer rows")
                if not collector.add(values):
                    return collector.result()
            if len(rows) < batch:
                return collector.result()


def _bounded(statement: str, width: int) -> str:
    """The query wrapped so that no value longer than MAX_VALUE_BYTES (as text, how it is sent) leaves the
    database: the widest value's length first, then each column, NULL where too long. The statement is the one
    DECLARE took alone, so its parentheses are balanced; the line breaks end a trailing -- comment. OFFSET 0
    keeps PostgreSQL from copying each column's expression into the three places that read it."""
    if width == 0:
        return f"SELECT 0 AS widest FROM (\n{statement}\n) AS q"
    names = [f"c{index}" for index in range(width)]
    lengths = [f"octet_length(q.{name}::text)" for name in names]
    values = [f"CASE WHEN {length} <= {MAX_VALUE_BYTES} THEN q.{name} END"
              for name, length in zip(names, lengths, strict=True)]
    return (f"SELECT GREATEST({', '.join(lengths)}) AS widest, {', '.join(values)} "
            f"FROM (SELECT * FROM (\n{statement}\n) AS i OFFSET 0) AS q({', '.join(names)})")


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
