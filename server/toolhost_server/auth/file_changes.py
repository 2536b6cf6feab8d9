"""Noticing that files changed, cheaply enough to ask on every request: their stat fields, and while those are
too recent to trust, their content.

A file rewritten twice within one tick of the filesystem clock (a few milliseconds) keeps its mtime, and with
the same size and inode its stat fields do not change at all. Like git's "racily clean" index entries, a file
whose mtime is that recent is therefore compared by content until its mtime is old enough to tell edits apart.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# Far longer than any filesystem's timestamp granularity (ext4 and tmpfs: one kernel tick; FAT: 2 s).
_TRUSTED_AGE_NS = 3_000_000_000


@dataclass(frozen=True, slots=True)
class FileStamp:
    """What changes when a file is rewritten in place (size, mtime) or replaced (device, inode), including a
    Kubernetes Secret update, which swaps a symlink: stat() follows it to the new file."""

    device: int
    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: Path) -> FileStamp | None:
        """The file's stamp now, or None when it cannot be stat()ed (being replaced, or gone)."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class FileChanges:
    """Whether any of `paths` changed since `mark_seen()`. Call `mark_seen()` before reading the files, so an
    edit landing during the read counts as a change next time."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self._paths = tuple(paths)
        self._stamps: tuple[FileStamp | None, ...] = ()
        self._digests: tuple[str, ...] | None = None
        self.mark_seen()

    def mark_seen(self) -> None:
        self._stamps = self._current_stamps()
        self._digests = self._current_digests() if self._too_recent(self._stamps) else None

    def changed(self) -> bool:
        """True when a file changed; False also while one is missing (it is being replaced: wait for it)."""
        stamps = self._current_stamps()
        if None in stamps:
            return False
        if stamps != self._stamps:
            return True
        if self._digests is None:
            return False
        if self._current_digests() != self._digests:
            return True
        if not self._too_recent(stamps):
            self._digests = None  # from now on any edit gets a later mtime: the stat fields suffice
        return False

    def _current_stamps(self) -> tuple[FileStamp | None, ...]:
        return tuple(FileStamp.of(path) for path in self._paths)

    def _current_digests(self) -> tuple[str, ...]:
        digests = []
        for path in self._paths:
            try:
                digests.append(hashlib.sha256(path.read_bytes()).hexdigest())
            except OSError:
                digests.append("")
        return tuple(digests)

    @staticmethod
    def _too_recent(stamps: tuple[FileStamp | None, ...]) -> bool:
        now = time.time_ns()
        return any(stamp is not None and now - stamp.mtime_ns < _TRUSTED_AGE_NS for stamp in stamps)
