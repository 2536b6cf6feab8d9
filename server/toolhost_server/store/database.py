"""The Store: the database behind a URL, opened on first use with its schema created.

Opening lazily keeps a server that never needs its store fast to start and working on a read-only data dir;
the first use that fails says why (StoreUnavailableError), and the next use tries again.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import URL, Connection, Engine, text
from sqlalchemy.schema import CreateIndex, CreateTable

from ..batching import BatchRejected
from ..config import Config
from .engine import (
    DATABASE_FILE_NAME,
    create_store_engine,
    database_errors,
    parse_database_url,
    safe_url_text,
    sqlite_file,
    sqlite_file_url,
)
from .errors import StoreUnavailableError, StoreValueError
from .schema import metadata

# Any constant works; it only has to be the same in every replica (pg_advisory_xact_lock takes a bigint).
_SCHEMA_LOCK_ID = 0x746F6F6C686F7374  # "toolhost"


def database_url(config: Config) -> URL:
    """The configured database: `database_url`, or the SQLite file toolhost.db in the data dir."""
    if config.database_url:
        return parse_database_url(config.database_url)
    return sqlite_file_url(config.effective_data_dir() / DATABASE_FILE_NAME)


@contextmanager
def rejected_rows_reported() -> Iterator[None]:
    """Turns the database's refusal of a value (a NUL in text, a string too long for its column, a broken
    constraint) into BatchRejected, so that a batch writer retries without the offending row instead of losing
    every row that shared its INSERT; a database that is down or unreachable stays the error it is."""
    try:
        yield
    except StoreValueError as exc:
        raise BatchRejected(str(exc)) from exc


class Store:
    """The database toolhost keeps its state in. Thread-safe; blocking, so async code calls it in a thread.

        store = Store(database_url(config))
        with store.begin() as connection:         # one transaction; StoreError on failure
            connection.execute(select(credentials))
        store.close()
    """

    def __init__(self, url: URL) -> None:
        self.url = url
        self._engine: Engine | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config: Config) -> Store:
        return cls(database_url(config))

    def __repr__(self) -> str:
        return f"Store({self.description})"

    @property
    def description(self) -> str:
        """The database for people: the URL without its password, or the SQLite file's path."""
        path = sqlite_file(self.url)
        return f"SQLite file {path}" if path is not None else safe_url_text(self.url)

    @property
    def dialect(self) -> str:
        """'sqlite' or 'postgresql'."""
        return self.url.get_backend_name()

    @contextmanager
    def begin(self) -> Iterator[Connection]:
        """A connection in a transaction, committed when the block ends and rolled back if it raises."""
        engine = self._open()
        with database_errors(self.url), engine.begin() as connection:
            yield connection

    def close(self) -> None:
        with self._lock:
            if self._engine is not None:
                self._engine.dispose()
                self._engine = None

    def _open(self) -> Engine:
        with self._lock:
            if self._engine is None:
                path = sqlite_file(self.url)
                if path is not None:
                    _make_private_directory(path.parent)
                engine = create_store_engine(self.url)
                try:
                    with database_errors(self.url), engine.begin() as connection:
                        _create_missing_tables(connection)
                except BaseException:
                    engine.dispose()
                    raise
                self._engine = engine
            return self._engine


def _create_missing_tables(connection: Connection) -> None:
    if connection.dialect.name == "postgresql":
        # Replicas starting together would race on CREATE TABLE (IF NOT EXISTS is not atomic there); the lock
        # lasts until this transaction commits.
        connection.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": _SCHEMA_LOCK_ID})
    for table in metadata.sorted_tables:
        connection.execute(CreateTable(table, if_not_exists=True))
        for index in table.indexes:
            connection.execute(CreateIndex(index, if_not_exists=True))


def _make_private_directory(directory: Path) -> None:
    # 0700: the database holds encrypted credentials, and later logs and user tools, of this server only.
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreUnavailableError(
            f"cannot create the data directory {directory}: {exc.strerror or exc} (set data_dir "
            "(TOOLHOST_DATA_DIR) to a writable directory, or database_url to another database)") from None
