"""The Store: the database behind a URL, opened on first use with its schema migrated to the latest version.

Opening lazily keeps a server that never needs its store fast to start and working on a read-only data dir;
the first use that fails says why (StoreUnavailableError), and the next use tries again. A server that writes
to its store opens it at start instead (migrate_at_start), so that a database it must not use stops it there.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import URL, Connection, Engine

from ..batching import BatchOutcomeUnknown, BatchRejected, BatchUnavailable
from ..config import Config
from .engine import (
    DATABASE_FILE_NAME,
    READ_ONLY_OPTION,
    create_store_engine,
    database_errors,
    parse_database_url,
    read_only_transaction,
    safe_url_text,
    sqlite_file,
    sqlite_file_url,
)
from .errors import (
    StoreCommitUnknownError,
    StoreError,
    StoreSchemaError,
    StoreUnavailableError,
    StoreValueError,
)
from .migrations import migrate

logger = logging.getLogger("toolhost.store")


def database_url(config: Config) -> URL:
    """The configured database: `database_url`, or the SQLite file toolhost.db in the data dir."""
    if config.database_url:
        return parse_database_url(config.database_url)
    return sqlite_file_url(config.effective_data_dir() / DATABASE_FILE_NAME)


@contextmanager
def batch_errors_reported() -> Iterator[None]:
    """Tells a batch writer (batching.BatchWriter) what became of a batch's INSERT. The database's refusal of a
    value (a NUL in text, a string too long for its column, a broken constraint) is BatchRejected, so that the
    writer retries without the offending row instead of losing every row that shared the INSERT; a commit whose
    outcome is unknown is BatchOutcomeUnknown; a database that is down, unreachable, full or locked is
    BatchUnavailable. The writer keeps the batch of either for a later attempt, as it does on any other error
    (which stays the error it is: a StoreSchemaError is raised as such)."""
    try:
        yield
    except StoreValueError as exc:
        raise BatchRejected(str(exc)) from exc
    except StoreCommitUnknownError as exc:
        raise BatchOutcomeUnknown(str(exc)) from exc
    except StoreUnavailableError as exc:
        raise BatchUnavailable(str(exc)) from exc


class Store:
    """The database toolhost keeps its state in. Thread-safe; blocking, so async code calls it in a thread.

        store = Store(database_url(config))
        with store.begin() as connection:         # one transaction; StoreError on failure
            connection.execute(select(credentials))
        with store.read(deadline=time.monotonic() + 5) as connection:   # one that only reads
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
        """A connection in a transaction, committed when the block ends and rolled back if it raises.

        StoreCommitUnknownError when the connection to a database server broke during the COMMIT itself. (A
        SQLite commit that fails was not applied: the file is local, and the error comes before it is.)
        """
        engine = self._open()
        committing = False
        try:
            with database_errors(self.url), engine.begin() as connection:
                yield connection
                committing = True
        except StoreUnavailableError as exc:
            if committing and self.dialect != "sqlite":
                raise StoreCommitUnknownError(
                    f"{exc}; the connection broke while the transaction committed, so whether the database "
                    "stored it is unknown") from None
            raise

    @contextmanager
    def read(self, deadline: float | None = None) -> Iterator[Connection]:
        """A connection in a transaction that only reads, for reads a caller chooses (a filter, a page).

        It sees one snapshot and takes no lock that makes writers wait (on SQLite it is deferred, not IMMEDIATE
        as `begin`'s are); a write in it is an error. Each statement still running at `deadline` (a
        time.monotonic() value; None: no bound) is stopped and raises StoreUnavailableError.
        """
        engine = self._open()
        with database_errors(self.url), engine.connect() as connection:
            connection.execution_options(**{READ_ONLY_OPTION: True})
            with connection.begin(), read_only_transaction(connection, deadline):
                yield connection

    def open(self) -> None:
        """Connect and migrate the schema now rather than at first use; StoreError as `begin` raises it."""
        self._open()

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
                    with database_errors(self.url):
                        migrate(engine, self.description)
                except BaseException:
                    engine.dispose()
                    raise
                self._engine = engine
            return self._engine


def migrate_at_start(config: Config) -> None:
    """Open the configured database and migrate it, for a server that is starting and will write to it.

    A database whose schema is newer than this toolhost knows raises StoreSchemaError: the server must not
    start against it. One that cannot be reached now is only logged: the server starts, and the store's first
    use tries again, as with a store opened lazily.
    """
    store = Store.from_config(config)
    try:
        store.open()
    except StoreSchemaError:
        raise
    except StoreError as exc:
        logger.warning("the store is not usable at start (its first use will try again): %s", exc)
    finally:
        store.close()


def _make_private_directory(directory: Path) -> None:
    # 0700: the database holds encrypted credentials, and later logs and user tools, of this server only.
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreUnavailableError(
            f"cannot create the data directory {directory}: {exc.strerror or exc} (set data_dir "
            "(TOOLHOST_DATA_DIR) to a writable directory, or database_url to another database)") from None
