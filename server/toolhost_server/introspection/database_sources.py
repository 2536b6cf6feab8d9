"""The databases database_schema reads (the store and Config.databases), and how each is opened so that reading
its schema can change nothing and cannot hang: SQLite read-only by URI, PostgreSQL in read-only transactions
with connect, statement and lock timeouts."""

from __future__ import annotations

import math
import os
import re
import sqlite3
import stat
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import URL, Connection, create_engine, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import NullPool

from ..config import Config
from ..sanitize.known_values import check_known_value
from ..store.database import database_url
from ..store.errors import StoreError
from .redaction import REDACTED, redacted_parsed_url, url_secrets
from .statement_clock import StatementClock

STORE_NAME = "store"


# SQLite runs this many virtual machine steps between two looks at the clock: well under a millisecond.
_SQLITE_STEPS_PER_CHECK = 10_000
# The first 16 bytes of every SQLite database file (a file of size 0 is an empty database, as SQLite creates it).
SQLITE_HEADER = b"SQLite format 3\x00"
# Where the kernel shows itself as files, and the filesystem types that do it, wherever they are mounted.
_KERNEL_DIRECTORIES = ("/proc", "/sys", "/dev")
_KERNEL_FILESYSTEMS = frozenset({"proc", "sysfs", "devtmpfs", "devpts", "debugfs", "tracefs", "securityfs",
                                 "configfs", "cgroup", "cgroup2", "bpf", "pstore", "efivarfs", "fusectl",
                                 "binfmt_misc", "mqueue"})


class SourceUnusable(Exception):
    """A source that cannot be opened as configured; the message is safe to show (no password)."""


@dataclass(frozen=True, slots=True)
class DatabaseSource:
    """One named database: its parsed URL, or None with `problem` when the configured text is not usable."""

    name: str
    url: URL | None
    problem: str = ""

    @property
    def dialect(self) -> str:
        return self.url.get_backend_name() if self.url is not None else ""

    @property
    def safe_url(self) -> str:
        """Shown without the driver (postgresql://), as it is configured."""
        return redacted_parsed_url(self.url, self.url.get_backend_name()) if self.url is not None else REDACTED

    @property
    def secrets(self) -> tuple[str, ...]:
        """What a logged message about this source must not hold."""
        return url_secrets(self.url) if self.url is not None else ()


def sources_from_config(config: Config) -> tuple[DatabaseSource, ...]:
    """The store first, then every configured connection in name order."""
    try:
        store = DatabaseSource(STORE_NAME, _with_driver(database_url(config)))
    except StoreError:
        # Not echoed: the setting that failed to parse may hold a password.
        store = DatabaseSource(STORE_NAME, None, "database_url is not a usable database URL")
    return (store, *(_source(name, text) for name, text in config.databases))


def configured_database_secrets(config: Config) -> list[str]:
    """The passwords (and secret query values) of the store's URL and every configured database's, long enough
    to match safely: the server's redactor learns them at start, so that a driver's message, a tool's output or
    a log line holding one is redacted wherever it appears, not only where these modules know to hide it."""
    values = []
    for source in sources_from_config(config):
        for value in source.secrets:
            try:
                check_known_value(value)
            except ValueError:  # too short to hide everywhere: the key-based rules still hide `password=...`
                continue
            values.append(value)
    return values


def _source(name: str, text: str) -> DatabaseSource:
    try:
        return DatabaseSource(name, _with_driver(make_url(text)))
    except (ArgumentError, ValueError):
        return DatabaseSource(name, None, "the configured URL is not a database URL")


def _with_driver(url: URL) -> URL:
    """postgresql:// and postgres:// mean psycopg 3, the driver toolhost ships."""
    if url.get_backend_name() in ("postgresql", "postgres"):
        return url.set(drivername="postgresql+psycopg")
    return url


@contextmanager
def read_only_connection(source: DatabaseSource, clock: StatementClock,
                         connect_seconds: float) -> Iterator[Connection]:
    """A connection to `source` in a transaction that cannot write, rolled back at the end. Connecting takes at
    most `connect_seconds` (or what remains of the clock); each statement at most the clock's statement time."""
    if source.url is None:
        raise SourceUnusable(source.problem)
    connect_seconds = max(0.001, min(connect_seconds, clock.remaining()))
    if source.dialect == "sqlite":
        engine = create_engine("sqlite://", creator=_sqlite_opener(source.url, clock), poolclass=NullPool,
                               hide_parameters=True)
    elif source.dialect == "postgresql":
        engine = create_engine(source.url, poolclass=NullPool, hide_parameters=True,
                               connect_args=_postgres_arguments(connect_seconds, clock.statement_seconds))
    else:
        raise SourceUnusable(f"{source.dialect} databases are not supported; use SQLite or PostgreSQL")
    try:
        with engine.connect() as connection:
            if source.dialect == "postgresql":
                # default_transaction_read_only (set at connect) already says so; this is the second lock.
                connection.exec_driver_sql("SET TRANSACTION READ ONLY")
            try:
                yield connection
            finally:
                connection.rollback()
    finally:
        engine.dispose()


def _postgres_arguments(connect_seconds: float, statement_seconds: float) -> dict[str, object]:
    statement_ms = max(1, int(statement_seconds * 1000))
    # libpq counts connect_timeout in whole seconds and treats anything under 2 as 2.
    return {
        "connect_timeout": max(2, math.ceil(connect_seconds)),
        "application_name": "toolhost-database-schema",
        "options": (f"-c default_transaction_read_only=on -c statement_timeout={statement_ms} "
                    f"-c lock_timeout={statement_ms} -c idle_in_transaction_session_timeout={statement_ms * 4}"),
        # A host that stops answering mid-query is given up after this long, not after TCP's minutes.
        "tcp_user_timeout": int((connect_seconds + statement_seconds) * 1000),
    }


def _sqlite_opener(url: URL, clock: StatementClock) -> Callable[[], sqlite3.Connection]:
    path = _sqlite_path(url)

    def open_read_only() -> sqlite3.Connection:
        checked = checked_sqlite_file(path)
        # mode=ro: SQLite never creates the file nor writes to it. The path is quoted, so that a '?' or '#' in a
        # file name cannot add URI parameters of its own (mode=rwc).
        uri = f"file:{urllib.parse.quote(str(checked))}?mode=ro"
        connection = sqlite3.connect(uri, uri=True, timeout=clock.statement_seconds, check_same_thread=False,
                                     isolation_level=None)
        # A name written in another encoding than UTF-8 is shown with replacement characters, not an error.
        connection.text_factory = lambda data: data.decode("utf-8", "replace")
        connection.set_progress_handler(clock.sqlite_should_stop, _SQLITE_STEPS_PER_CHECK)
        # query_only refuses writes even if a statement tried; trusted_schema off keeps a hostile file's views
        # and triggers from calling functions with side effects.
        connection.execute("PRAGMA query_only = ON")
        connection.execute("PRAGMA trusted_schema = OFF")
        return connection

    return open_read_only


def _sqlite_path(url: URL) -> Path:
    database = url.database or ""
    if database in ("", ":memory:"):
        raise SourceUnusable("an in-memory SQLite database has no schema to read; give sqlite:///PATH")
    if database.startswith("file:"):
        raise SourceUnusable("SQLite URI file names are not accepted here; give sqlite:///PATH")
    return Path(os.path.abspath(database))


def checked_sqlite_file(path: Path) -> Path:
    """`path` with its symbolic links resolved, once it is known to be a SQLite database file: a regular file
    (opening a FIFO or a device would block or read forever; a missing file must not be created), outside the
    kernel's own filesystems (/proc/self/environ is a regular file of size 0, which SQLite would take for an
    empty database), and either empty (a database SQLite has created and not yet written) or starting with
    SQLite's header."""
    real = Path(os.path.realpath(path))
    if _on_kernel_filesystem(real):
        raise SourceUnusable(f"{path} is a file of the kernel (/proc, /sys, /dev), not a SQLite database: "
                             "check the URL")
    try:
        mode = real.stat().st_mode
    except FileNotFoundError:
        raise SourceUnusable(f"the SQLite file {path} does not exist (it is opened read-only, never created): "
                             "check the URL") from None
    except OSError as exc:
        raise SourceUnusable(f"cannot reach the SQLite file {path}: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise SourceUnusable(f"{path} is not a regular file, so it is not a SQLite database: check the URL")
    try:
        # O_NONBLOCK: should a FIFO have taken the file's place since the stat, opening it does not wait.
        descriptor = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise SourceUnusable(f"cannot open the SQLite file {path}: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise SourceUnusable(f"{path} is not a regular file, so it is not a SQLite database: check the URL")
        header = os.read(descriptor, len(SQLITE_HEADER))
    finally:
        os.close(descriptor)
    if header and header != SQLITE_HEADER:
        raise SourceUnusable(f"{path} does not start with SQLite's header, so it is not a SQLite database: "
                             "check the URL")
    return real


def _on_kernel_filesystem(path: Path) -> bool:
    if any(path == Path(top) or Path(top) in path.parents for top in _KERNEL_DIRECTORIES):
        return True
    # The same filesystems mounted elsewhere (a container's view of the host's /proc): the longest mount point
    # above the path says which filesystem holds it.
    try:
        mounts = Path("/proc/self/mountinfo").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return False
    holder, holder_type = "", ""
    for line in mounts:
        fields, _, rest = line.partition(" - ")
        parts = fields.split(" ")
        if len(parts) < 5 or not rest:
            continue
        mount_point = _unescaped(parts[4])
        inside = mount_point == "/" or path == Path(mount_point) or Path(mount_point) in path.parents
        if inside and len(mount_point) >= len(holder):
            holder, holder_type = mount_point, rest.split(" ", 1)[0]
    return holder_type in _KERNEL_FILESYSTEMS


def _unescaped(mount_point: str) -> str:
    """A mountinfo path: space, tab, newline and backslash are written as octal escapes (\\040)."""
    return re.sub(r"\\([0-7]{3})", lambda found: chr(int(found.group(1), 8)), mount_point)
