"""Walking a search root, and finding one path in it again, through file descriptors only.

Each directory is opened relative to its parent with O_NOFOLLOW | O_DIRECTORY, so the walk never enters a
symlink, even one swapped in after the listing saw a directory; symlinks are neither followed nor indexed (what
one points at inside the root is indexed under its own path). Only regular files are yielded: devices, FIFOs
and sockets are never opened. Names that are not valid UTF-8 are skipped and counted: the index and the tools'
JSON answers hold text. The walk starts from an fd the root's PathSanitizer opened, so the root itself is
resolved the one way every tool resolves it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

from .exclusion import Exclusions

# Directories below this depth are not entered: each level holds an fd open while the walk is below it.
MAX_DEPTH: Final = 128

_OPEN_DIRECTORY: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_LOOK_UP_DIRECTORY: Final = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_FILE: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NOATIME: Final = getattr(os, "O_NOATIME", 0)


@dataclass(slots=True)
class WalkCounts:
    """What a walk met besides the files it yielded."""

    directories: int = 0
    unreadable_directories: int = 0
    too_deep: int = 0
    undecodable_names: int = 0


@dataclass(frozen=True, slots=True)
class WalkedFile:
    """A regular file found by the walk: `relative` from the root, and the open directory holding it (valid
    until the walk moves on: open the file with dir_fd=directory_fd before taking the next one)."""

    relative: str
    name: str
    stat: os.stat_result
    directory_fd: int


def walk_files(directory_fd: int, exclusions: Exclusions, *, prefix: str = "", counts: WalkCounts | None = None,
               should_stop: Callable[[], bool] | None = None) -> Iterator[WalkedFile]:
    """The regular files below the open directory `directory_fd`, whose path from the root is `prefix` ("" for
    the root itself, else ending in "/"), depth first. Excluded names are neither yielded nor entered.
    `should_stop()` true ends the walk early."""
    return _walk(directory_fd, prefix, 0, exclusions, counts or WalkCounts(), should_stop or _never)


def _never() -> bool:
    return False


def _walk(fd: int, prefix: str, depth: int, exclusions: Exclusions, counts: WalkCounts,
          should_stop: Callable[[], bool]) -> Iterator[WalkedFile]:
    counts.directories += 1
    try:
        listing = os.scandir(fd)
    except OSError:
        counts.unreadable_directories += 1
        return
    with listing:
        for entry in listing:
            if should_stop():
                return
            name = entry.name
            if not _is_text_name(name):
                counts.undecodable_names += 1
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:  # gone since it was listed
                continue
            if stat.S_ISDIR(st.st_mode):
                if exclusions.name(name, is_directory=True):
                    continue
                if depth >= MAX_DEPTH:
                    counts.too_deep += 1
                    continue
                try:
                    child = os.open(name, _OPEN_DIRECTORY, dir_fd=fd)
                except OSError:  # unreadable, gone, or swapped for a symlink (ELOOP) since it was listed
                    counts.unreadable_directories += 1
                    continue
                try:
                    yield from _walk(child, f"{prefix}{name}/", depth + 1, exclusions, counts, should_stop)
                finally:
                    os.close(child)
            elif stat.S_ISREG(st.st_mode) and not exclusions.name(name, is_directory=False):
                yield WalkedFile(f"{prefix}{name}", name, st, fd)


def _is_text_name(name: str) -> bool:
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # surrogate escapes: bytes that are not UTF-8
        return False
    return True


@dataclass(slots=True)
class Located:
    """A path found again beneath a root: the directory that holds it (opened O_PATH, enough to stat and open
    names in it), its last name and its lstat. Close it."""

    directory_fd: int
    name: str
    stat: os.stat_result

    def close(self) -> None:
        os.close(self.directory_fd)

    def __enter__(self) -> Located:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def locate(root_fd: int, relative: str) -> Located | None:
    """`relative` (a path from the root, without symlinks) looked up beneath the open root, no symlink followed
    on the way; None when it is gone, or a symlink now stands where a directory stood."""
    parts = [part for part in relative.split("/") if part not in ("", ".")]
    if not parts or ".." in parts:
        return None
    directory = os.dup(root_fd)
    try:
        for name in parts[:-1]:
            child = os.open(name, _LOOK_UP_DIRECTORY, dir_fd=directory)
            os.close(directory)
            directory = child
        st = os.stat(parts[-1], dir_fd=directory, follow_symlinks=False)
    except (OSError, ValueError):
        os.close(directory)
        return None
    return Located(directory, parts[-1], st)


def open_for_reading(directory_fd: int, name: str, expected: os.stat_result) -> int:
    """`name` in the directory opened for reading, without following a symlink or blocking on a FIFO, and
    without touching its access time where the server may; OSError when it cannot be read, FileNotFoundError
    when it is no longer the file `expected` describes."""
    flags = _OPEN_FILE | _NOATIME
    try:
        fd = os.open(name, flags, dir_fd=directory_fd)
    except PermissionError:
        if not _NOATIME:
            raise
        fd = os.open(name, _OPEN_FILE, dir_fd=directory_fd)  # O_NOATIME: owner or CAP_FOWNER only
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (expected.st_dev, expected.st_ino) or not stat.S_ISREG(opened.st_mode):
            raise FileNotFoundError(f"{name!r} was replaced while being indexed")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd
