"""Resolves a caller's path inside a workspace and opens it without ever opening anything outside, races included.

Each component is opened relative to the directory before it (O_PATH | O_NOFOLLOW), so the kernel follows no
symlink for us: a symlink is read (readlinkat) and its target walked the same way, component by component; `..`
returns to a directory this walk opened itself and cannot pass the root; an absolute target must lie under the
root. Whatever is swapped in between two steps, each step opens one name inside a directory already held, so a
symlink swapped in mid-walk is seen as a symlink and judged like any other. The last step reopens what it found
(a directory through ".", a file by name with O_NOFOLLOW, then compared by device and inode) so that the caller
gets a readable fd of exactly what was checked. Devices, FIFOs and sockets are refused without ever being opened
for reading (O_PATH has no side effects, and does not block on a FIFO).

A walk holds the root and at most HELD_DIRECTORIES of the directories it passed (what `..` returns to); a
`..` beyond them reopens the parent by its names from the root, each step as checked as the first walk's, so a
deep path costs a bounded number of descriptors. A path has at most MAX_COMPONENTS components (a 4095-byte path
could have 2,048), and a walk that made directories (create_parents) and then fails removes them again.

Not covered: a directory the walk holds that is renamed out of the root meanwhile (openat2's RESOLVE_BENEATH
detects that; Python has no binding for it). Only someone who can write both inside and outside the root can
do that, and such a user has no need of the server to reach the outside.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import deque
from dataclasses import dataclass
from typing import Literal

from ..errors import UnsafePathError

MAX_SYMLINKS = 40  # as Linux's path walk (MAXSYMLINKS)
MAX_PATH_BYTES = 4095  # PATH_MAX less the terminating NUL
MAX_NAME_BYTES = 255  # NAME_MAX
# Components of one path argument ("a/b/../c" has four): far more than any real tree is deep, far fewer than the
# 2,048 a path of MAX_PATH_BYTES can hold, which would cost a lookup (and a directory, with create_parents) each.
MAX_COMPONENTS = 256
# Directory fds a walk keeps besides the root's: what `..` returns to without walking from the root again.
HELD_DIRECTORIES = 16
_ATTEMPTS = 8  # walks repeated when what was found changed before it could be reopened

_O_PATH = getattr(os, "O_PATH", os.O_RDONLY | os.O_NONBLOCK)
_LOOKUP = _O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_READ_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# A directory just made, opened to be given away: by descriptor, never by name (fchown, not lchown).
_MADE_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

Kind = Literal["any", "file", "directory"]

_OUTSIDE_THROUGH_DOTS = ("leads outside the workspace (through '..', perhaps in a symlink's target); give a path "
                         "inside it")


def shown_name(name: str) -> str:
    """A file name or path as every workspace tool shows it, in answers and messages. Names are bytes: one that
    is not UTF-8 (os keeps its odd bytes as surrogate escapes, which no JSON string or protobuf can carry) shows
    them as \\xNN. Showing a shown name again changes nothing."""
    try:
        raw = os.fsencode(name)
    except UnicodeEncodeError:  # a lone surrogate that came as such from a caller's JSON, not from a file name
        raw = name.encode("utf-8", "backslashreplace")
    return raw.decode("utf-8", "backslashreplace")


def quoted(name: str) -> str:
    """`name` shown and quoted, for a message."""
    return f"'{shown_name(name)}'"


_SEE_LS = "ls (or glob) shows what is there"


class FileStateError(Exception):
    """The path is acceptable but the file is not as the operation needs it: a tool reports this as its own
    failure (success=false) with `code`, never as a refused argument.

    Codes: FILE_NOT_FOUND, IS_A_DIRECTORY, NOT_A_DIRECTORY, ACCESS_DENIED, FILE_CHANGED (kept changing while
    being opened), WORKSPACE_MISSING (the workspace directory itself is gone).
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _Changed(Exception):
    """What the walk found changed before it could be reopened: walk again."""


@dataclass(frozen=True, slots=True)
class OpenedPath:
    """A file or directory opened for reading; `relative` is its path from the workspace root ("." for the root),
    resolved through symlinks, as shown (shown_name), for answers and messages. Close it (or use it as a context
    manager)."""

    fd: int
    relative: str
    stat: os.stat_result

    @property
    def is_directory(self) -> bool:
        return stat.S_ISDIR(self.stat.st_mode)

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> OpenedPath:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@dataclass(frozen=True, slots=True)
class OpenedParent:
    """The directory that holds (or will hold) `name`, opened for reading (so it can be fsynced), for creating or
    replacing `name` atomically: a temporary file made with dir_fd=fd, then
    os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd). `relative` is the target's path from the root, as shown
    (shown_name)."""

    fd: int
    name: str
    relative: str

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> OpenedParent:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class PathSanitizer:
    """Opens the paths callers give, confined to the directory `root`::

        sanitizer = PathSanitizer(workspace.path)
        with sanitizer.open(arguments["path"], argument="path", kind="file") as opened:
            data = os.read(opened.fd, 4096)

    A path is relative to the root, or absolute when it lies under the root (as configured or as resolved).
    Refusals are UnsafePathError (INVALID_ARGUMENT naming `argument`); a missing file or one of the wrong kind is
    FileStateError. The root itself is the operator's choice: a symlink there is followed.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.path.normpath(os.fspath(root))

    def open(self, path: object, *, argument: str = "path", kind: Kind = "any") -> OpenedPath:
        """`path` opened for reading: a regular file, or a directory (for listing, with os.scandir(fd))."""
        parts = self._parts(path, argument)
        for _ in range(_ATTEMPTS):
            try:
                return self._open(parts, argument, kind)
            except _Changed:
                continue
        raise FileStateError("FILE_CHANGED", f"{quoted(str(path))} kept changing while being opened; try again")

    def open_parent(self, path: object, *, argument: str = "path", create_parents: bool = False,
                    owner: tuple[int, int] | None = None) -> OpenedParent:
        """The directory in which `path` is to be created or replaced. An existing symlink as the last component
        is followed (inside the root only), so that writing through it changes its target, as `>` in a shell.
        Directories that create_parents makes are given to `owner` (uid, gid) when one is given."""
        parts = self._parts(path, argument)
        for _ in range(_ATTEMPTS):
            try:
                return self._open_parent(parts, argument, create_parents, owner)
            except _Changed:
                continue
        raise FileStateError("FILE_CHANGED", f"{quoted(str(path))} kept changing while being opened; try again")

    # The shape of the argument, before any file is touched.

    def _parts(self, path: object, argument: str) -> list[str]:
        if not isinstance(path, str):
            raise UnsafePathError(argument, "must be a string: a path relative to the workspace root")
        if not path:
            raise UnsafePathError(argument, "is empty; give a path relative to the workspace root ('.' for the "
                                            "root itself)")
        if "\x00" in path:
            raise UnsafePathError(argument, "holds a NUL character, which no file name may contain")
        if len(os.fsencode(path)) > MAX_PATH_BYTES:
            raise UnsafePathError(argument, f"is longer than {MAX_PATH_BYTES} bytes; give a shorter path")
        parts = path.split("/")
        if sum(part not in ("", ".") for part in parts) > MAX_COMPONENTS:
            raise UnsafePathError(argument, f"has more than {MAX_COMPONENTS} components (names and '..'); no "
                                            "workspace is that deep: give a shorter path")
        if path.startswith("/"):
            inside = self._under_root(parts)
            if inside is None:
                raise UnsafePathError(argument, f"{path!r} is outside the workspace; give a path relative to its "
                                                f"root, or an absolute path under {self.root}")
            parts = inside
        depth = 0
        for part in parts:
            if len(os.fsencode(part)) > MAX_NAME_BYTES:
                raise UnsafePathError(argument, f"has a component longer than {MAX_NAME_BYTES} bytes "
                                                f"({part[:32]!r}...); no file can have such a name")
            depth += -1 if part == ".." else 0 if part in ("", ".") else 1
            if depth < 0:  # refused before the walk, so that create_parents makes nothing first
                raise UnsafePathError(argument, _OUTSIDE_THROUGH_DOTS)
        return parts

    def _under_root(self, parts: list[str]) -> list[str] | None:
        """The components after the root, when the absolute path `parts` (split on "/") starts with it."""
        names = [p for p in parts if p not in ("", ".")]
        for root in dict.fromkeys((self.root, os.path.realpath(self.root))):
            prefix = [p for p in root.split("/") if p]
            if names[:len(prefix)] == prefix:
                return names[len(prefix):]
        return None

    # The walk.

    def _open(self, parts: list[str], argument: str, kind: Kind) -> OpenedPath:
        walk = _Walk(self, argument)
        try:
            st, name = walk.run(parts, stop_before_last=False, create=False)
            relative = walk.relative(name)
            _refuse_special(st, argument, relative)
            if stat.S_ISDIR(st.st_mode):
                if kind == "file":
                    raise FileStateError("IS_A_DIRECTORY", f"'{relative}' is a directory, not a file; ls lists "
                                                           "what it holds")
                # "." of the directory found: the same inode, whatever has happened to its name since.
                fd = _reopen(".", _READ_DIRECTORY, walk.directory, relative)
            else:
                if kind == "directory":
                    raise FileStateError("NOT_A_DIRECTORY", f"'{relative}' is a file, not a directory; read "
                                                            "shows its content, ls lists its directory")
                fd = _reopen(name, _READ_FILE, walk.directory, relative)
                try:
                    opened = os.fstat(fd)
                    if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
                        raise _Changed
                    os.set_blocking(fd, True)
                except BaseException:
                    os.close(fd)
                    raise
            return OpenedPath(fd, relative, os.fstat(fd))
        finally:
            walk.close()

    def _open_parent(self, parts: list[str], argument: str, create_parents: bool,
                     owner: tuple[int, int] | None) -> OpenedParent:
        walk = _Walk(self, argument, owner)
        try:  # the directories it makes are removed again unless the parent is opened
            _, name = walk.run(parts, stop_before_last=True, create=create_parents)
            relative = walk.relative(name)
            if not name:
                raise FileStateError("IS_A_DIRECTORY", f"'{relative}' is a directory, not a file; give the path "
                                                       "of a file in it")
            opened = OpenedParent(_reopen(".", _READ_DIRECTORY, walk.directory, relative), name, relative)
        except BaseException:
            walk.remove_made()
            raise
        finally:
            walk.close()
        return opened


class _Walk:
    """One resolution: the names from the root to where it stands, the root's O_PATH fd and those of the last
    HELD_DIRECTORIES directories passed (`stack`: stack[1:] are the last names' directories), and the
    directories it made (as their names from the root)."""

    def __init__(self, sanitizer: PathSanitizer, argument: str, owner: tuple[int, int] | None = None) -> None:
        self.sanitizer = sanitizer
        self.argument = argument
        self.owner = owner  # of the directories the walk makes
        try:
            root = os.open(sanitizer.root, _O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise FileStateError("WORKSPACE_MISSING", "the workspace directory is gone; ask the operator "
                                                      "to restore it") from None
        self.stack = [root]
        self.names: list[str] = []
        self.made: list[tuple[str, ...]] = []

    @property
    def directory(self) -> int:
        return self.stack[-1] if len(self.stack) > 1 or not self.names else self._reheld()

    def relative(self, name: str) -> str:
        """The path to `name` in the current directory, from the root, as shown (shown_name)."""
        return shown_name("/".join([*self.names, name] if name else self.names) or ".")

    def _descend(self, fd: int, name: str) -> None:
        self.stack.append(fd)
        self.names.append(name)
        if len(self.stack) > HELD_DIRECTORIES + 1:
            os.close(self.stack.pop(1))

    def _ascend(self) -> None:
        if not self.names:
            raise UnsafePathError(self.argument, _OUTSIDE_THROUGH_DOTS)
        if len(self.stack) > 1:
            os.close(self.stack.pop())
        self.names.pop()

    def _reheld(self) -> int:
        """The current directory's fd when `..` went past the directories held: walked to again by its names."""
        self.stack.append(self._walk_names(tuple(self.names)))
        return self.stack[-1]

    def _walk_names(self, names: tuple[str, ...]) -> int:
        """An O_PATH fd of the directory `names` lead to from the root, each step a directory, no symlink
        followed; _Changed when that no longer holds (the whole walk is then made again)."""
        fd = os.dup(self.stack[0])
        try:
            for name in names:
                try:
                    step = os.open(name, _LOOKUP, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                        raise _Changed from None
                    raise _state_error(exc, self.argument, self.relative(name)) from None
                os.close(fd)
                fd = step
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    raise _Changed
        except BaseException:
            os.close(fd)
            raise
        return fd

    def remove_made(self) -> None:
        """Remove the directories this walk made (the deepest first): it failed, and must leave nothing behind.
        rmdir removes only an empty directory, so nothing anyone put there meanwhile is lost."""
        for names in reversed(self.made):
            try:
                parent = self._walk_names(names[:-1])
            except (_Changed, OSError, FileStateError, UnsafePathError):
                continue
            try:
                os.rmdir(names[-1], dir_fd=parent)
            except OSError:
                pass  # no longer empty, or gone: either way not ours to remove
            finally:
                os.close(parent)
        self.made.clear()

    def close(self) -> None:
        for fd in self.stack:
            os.close(fd)
        self.stack = []

    def run(self, parts: list[str], *, stop_before_last: bool, create: bool) -> tuple[os.stat_result, str]:
        """Walks `parts`. Returns (stat, name) of the last component: a non-directory is `name` in
        self.directory; a directory is self.directory itself, with name "". With stop_before_last, the last name
        is not opened, only followed when it is a symlink; the stat is then self.directory's."""
        pending = deque(parts)
        links = 0
        while pending:
            name = pending.popleft()
            if name in ("", "."):
                continue
            if name == "..":
                self._ascend()
                continue
            last = not any(p not in ("", ".") for p in pending)
            if last and stop_before_last:
                if pending:
                    raise UnsafePathError(self.argument, "ends with '/'; give the name of a file to write")
                target = _link_target(name, self.directory)
                if target is None:
                    if _is_directory(name, self.directory):
                        raise FileStateError("IS_A_DIRECTORY", f"'{self.relative(name)}' is a directory, not a "
                                                               "file; give the path of a file in it")
                    return os.fstat(self.directory), name
            else:
                fd = self._lookup(name, create and not last)
                st = os.fstat(fd)
                if not stat.S_ISLNK(st.st_mode):
                    if stat.S_ISDIR(st.st_mode):
                        self._descend(fd, name)
                        continue
                    os.close(fd)
                    if pending:  # not last, or last with a trailing "/" that asks for a directory
                        raise FileStateError("NOT_A_DIRECTORY", f"'{self.relative(name)}' is a file, so nothing "
                                                                f"can be inside it; {_SEE_LS}")
                    return st, name
                os.close(fd)
                target = _link_target(name, self.directory)
                if target is None:
                    raise _Changed  # a symlink when opened, no longer one when read
            links += 1
            if links > MAX_SYMLINKS:
                raise UnsafePathError(self.argument, f"passes through more than {MAX_SYMLINKS} symlinks (a loop?); "
                                                     "give the path of the file itself")
            self._follow(name, target, pending)
        return os.fstat(self.directory), ""

    def _follow(self, name: str, target: str, pending: deque[str]) -> None:
        if not target:
            raise FileStateError("FILE_NOT_FOUND", f"'{self.relative(name)}' is a symlink to nothing; {_SEE_LS}")
        parts = target.split("/")
        if target.startswith("/"):
            inside = self.sanitizer._under_root(parts)
            if inside is None:
                raise UnsafePathError(self.argument, f"goes through the symlink '{self.relative(name)}', which "
                                                     "points outside the workspace; give a path inside it")
            for fd in self.stack[1:]:
                os.close(fd)
            del self.stack[1:]
            self.names.clear()
            parts = inside
        pending.extendleft(reversed(parts))

    def _lookup(self, name: str, create: bool) -> int:
        try:
            return os.open(name, _LOOKUP, dir_fd=self.directory)
        except FileNotFoundError:
            if not create:
                raise FileStateError("FILE_NOT_FOUND", f"'{self.relative(name)}' does not exist; {_SEE_LS}") \
                    from None
        except OSError as exc:
            raise _state_error(exc, self.argument, self.relative(name)) from None
        try:
            os.mkdir(name, 0o755, dir_fd=self.directory)
        except FileExistsError:
            return self._lookup(name, False)  # made meanwhile: looked up like any other
        except OSError as exc:
            raise _state_error(exc, self.argument, self.relative(name)) from None
        self.made.append((*self.names, name))
        if self.owner is not None:
            self._give_away(name)
        return self._lookup(name, False)

    def _give_away(self, name: str) -> None:
        """Give the directory just made as `name` to the owner: opened (no symlink followed, a directory only)
        and changed through its fd, so that what was swapped in under that name meanwhile (a hard link to
        someone's file) is never given away; a directory that is no longer the server's own is left alone."""
        assert self.owner is not None
        try:
            fd = os.open(name, _MADE_DIRECTORY, dir_fd=self.directory)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
                raise _Changed from None
            raise _state_error(exc, self.argument, self.relative(name)) from None
        try:
            if os.fstat(fd).st_uid == os.geteuid():
                os.fchown(fd, *self.owner)
        except OSError as exc:
            raise _state_error(exc, self.argument, self.relative(name)) from None
        finally:
            os.close(fd)


def _link_target(name: str, directory: int) -> str | None:
    """The symlink `name`'s target, or None when it is not a symlink (or no longer exists)."""
    try:
        return os.readlink(name, dir_fd=directory)
    except (OSError, ValueError):
        return None


def _is_directory(name: str, directory: int) -> bool:
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _reopen(name: str, flags: int, directory: int, relative: str) -> int:
    try:
        return os.open(name, flags, dir_fd=directory)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENXIO, errno.ENOTDIR):
            raise _Changed from None  # replaced since the walk saw it
        raise _state_error(exc, "", relative) from None


def _refuse_special(st: os.stat_result, argument: str, relative: str) -> None:
    mode = st.st_mode
    kind = ("a device file" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "")
    if kind:
        raise UnsafePathError(argument, f"{quoted(relative)} is {kind}; only regular files and directories can be used")


def _state_error(exc: OSError, argument: str, relative: str) -> Exception:
    if exc.errno == errno.ENAMETOOLONG:
        return UnsafePathError(argument or "path", "has a name too long for the filesystem; give a shorter path")
    if exc.errno == errno.EACCES or exc.errno == errno.EPERM:
        return FileStateError("ACCESS_DENIED", f"{quoted(relative)} may not be opened by the server's user")
    return exc
