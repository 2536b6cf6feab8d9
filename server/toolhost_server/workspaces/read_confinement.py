"""Landlock for a child that reads a workspace (grep's rg): the kernel lets it read beneath the workspace and the
system's program directories only.

rg's own walk lists a directory, then opens each subdirectory by path: a directory swapped for a symlink to the
outside in between is followed, and no flag of rg's closes that window. Under this ruleset the kernel refuses
any read that does not land beneath the workspace (the swapped-in symlink resolves outside), whatever the walk
checked before. Reading files beneath /usr and /lib stays allowed (the loader maps rg's libraries after exec);
listing directories there does not.

The child applies the ruleset between fork and exec (`ReadConfinement.restrict_self`), with no_new_privs; where
the kernel has no Landlock, `confine_reads` returns None and the search runs with rg's own checks only (the
server says so once). Constants and structures follow linux/landlock.h, as runners/landlock.py does for writes.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import stat
from collections.abc import Iterable
from typing import Final

from ..runners.landlock import landlock_abi

logger = logging.getLogger("toolhost.workspaces")

_SYS_LANDLOCK_CREATE_RULESET: Final = 444
_SYS_LANDLOCK_ADD_RULE: Final = 445
_SYS_LANDLOCK_RESTRICT_SELF: Final = 446
_LANDLOCK_RULE_PATH_BENEATH: Final = 1
_PR_SET_NO_NEW_PRIVS: Final = 38
_READ_FILE: Final = 1 << 2  # LANDLOCK_ACCESS_FS_READ_FILE (opening a program to exec it needs it too)
_READ_DIR: Final = 1 << 3  # LANDLOCK_ACCESS_FS_READ_DIR
_HANDLED: Final = _READ_FILE | _READ_DIR
# What the child exits with when it could not restrict itself (the shell's "cannot execute").
RESTRICT_FAILED_EXIT: Final = 126
# Where a dynamically linked program and its libraries live; files there may be read, directories not listed.
SYSTEM_DIRECTORIES: Final = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/etc/ld.so.cache",
                             "/etc/ld.so.preload")


class _RulesetAttr(ctypes.Structure):
    _fields_ = (("handled_access_fs", ctypes.c_uint64),)


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
_prctl = _libc.prctl
_prctl.restype = ctypes.c_int
_said_unconfined = False


class ReadConfinement:
    """A ruleset ready for a child to apply to itself; close it once the child has started."""

    def __init__(self, ruleset_fd: int) -> None:
        self._ruleset_fd = ruleset_fd

    def restrict_self(self) -> None:
        """Run in the child between fork and exec. Never raises: a child that cannot restrict itself says why on
        its stderr and exits with RESTRICT_FAILED_EXIT rather than read unconfined."""
        if _prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or _syscall(
                ctypes.c_long(_SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(self._ruleset_fd), ctypes.c_uint32(0)) != 0:
            code = ctypes.get_errno()
            os.write(2, f"toolhost: could not confine the search's reads with Landlock: {os.strerror(code)}\n"
                        .encode())
            os._exit(RESTRICT_FAILED_EXIT)

    def close(self) -> None:
        if self._ruleset_fd >= 0:
            os.close(self._ruleset_fd)
            self._ruleset_fd = -1


def confine_reads(readable: Iterable[str], program: str) -> ReadConfinement | None:
    """A ruleset that lets a child read and list beneath the directories `readable` (which must exist), and read
    files of `program`'s directory and SYSTEM_DIRECTORIES; None when the kernel has no Landlock."""
    global _said_unconfined
    if landlock_abi() == 0:
        if not _said_unconfined:
            _said_unconfined = True
            logger.warning("this kernel offers no Landlock: grep's rg is kept in the workspace by its own walk "
                           "only, which a directory swapped for a symlink meanwhile can mislead")
        return None
    ruleset_fd = _checked(_syscall(ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET), ctypes.byref(_RulesetAttr(_HANDLED)),
                                   ctypes.c_size_t(ctypes.sizeof(_RulesetAttr)), ctypes.c_uint32(0)),
                          "landlock_create_ruleset")
    try:
        for path in readable:
            _allow(ruleset_fd, path, _HANDLED, required=True)
        for path in (os.path.dirname(os.path.realpath(program)), *SYSTEM_DIRECTORIES):
            _allow(ruleset_fd, path, _READ_FILE, required=False)
    except BaseException:
        os.close(ruleset_fd)
        raise
    return ReadConfinement(ruleset_fd)


def _allow(ruleset_fd: int, path: str, access: int, *, required: bool) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        if required:
            raise
        return
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= _READ_FILE  # a rule on a file carries file rights only
        rule = _PathBeneathAttr(access, fd)
        _checked(_syscall(ctypes.c_long(_SYS_LANDLOCK_ADD_RULE), ctypes.c_int(ruleset_fd),
                          ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH), ctypes.byref(rule), ctypes.c_uint32(0)),
                 f"landlock_add_rule for {path}")
    finally:
        os.close(fd)


def _checked(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno() or errno.EINVAL
        raise OSError(code, f"{what}: {os.strerror(code)}")
    return int(result)
