"""What get_metadata says about one file, read from a descriptor its root's PathSanitizer opened (never by path):
size, times (birth time through statx where the filesystem records one), kind and MIME type, owner, group,
permissions, line count of a text file, and extended attribute names."""

from __future__ import annotations

import ctypes
import errno
import grp
import os
import pwd
import stat
from typing import Any

from .formatting import ResultFormatter
from .kinds import HEAD_BYTES, classify, is_text

MAX_LINE_COUNT_BYTES = 16 * 1024 * 1024  # a larger text file gets no line count: reading it all costs too much
_CHUNK_BYTES = 1024 * 1024

_AT_EMPTY_PATH = 0x1000
_STATX_BTIME = 0x800


class _StatxTimestamp(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_int64), ("tv_nsec", ctypes.c_uint32), ("reserved", ctypes.c_int32)]


class _Statx(ctypes.Structure):
    """struct statx of <linux/stat.h>, 256 bytes, up to the times this module reads."""

    _fields_ = [
        ("stx_mask", ctypes.c_uint32), ("stx_blksize", ctypes.c_uint32), ("stx_attributes", ctypes.c_uint64),
        ("stx_nlink", ctypes.c_uint32), ("stx_uid", ctypes.c_uint32), ("stx_gid", ctypes.c_uint32),
        ("stx_mode", ctypes.c_uint16), ("spare0", ctypes.c_uint16), ("stx_ino", ctypes.c_uint64),
        ("stx_size", ctypes.c_uint64), ("stx_blocks", ctypes.c_uint64), ("stx_attributes_mask", ctypes.c_uint64),
        ("stx_atime", _StatxTimestamp), ("stx_btime", _StatxTimestamp), ("stx_ctime", _StatxTimestamp),
        ("stx_mtime", _StatxTimestamp), ("rest", ctypes.c_uint8 * 128),
    ]


def _libc_statx() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True).statx  # glibc 2.28 and later
    except (OSError, AttributeError):
        return None


_statx = _libc_statx()


def birth_time(fd: int) -> float | None:
    """When the file was created, in epoch seconds, or None where the filesystem (or the platform) keeps no
    birth time. os.stat has st_birthtime only on BSD and macOS, hence statx on Linux."""
    birth: float | None = getattr(os.fstat(fd), "st_birthtime", None)
    if birth is not None or _statx is None:
        return birth
    buffer = _Statx()
    if _statx(fd, b"", _AT_EMPTY_PATH, _STATX_BTIME, ctypes.byref(buffer)) != 0:
        return None  # ENOSYS on an old kernel, or a seccomp filter that refuses statx
    if not buffer.stx_mask & _STATX_BTIME:
        return None
    seconds: int = buffer.stx_btime.tv_sec
    nanoseconds: int = buffer.stx_btime.tv_nsec
    return seconds + nanoseconds / 1e9


def _owner(uid: int) -> str | int:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return uid


def _group(gid: int) -> str | int:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return gid


def line_count(fd: int, size: int) -> int | None:
    """Lines of the file (a last line without a newline counts), or None when it is over MAX_LINE_COUNT_BYTES."""
    if size > MAX_LINE_COUNT_BYTES:
        return None
    lines = 0
    offset = 0
    last = b""
    while offset <= MAX_LINE_COUNT_BYTES:
        chunk = os.pread(fd, _CHUNK_BYTES, offset)
        if not chunk:
            break
        lines += chunk.count(b"\n")
        offset += len(chunk)
        last = chunk[-1:]
    if offset > MAX_LINE_COUNT_BYTES:
        return None  # grew past the cap while being read
    return lines + (1 if last and last != b"\n" else 0)


def extended_attribute_names(fd: int) -> list[str]:
    """The names of the file's extended attributes, sorted; [] where the filesystem has none."""
    try:
        return sorted(os.listxattr(fd))
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP, errno.EACCES, errno.EPERM):
            return []
        raise


def file_metadata(fd: int, path: str) -> dict[str, Any]:
    """The facts of the regular file open as `fd`, whose absolute path (as under its root) is `path`."""
    st = os.fstat(fd)
    head = os.pread(fd, HEAD_BYTES, 0)
    name = os.path.basename(path)
    kind, mime = classify(name, head)
    text = is_text(head)
    iso = ResultFormatter.iso8601
    return {
        "path": path,
        "name": name,
        "size": st.st_size,
        "created": iso(birth_time(fd)),
        "modified": iso(st.st_mtime),
        "accessed": iso(st.st_atime),
        "changed": iso(st.st_ctime),
        "kind": kind,
        "mime": mime,
        "owner": _owner(st.st_uid),
        "group": _group(st.st_gid),
        "permissions": f"{stat.S_IMODE(st.st_mode):04o}",
        "permissions_text": stat.filemode(st.st_mode)[1:],
        "line_count": line_count(fd, st.st_size) if text else None,
        "extended_attributes": extended_attribute_names(fd),
    }
