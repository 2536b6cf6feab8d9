"""The search index's SQLite file: one row per file, an FTS5 table over names and text, and when each root was
last indexed in full.

The file is created 0600 (with that mode, not changed after: its text is the text of the files, redacted, and
nobody but the server's user should read it) in the data directory (0700), in WAL mode so that queries read
while the builder writes. One writer connection, used under a lock by whichever thread writes; each reading
thread has its own connection. The index is a cache of the tree: a file of another schema version is emptied
and built again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from .extraction import FileRecord
from .words import match_expression

logger = logging.getLogger("toolhost.search")

FILE_NAME: Final = "search-index.db"
SCHEMA_VERSION: Final = 1
# A name match counts this many times a match in the text.
NAME_WEIGHT: Final = 10.0

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    root TEXT NOT NULL,
    name TEXT NOT NULL,
    size INTEGER NOT NULL,
    modified REAL NOT NULL,
    changed REAL NOT NULL,
    kind TEXT NOT NULL,
    mime TEXT NOT NULL,
    signature TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS files_by_kind ON files (kind, path);
CREATE INDEX IF NOT EXISTS files_by_modified ON files (modified);
CREATE INDEX IF NOT EXISTS files_by_root ON files (root);
CREATE VIRTUAL TABLE IF NOT EXISTS words USING fts5 (
    name, text, tokenize = 'unicode61 remove_diacritics 2', prefix = '2 3'
);
CREATE TABLE IF NOT EXISTS roots (
    root TEXT PRIMARY KEY,
    indexed_at REAL NOT NULL
);
"""
_COLUMNS: Final = "f.path, f.name, f.size, f.modified, f.kind, f.mime"


@dataclass(frozen=True, slots=True)
class StoredFile:
    """A row of an answer, as stored (the caller checks the file is still there)."""

    path: str
    name: str
    size: int
    modified: float
    kind: str
    mime: str


# Files under a scope from which recent() reads the modification-time index rather than the path range.
_MANY_FILES = 2000


class IndexStore:
    """The index file at `path`::

        store = IndexStore(data_dir / FILE_NAME)
        store.put([record, ...])
        store.search(["quart"], "/srv/docs", limit=10, offset=0)
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _create_private(path)
        self._write_lock = threading.Lock()
        self._writer = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._configure(self._writer)
        self._writer.execute("PRAGMA journal_mode=WAL")
        self._prepare_schema()
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._closed = False

    @staticmethod
    def _configure(connection: sqlite3.Connection) -> None:
        connection.execute("PRAGMA busy_timeout=10000")
        connection.execute("PRAGMA synchronous=NORMAL")  # a cache: losing the last commits to a crash is fine

    def _prepare_schema(self) -> None:
        with self._write_lock:
            version = self._writer.execute("PRAGMA user_version").fetchone()[0]
            if version != SCHEMA_VERSION:
                if version:
                    logger.info("search index %s has schema %d, not %d: emptying it to build it again",
                                self.path, version, SCHEMA_VERSION)
                for table in ("files", "words", "roots"):
                    self._writer.execute(f"DROP TABLE IF EXISTS {table}")
                self._writer.executescript(_SCHEMA)
                self._writer.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    # Writing.

    def put(self, records: Sequence[FileRecord]) -> None:
        """Add or replace `records`, in one transaction."""
        if not records:
            return
        # A path twice in one batch (changed again while queued) would get two text rows: the last one wins.
        records = list({record.path: record for record in records}.values())
        with self._write_lock:
            cursor = self._writer.cursor()
            cursor.execute("BEGIN IMMEDIATE")
            try:
                # Every file row first, then every text row: alternating the two made FTS5 flush its pending
                # terms after each file, which took most of a build's time (bench/findings/file_search.md).
                row_ids: list[int] = []
                for record in records:
                    row_ids.append(cursor.execute(
                        "INSERT INTO files (path, root, name, size, modified, changed, kind, mime, signature) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (path) DO UPDATE SET root = excluded.root, "
                        "name = excluded.name, size = excluded.size, modified = excluded.modified, "
                        "changed = excluded.changed, kind = excluded.kind, mime = excluded.mime, "
                        "signature = excluded.signature RETURNING id",
                        (record.path, record.root, record.name, record.size, record.modified, record.changed,
                         record.kind, record.mime, record.signature)).fetchone()[0])
                cursor.executemany("DELETE FROM words WHERE rowid = ?", [(row_id,) for row_id in row_ids])
                cursor.executemany("INSERT INTO words (rowid, name, text) VALUES (?, ?, ?)",
                                   [(row_id, record.name, record.text or "")
                                    for row_id, record in zip(row_ids, records, strict=True)])
                cursor.execute("COMMIT")
            except BaseException:
                cursor.execute("ROLLBACK")
                raise

    def remove(self, paths: Iterable[str]) -> int:
        """Remove each path and everything below it; how many files that was."""
        removed = 0
        with self._write_lock:
            cursor = self._writer.cursor()
            cursor.execute("BEGIN IMMEDIATE")
            try:
                for path in paths:
                    low, high = _below(path)
                    ids = [row[0] for row in cursor.execute(
                        "SELECT id FROM files WHERE path = ? OR (path > ? AND path < ?)", (path, low, high))]
                    for row_id in ids:
                        cursor.execute("DELETE FROM words WHERE rowid = ?", (row_id,))
                        cursor.execute("DELETE FROM files WHERE id = ?", (row_id,))
                    removed += len(ids)
                cursor.execute("COMMIT")
            except BaseException:
                cursor.execute("ROLLBACK")
                raise
        return removed

    def keep_only_roots(self, roots: Sequence[str]) -> None:
        """Forget the files of roots no longer configured."""
        stale = [row[0] for row in self._writer.execute("SELECT DISTINCT root FROM files")
                 if row[0] not in roots]
        if stale:
            self.remove(stale)
            with self._write_lock:
                self._writer.executemany("DELETE FROM roots WHERE root = ?", [(root,) for root in stale])

    def mark_indexed(self, root: str, when: datetime) -> None:
        with self._write_lock:
            self._writer.execute("INSERT INTO roots (root, indexed_at) VALUES (?, ?) ON CONFLICT (root) DO UPDATE "
                                 "SET indexed_at = excluded.indexed_at", (root, when.timestamp()))

    # Reading.

    def indexed_at(self, root: str) -> datetime | None:
        row = self._reader().execute("SELECT indexed_at FROM roots WHERE root = ?", (root,)).fetchone()
        return None if row is None else datetime.fromtimestamp(row[0], UTC)

    def signatures(self, root: str) -> dict[str, str]:
        """path -> signature of every file of `root`."""
        return dict(self._reader().execute("SELECT path, signature FROM files WHERE root = ?", (root,)))

    def signature(self, path: str) -> str | None:
        row = self._reader().execute("SELECT signature FROM files WHERE path = ?", (path,)).fetchone()
        return None if row is None else str(row[0])

    def count(self, root: str) -> int:
        return int(self._reader().execute("SELECT count(*) FROM files WHERE root = ?", (root,)).fetchone()[0])

    def search(self, tokens: Sequence[str], scope: str, *, limit: int, offset: int) -> list[StoredFile]:
        """Files under `scope` whose name or text holds every token as a word prefix, best first (bm25, a name
        match weighing NAME_WEIGHT times a text match)."""
        low, high = _below(scope)
        return self._rows(
            f"SELECT {_COLUMNS} FROM words JOIN files f ON f.id = words.rowid WHERE words MATCH ? "
            f"AND f.path > ? AND f.path < ? ORDER BY bm25(words, {NAME_WEIGHT}, 1.0), f.path LIMIT ? OFFSET ?",
            (match_expression(tokens), low, high, limit, offset))

    def by_kind(self, kind: str, scope: str, *, limit: int, offset: int) -> list[StoredFile]:
        low, high = _below(scope)
        return self._rows(f"SELECT {_COLUMNS} FROM files f WHERE f.kind = ? AND f.path > ? AND f.path < ? "
                          "ORDER BY f.path LIMIT ? OFFSET ?", (kind, low, high, limit, offset))

    def recent(self, scope: str, since: float, *, limit: int, offset: int) -> list[StoredFile]:
        low, high = _below(scope)
        # SQLite's planner (without stat4) takes the path range and sorts every file under the scope: fine for a
        # small directory, ~60 ms for a root of 100,000 files. A scope holding many files is read newest first
        # through the modification-time index instead, which finds `limit` of its files after few rows.
        many = self._reader().execute(
            "SELECT count(*) FROM (SELECT 1 FROM files WHERE path > ? AND path < ? LIMIT ?)",
            (low, high, _MANY_FILES)).fetchone()[0] >= _MANY_FILES
        index = "INDEXED BY files_by_modified " if many else ""
        return self._rows(f"SELECT {_COLUMNS} FROM files f {index}WHERE f.modified >= ? AND f.path > ? "
                          "AND f.path < ? ORDER BY f.modified DESC, f.path LIMIT ? OFFSET ?",
                          (since, low, high, limit, offset))

    def size_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal"):
            with contextlib.suppress(OSError):
                total += os.stat(f"{self.path}{suffix}").st_size
        return total

    def _rows(self, sql: str, parameters: tuple[object, ...]) -> list[StoredFile]:
        return [StoredFile(*row) for row in self._reader().execute(sql, parameters)]

    def _reader(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            if self._closed:
                raise sqlite3.ProgrammingError("the search index is closed")
            connection = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
            self._configure(connection)
            self._local.connection = connection
            with self._readers_lock:
                self._readers.append(connection)
        return connection

    def close(self) -> None:
        self._closed = True
        with self._readers_lock:
            for connection in self._readers:
                connection.close()
            self._readers.clear()
        with self._write_lock:
            self._writer.close()


def _below(path: str) -> tuple[str, str]:
    """The bounds (exclusive) of the paths strictly below `path`: "path/" < p < "path0" ("0" follows "/")."""
    prefix = path.rstrip("/") + "/"
    return prefix, prefix[:-1] + "0"


def _create_private(path: Path) -> None:
    """Create the file with mode 0600 before SQLite opens it (SQLite gives its -wal and -shm files the same
    mode). An existing file wider than that is narrowed, and said in the log."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        st = os.lstat(path)
        if st.st_mode & 0o077:
            logger.warning("search index %s was readable by others (mode %o); making it 0600", path,
                           st.st_mode & 0o777)
            os.chmod(path, 0o600, follow_symlinks=False)
        return
    os.close(fd)
