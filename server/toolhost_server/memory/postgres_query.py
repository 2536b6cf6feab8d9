"""memory_query on PostgreSQL: a connection of its own, logged in as the memory role that `toolhost db
init-memory-role` made (which may read the memory views and nothing of toolhost's tables), in a READ ONLY
transaction with the memory schema as its search_path and a statement timeout, the query run as a cursor (which
PostgreSQL takes only for one SELECT or VALUES without writes), then rolled back and closed.

Logged in as the role rather than switching to it with SET ROLE: a query could switch back (set_config('role',
'none', true)) to the server's user, which may read every table."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import psycopg.errors

from .errors import QueryRefused, QueryTimedOut, QueryUnavailable
from .query import QueryResult
from .table import MemoryTable
from .views import POSTGRES_SCHEMA

CONNECT_TIMEOUT_SECONDS = 10
SETUP_COMMAND = "toolhost db init-memory-role"


def run_postgres_query(table: MemoryTable, statement: str, deadline: float, max_rows: int) -> QueryResult:
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
    parameters["options"] = (f"-c search_path={POSTGRES_SCHEMA} -c default_transaction_read_only=on "
                             f"-c statement_timeout={timeout_ms} -c lock_timeout={timeout_ms}")
    try:
        connection = psycopg.connect(**{key: value for key, value in parameters.items() if value is not None})
    except psycopg.Error as exc:
        raise QueryUnavailable(
            f"the memory role {role!r} cannot log in ({_first_line(exc)}): run `{SETUP_COMMAND}` again, and let it "
            "connect as the server's user does (pg_hba.conf)") from None
    try:
        with connection.cursor(name="memory_query") as cursor:
            cursor.execute(statement)
            rows = cursor.fetchmany(max_rows + 1)
            columns = tuple(column.name for column in cursor.description or ())
    except psycopg.errors.QueryCanceled:
        raise QueryTimedOut(
            "the query ran past the tool's timeout and was ended; narrow it (a WHERE, a LIMIT, a recursive "
            "CTE that stops)") from None
    except psycopg.Error as exc:
        if exc.sqlstate is None:
            raise QueryUnavailable(f"the connection to PostgreSQL failed during the query: {_first_line(exc)}") \
                from None
        raise QueryRefused(f"PostgreSQL refused the query: {_first_line(exc)}") from None
    finally:
        connection.rollback()
        connection.close()
    return QueryResult(columns, tuple(tuple(row) for row in rows[:max_rows]), len(rows) > max_rows)


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
