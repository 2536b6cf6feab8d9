"""Changing a file in a workspace atomically, and reading the text file a change starts from.

`replace_file` writes the new content to a temporary file beside the target (created through the directory fd
that PathSanitizer.open_parent returns, never by a path string), makes it durable, gives it the mode and owner
the file must have, and renames it over the target; a reader sees the old content or the new, never a part, and
a failure at any step leaves the original untouched and no temporary file behind.

With `expected_sha256` the file must still hold what the caller read. The check runs after the temporary file is
written, just before the rename, and also compares the hashed file's device and inode with the name about to be
replaced. What remains is the window between that check and rename(2), microseconds: a process that changes the
file then has its change replaced, and one that holds the old file open goes on writing into the old inode, now
nameless. Only a lock every writer honours would close it; editors do not take one, so none is taken here.

A ChangeGate lets the call that waits for a change give it up (its time ran out) until the rename, and only
until then: a change is either abandoned before anything was replaced, or made and reported as made.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
import threading
from dataclasses import dataclass
from typing import Final

from ..errors import UnsafePathError
from .paths import FileStateError, OpenedParent, quoted
from .workspace_set import ServedWorkspace

NEW_FILE_MODE: Final = 0o644  # exactly, whatever the server's umask: as for a file an editor creates
_TEMPORARY_MODE: Final = 0o600  # while its content is incomplete
_CREATE_TEMPORARY: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_TEMPORARY_ATTEMPTS: Final = 8
_READ_CHUNK: Final = 1 << 20

# A write that fails for want of room: ENOSPC (the filesystem is full), EDQUOT (the user's quota), EFBIG (past
# the filesystem's largest file or the server's RLIMIT_FSIZE).
_NO_ROOM: Final = {
    errno.ENOSPC: "there is no space left on the filesystem of workspace {workspace!r}",
    errno.EDQUOT: "the disk quota of the server's user on workspace {workspace!r} is used up",
    errno.EFBIG: "the file would be larger than the filesystem or the server's file size limit allows",
}


class ChangeAbandoned(Exception):
    """The call gave up the change (ChangeGate.abandon) before its file was replaced: nothing was changed."""


class ChangeGate:
    """Shared by a change running in a thread and the call waiting for it: `abandon` (the call, whose time ran
    out) succeeds only before the change's `commit` (the thread, just before the rename); after it, the change
    is made whatever happens to the call, which must then wait for its answer."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = "open"

    def commit(self) -> None:
        """Called right before the rename: ChangeAbandoned if the call gave the change up."""
        with self._lock:
            if self._state == "abandoned":
                raise ChangeAbandoned
            self._state = "committed"

    def abandon(self) -> bool:
        """Give the change up: True when it will not be made, False when it is made already."""
        with self._lock:
            if self._state == "committed":
                return False
            self._state = "abandoned"
            return True


@dataclass(frozen=True, slots=True)
class Written:
    """What replace_file did: the file's path from the workspace root (after symlinks, as shown: shown_name), its
    new size and sha256 (lowercase hex), and whether it was created."""

    relative: str
    size: int
    sha256: str
    created: bool


@dataclass(frozen=True, slots=True)
class CurrentText:
    """A text file as read whole before a change: its path as shown (shown_name), its content, and the sha256
    of its bytes."""

    relative: str
    text: str
    sha256: str


def replace_file(served: ServedWorkspace, path: str, content: bytes, *, argument: str = "path",
                 expected_sha256: str | None = None, gate: ChangeGate | None = None) -> Written:
    """Make `path` hold `content`, atomically (see the module docstring). Parents are created unless
    expected_sha256 is given (the file must then exist, so its directory does). An existing file keeps its mode
    and owner (set-ID bits dropped); a new one is NEW_FILE_MODE and belongs to the workspace's owner.

    Raises FileStateError FILE_TOO_LARGE (before anything is touched), STALE_FILE, NO_SPACE,
    WORKSPACE_READ_ONLY (a filesystem mounted read-only) or one of the sanitizer's codes; UnsafePathError for a
    path that leaves the workspace or names a device, FIFO or socket; ChangeAbandoned when `gate` was
    abandoned before the rename.
    """
    check_size(served, len(content), path)
    try:
        parent = served.paths.open_parent(path, argument=argument, create_parents=expected_sha256 is None,
                                          owner=served.owner)
    except FileStateError as exc:
        if expected_sha256 is not None and exc.code == "FILE_NOT_FOUND":
            raise _deleted(path) from None
        raise
    except OSError as exc:  # making a parent directory
        raise _failure_of(exc, served, path) from None
    with parent:
        try:
            return _replace_in(served, parent, path, argument, content, expected_sha256, gate)
        except OSError as exc:
            raise _failure_of(exc, served, parent.relative) from None


def read_text(served: ServedWorkspace, path: str, *, argument: str = "path") -> CurrentText:
    """The whole of the text file `path`, to be changed and written back: FILE_TOO_LARGE past the workspace's
    max_file_bytes, BINARY_FILE when it holds a NUL byte or is not UTF-8."""
    with served.paths.open(path, argument=argument, kind="file") as opened:
        check_size(served, opened.stat.st_size, opened.relative)
        data = _read_at_most(opened.fd, served.workspace.max_file_bytes + 1)
        check_size(served, len(data), opened.relative)  # it grew since the stat
        relative = opened.relative
    if b"\0" in data:
        raise FileStateError("BINARY_FILE", f"{quoted(relative)} is a binary file (it holds NUL bytes); only text "
                                            "files can be edited")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileStateError("BINARY_FILE", f"{quoted(relative)} is not UTF-8 text (byte {exc.start} cannot be "
                                            "decoded); only UTF-8 text files can be edited") from None
    return CurrentText(relative, text, hashlib.sha256(data).hexdigest())


def check_size(served: ServedWorkspace, size: int, relative: str) -> None:
    """FILE_TOO_LARGE when a file of `size` bytes is more than the workspace allows."""
    limit = served.workspace.max_file_bytes
    if size > limit:
        raise FileStateError("FILE_TOO_LARGE", (
            f"{quoted(relative)} would have {size} bytes, more than workspace {served.name!r} allows for a file "
            f"({limit} bytes, its max_file_bytes); only a smaller file can be written or edited"))


def _replace_in(served: ServedWorkspace, parent: OpenedParent, path: str, argument: str, content: bytes,
                expected_sha256: str | None, gate: ChangeGate | None) -> Written:
    existing = _existing(parent, argument)
    if existing is None and expected_sha256 is not None:
        raise _deleted(parent.relative)
    temporary = _write_temporary(parent, content, *_mode_and_owner(served, existing))
    try:
        if expected_sha256 is not None:
            _check_unchanged(served, parent, path, argument, expected_sha256)
        if gate is not None:
            gate.commit()
        os.replace(temporary, parent.name, src_dir_fd=parent.fd, dst_dir_fd=parent.fd)
    except BaseException:
        _discard(parent, temporary)
        raise
    # The rename is durable only once the directory is: without this a crash could bring back the old file.
    try:
        os.fsync(parent.fd)
    except OSError as exc:  # not a failure to write: the file is replaced already, so no NO_SPACE
        raise RuntimeError(f"{quoted(parent.relative)} was replaced but its directory could not be synced") from exc
    return Written(parent.relative, len(content), hashlib.sha256(content).hexdigest(), existing is None)


def _existing(parent: OpenedParent, argument: str) -> os.stat_result | None:
    """The regular file to be replaced, or None when there is none (a symlink swapped in since the walk counts
    as none: the rename replaces the link itself, inside the directory already held)."""
    try:
        found = os.stat(parent.name, dir_fd=parent.fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    mode = found.st_mode
    if stat.S_ISDIR(mode):
        raise FileStateError("IS_A_DIRECTORY", f"{quoted(parent.relative)} is a directory, not a file")
    if stat.S_ISLNK(mode):
        return None
    if not stat.S_ISREG(mode):
        raise UnsafePathError(argument, f"{quoted(parent.relative)} is a device file, FIFO or socket; only "
                                        "regular files can be written")
    return found


def _mode_and_owner(served: ServedWorkspace, existing: os.stat_result | None) -> tuple[int, tuple[int, int] | None]:
    """The new file's permission bits (an existing file's, set-ID bits aside), and (uid, gid) to give it, or None
    to leave it the server's."""
    if existing is None:
        return NEW_FILE_MODE, served.owner
    # Set-user-ID and set-group-ID are dropped, as the kernel drops them when an unprivileged user writes to
    # such a file: new content must not run with the rights the old content was trusted with.
    mode = stat.S_IMODE(existing.st_mode) & ~(stat.S_ISUID | stat.S_ISGID)
    if os.geteuid() == 0:
        return mode, (existing.st_uid, existing.st_gid)
    # Not root: the file stays the server's user's; its group is kept where the user may still give it that one.
    return mode, ((-1, existing.st_gid) if existing.st_gid != os.getegid() else None)


def _write_temporary(parent: OpenedParent, content: bytes, mode: int, owner: tuple[int, int] | None) -> str:
    """A new file in the parent directory, under a random name, holding `content` durably with `mode` and
    `owner`: the name returned."""
    for _ in range(_TEMPORARY_ATTEMPTS):
        name = f".toolhost-{secrets.token_hex(8)}.tmp"
        try:
            fd = os.open(name, _CREATE_TEMPORARY, _TEMPORARY_MODE, dir_fd=parent.fd)
            break
        except FileExistsError:
            continue
    else:
        raise FileStateError("FILE_CHANGED", f"no temporary file could be created beside {quoted(parent.relative)}; "
                                             "try again")
    try:
        try:
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view):]
            if owner is not None:
                try:
                    os.fchown(fd, *owner)
                except PermissionError:
                    if owner[0] != -1:  # only keeping the group is a courtesy a non-root server may be refused
                        raise
            os.fchmod(fd, mode)  # after fchown, which clears the set-user-ID and set-group-ID bits
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        _discard(parent, name)
        raise
    return name


def _check_unchanged(served: ServedWorkspace, parent: OpenedParent, path: str, argument: str,
                     expected_sha256: str) -> None:
    """STALE_FILE unless the file `path` names hashes to `expected_sha256` and is the one about to be replaced."""
    try:
        opened = served.paths.open(path, argument=argument, kind="file")
    except FileStateError as exc:
        if exc.code == "FILE_NOT_FOUND":
            raise _deleted(parent.relative) from None
        raise
    with opened:
        digest = _sha256_of(opened.fd)
        try:
            named = os.stat(parent.name, dir_fd=parent.fd, follow_symlinks=False)
        except FileNotFoundError:
            raise _deleted(parent.relative) from None
        if (named.st_dev, named.st_ino) != (opened.stat.st_dev, opened.stat.st_ino):
            raise FileStateError("STALE_FILE", f"{quoted(parent.relative)} was replaced by another file while being "
                                               "written; read it again and redo the change on what it holds now")
    check_expected(parent.relative, digest, expected_sha256)


def check_expected(relative: str, sha256: str, expected_sha256: str | None) -> None:
    """STALE_FILE when the file's `sha256` is not the one the caller read it with."""
    if expected_sha256 is not None and sha256 != expected_sha256:
        raise FileStateError("STALE_FILE", (
            f"{quoted(relative)} changed since it was read: its sha256 is now {sha256}, not the expected_sha256 "
            f"{expected_sha256}; read it again and redo the change on what it holds now"))


def _deleted(relative: str) -> FileStateError:
    return FileStateError("STALE_FILE", (
        f"{quoted(relative)} was deleted since it was read (expected_sha256 was given, so it must still exist); "
        "read the workspace again, or write without expected_sha256 to create it"))


def _failure_of(exc: OSError, served: ServedWorkspace, relative: str) -> Exception:
    """The tool's failure for an OSError of writing, or the error itself when it is no state of the file."""
    if exc.errno in _NO_ROOM:
        reason = _NO_ROOM[exc.errno].format(workspace=served.name)
        return FileStateError("NO_SPACE", f"{quoted(relative)} was not written: {reason}. The original is intact; free "
                                          "some space (or write less) and try again")
    if exc.errno == errno.EROFS:
        return FileStateError("WORKSPACE_READ_ONLY", f"{quoted(relative)} was not written: the filesystem of workspace "
                                                     f"{served.name!r} is mounted read-only")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return FileStateError("ACCESS_DENIED", f"{quoted(relative)} may not be written by the server's user")
    return exc


def _discard(parent: OpenedParent, temporary: str) -> None:
    with contextlib.suppress(OSError):  # already gone; nothing else can be done about a leftover here
        os.unlink(temporary, dir_fd=parent.fd)


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = os.read(fd, min(_READ_CHUNK, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _sha256_of(fd: int) -> str:
    digest = hashlib.sha256()
    while chunk := os.read(fd, _READ_CHUNK):
        digest.update(chunk)
    return digest.hexdigest()
