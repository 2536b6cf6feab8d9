"""The auth file in use: read at start, read again when it changes, its last good version kept on a bad edit."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from .auth_file import AuthFileError, AuthTable, read_auth_file
from .file_changes import FileChanges

logger = logging.getLogger("toolhost.auth")


class ReloadingAuthFile:
    """`current()` is the newest good version of the file. A change is noticed at the next request (a stat()
    per request, no watcher thread), so an edit applies from the very next call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._changes = FileChanges([path])
        self._table = read_auth_file(path)  # AuthFileError: a server must not start without its rights table
        self._lock = threading.Lock()

    def current(self) -> AuthTable:
        if not self._changes.changed():
            return self._table
        with self._lock:
            if self._changes.changed():
                self._reload()
            return self._table

    def _reload(self) -> None:
        self._changes.mark_seen()
        try:
            self._table = read_auth_file(self.path)
        except AuthFileError as exc:
            logger.error("auth file not reloaded, keeping its last good version: %s", exc)
            return
        logger.info("auth file %s reloaded: %d roles, %d tokens, %d certificate entries", self.path,
                    len(self._table.roles), len(self._table.token_callers),
                    len(self._table.common_name_callers) + len(self._table.san_callers))
