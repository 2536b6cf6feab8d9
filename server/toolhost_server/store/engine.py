"""SQLAlchemy engines for the store's URL, and the one place where database errors become StoreErrors.

Two databases are supported: a SQLite file (the default, in the data dir) and PostgreSQL through psycopg 3,
which many replicas share. Every message names the database by its URL without the password.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy.exc
from sqlalchemy import URL, Connection, Engine, create_engine, event, make_url

from .errors import StoreError, StoreUnavailableError, StoreValueError

DATABASE_FILE_NAME = "toolhost.db"
_URL_FORMS = "sqlite:///PATH or postgresql://USER:PASSWORD@HOST:PORT/DATABASE"
_URL_SETTING = "database_url (TOOLHOST_DATABASE_URL)"
_QUERY_CANCELED = "57014"  # PostgreSQL's query_canceled: statement_timeout passed, or pg_cancel_backend

# SQLite: writers wait this long for each other (the CLI and a server may write at once) before "locked".
SQLITE_BUSY_TIMEOUT_MS = 10_000
# SQLite: a read with a deadline checks the clock every this many virtual machine steps (well under a
# millisecond of work: the check costs a Python call, so not every step).
SQLITE_DEADLINE_CHECK_STEPS = 10_000
# The execution option that marks a connection's transactions as read-only (Store.read): see _begin.
READ_ONLY_OPTION = "toolhost_read_only"

# PostgreSQL, shared by many replicas: each keeps a small pool, so that replicas x (size + overflow) stays
# under the server's max_connections (100 by default; put PgBouncer in front for more replicas). Connections
# are checked before use and recycled, because a failover or an idle-cutting proxy leaves dead ones behind.
POSTGRES_POOL_SIZE = 5
POSTGRES_MAX_OVERFLOW = 5
POSTGRES_POOL_TIMEOUT_SECONDS = 10
POSTGRES_POOL_RECYCLE_SECONDS = 1800
POSTGRES_CONNECT_TIMEOUT_SECONDS = 10


def sqlite_file_url(path: Path) -> URL:
    return URL.create("sqlite", database=str(path))


def parse_database_url(text: str) -> URL:
    """The URL to connect to: `postgresql://` and `postgres://` mean psycopg 3, the driver toolhost ships."""
    try:
        url = make_url(text)
    except sqlalchemy.exc.ArgumentError:
        # Not echoed: an unparsable URL may still hold a password.
        raise StoreUnavailableError(f"{_URL_SETTING} is not a database URL; use {_URL_FORMS}") from None
    backend = url.get_backend_name()
    if backend in ("postgresql", "postgres"):
        if url.drivername in ("postgresql", "postgres"):
            return url.set(drivername="postgresql+psycopg")
        if url.get_driver_name() != "psycopg":
            raise StoreUnavailableError(
                f"{_URL_SETTING} {safe_url_text(url)} asks for the driver {url.get_driver_name()!r}; toolhost "
                "ships psycopg 3: write postgresql://... or postgresql+psycopg://...")
        return url
    if backend == "sqlite":
        return url
    raise StoreUnavailableError(
        f"{_URL_SETTING} {safe_url_text(url)}: {backend} is not supported; use {_URL_FORMS}")


def safe_url_text(url: URL) -> str:
    return url.render_as_string(hide_password=True)


def sqlite_file(url: URL) -> Path | None:
    """The file of a SQLite URL, or None for another database or an in-memory one."""
    database = url.database or ""
    if url.get_backend_name() != "sqlite" or database in ("", ":memory:") or database.startswith("file:"):
        return None
    return Path(database)


def create_store_engine(url: URL) -> Engine:
    """An engine for `url` (from parse_database_url). Nothing connects until it is used."""
    # hide_parameters: statements in error messages never carry the values bound to them.
    if url.get_backend_name() == "sqlite":
        engine = create_engine(url, hide_parameters=True)
        event.listen(engine, "connect", _configure_sqlite_connection)
        event.listen(engine, "begin", _begin)
        return engine
    return create_engine(
        url, hide_parameters=True,
        pool_size=POSTGRES_POOL_SIZE, max_overflow=POSTGRES_MAX_OVERFLOW, pool_timeout=POSTGRES_POOL_TIMEOUT_SECONDS,
        pool_recycle=POSTGRES_POOL_RECYCLE_SECONDS, pool_pre_ping=True,
        connect_args={"connect_timeout": POSTGRES_CONNECT_TIMEOUT_SECONDS, "application_name": "toolhost"})


def _configure_sqlite_connection(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets readers (a server's lookups) go on while a writer (the CLI) commits; NORMAL sync is durable
    # enough in WAL mode. The busy timeout makes concurrent writers wait instead of failing at once.
    # The driver's own BEGIN is off: _begin starts every transaction instead.
    dbapi_connection.isolation_level = None
    dbapi_connection.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
    _switch_to_wal(dbapi_connection)
    dbapi_connection.execute("PRAGMA synchronous = NORMAL")
    dbapi_connection.execute("PRAGMA foreign_keys = ON")


def _switch_to_wal(dbapi_connection: Any) -> None:
    # Changing the journal mode needs the database to itself, and SQLite may answer "database is locked" at
    # once rather than wait its busy timeout when other connections open it at the same moment (stores of
    # replicas, or the CLI, starting together). A few short retries ride that out.
    for attempt in range(50):
        try:
            dbapi_connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == 49:
                raise
            time.sleep(0.02)


def _begin(connection: Connection) -> None:
    # A deferred transaction that reads and then writes cannot wait for another writer: SQLite answers "database
    # is locked" at once, busy timeout or not (it would deadlock otherwise). Taking the write lock at BEGIN makes
    # concurrent writers (stores starting together, the CLI beside a server) wait their turn instead.
    # A transaction that only reads never asks for the write lock, so it can be deferred: in WAL mode it reads
    # its snapshot while a writer commits, and a long read no longer makes every writer of the store wait.
    # query_only turns a write attempted in it into an error at once, never a lock upgrade; it is a setting of
    # the pooled connection, so every transaction sets it as it needs it (a statement only when it changes).
    read_only = bool(connection.get_execution_options().get(READ_ONLY_OPTION))
    if connection.info.get(READ_ONLY_OPTION, False) != read_only:
        connection.exec_driver_sql(f"PRAGMA query_only = {int(read_only)}")
        connection.info[READ_ONLY_OPTION] = read_only
    connection.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


@contextmanager
def read_only_transaction(connection: Connection, deadline: float | None) -> Iterator[None]:
    """Make the transaction just begun on `connection` (with READ_ONLY_OPTION set) read-only and bounded: each
    statement still running at `deadline` (a time.monotonic() value; None: no bound) is stopped, and raises as
    database_errors says. PostgreSQL reads one snapshot (REPEATABLE READ, which a read-only transaction can never
    fail to serialise) like SQLite does; SQLite's side is set by _begin."""
    if connection.dialect.name != "sqlite":
        connection.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
    if deadline is None:
        yield
        return
    if connection.dialect.name == "sqlite":
        # The progress handler belongs to the pooled connection: removed however the block ends, or it would
        # interrupt every later statement on it.
        driver_connection: Any = connection.connection.dbapi_connection
        driver_connection.set_progress_handler(lambda: time.monotonic() >= deadline, SQLITE_DEADLINE_CHECK_STEPS)
        try:
            yield
        finally:
            driver_connection.set_progress_handler(None, 0)
        return

    def bound_statement(_connection: Connection, cursor: Any, *_statement: Any) -> None:
        # What is left when the statement starts, not when the transaction did: a later statement may not use
        # an earlier one's time again. SET LOCAL's value ends with the transaction; 0 would mean no bound.
        remaining_ms = max(1, math.ceil((deadline - time.monotonic()) * 1000))
        cursor.execute("SELECT set_config('statement_timeout', %s, true)", (f"{remaining_ms}ms",))

    event.listen(connection, "before_cursor_execute", bound_statement)
    try:
        yield
    finally:
        event.remove(connection, "before_cursor_execute", bound_statement)


@contextmanager
def database_errors(url: URL) -> Iterator[None]:
    """Turn SQLAlchemy's and the driver's errors raised inside into StoreErrors that say what to check."""
    try:
        yield
    except sqlalchemy.exc.SQLAlchemyError as exc:
        raise _store_error(exc, url) from None


def _store_error(exc: sqlalchemy.exc.SQLAlchemyError, url: URL) -> StoreError:
    reason = _reason(exc, url)
    where = safe_url_text(url)
    path = sqlite_file(url)
    if isinstance(exc, (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError)):
        if _sqlite_code(exc) == sqlite3.SQLITE_INTERRUPT or _sqlstate(exc) == _QUERY_CANCELED:
            # Also an operator's pg_cancel_backend; the message says both.
            return StoreUnavailableError(
                f"the database at {where} stopped a statement that was still running at its deadline (or an "
                "operator cancelled it): ask for less (narrower filters), or allow the call more time")
        if path is not None and _sqlite_code(exc) in (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR):
            return StoreUnavailableError(
                f"cannot write the SQLite database {path}: {reason} (free space on its filesystem, or raise the "
                "server's file size limit; the data dir is set by data_dir)")
        if path is not None:
            return StoreUnavailableError(
                f"cannot use the SQLite database {path}: {reason} (check that the directory is writable by the "
                "server's user, or set data_dir / database_url)")
        return StoreUnavailableError(
            f"cannot use the database at {where}: {reason} (check {_URL_SETTING}, and that the database runs "
            "and accepts this server's connections)")
    if isinstance(exc, sqlalchemy.exc.TimeoutError):
        return StoreUnavailableError(
            f"no free connection to the database at {where} within {POSTGRES_POOL_TIMEOUT_SECONDS}s: every "
            "pooled connection is busy (slow queries, or too many concurrent calls)")
    if isinstance(exc, (sqlalchemy.exc.DataError, sqlalchemy.exc.IntegrityError)):
        return StoreValueError(f"the database at {where} refused a value: {reason}")
    if isinstance(exc, (sqlalchemy.exc.ArgumentError, sqlalchemy.exc.NoSuchModuleError)):
        return StoreUnavailableError(f"{_URL_SETTING} {where} is not usable: {reason}; use {_URL_FORMS}")
    return StoreError(f"database error at {where}: {reason}")


def _sqlite_code(exc: sqlalchemy.exc.SQLAlchemyError) -> int | None:
    """SQLite's primary result code of the error (SQLITE_FULL for a full disk), if the driver raised it."""
    code = getattr(getattr(exc, "orig", None), "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None  # an extended code holds the primary in its low byte


def _sqlstate(exc: sqlalchemy.exc.SQLAlchemyError) -> str | None:
    """PostgreSQL's SQLSTATE of the error, if psycopg raised it."""
    code = getattr(getattr(exc, "orig", None), "sqlstate", None)
    return code if isinstance(code, str) else None


def _reason(exc: sqlalchemy.exc.SQLAlchemyError, url: URL) -> str:
    # The driver's own message (SQLAlchemy's adds the statement and a link). Drivers do not quote passwords,
    # but a URL can end up in a message, so the password is removed in any case.
    original = getattr(exc, "orig", None)
    text = str(original if original is not None else exc).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    reason = "; ".join(lines[:2]) or type(exc).__name__
    if url.password:
        reason = reason.replace(str(url.password), "***")
    return reason
