"""Landlock (Linux 5.13 and later): confining where a child process may write, with no privilege needed.

The parent builds a ruleset per call (`confine_writes`): the write-like access rights this kernel's Landlock
knows are handled, so denied everywhere except beneath the directories and on the files that rules allow. The
child applies it between fork and exec (`WriteConfinement.restrict_self`, a ChildCommand's `before_exec`): it sets
no_new_privs (no setuid program regains what the restriction withholds) and restricts itself; exec keeps both,
and every process it starts inherits them. Reading and executing stay allowed everywhere: those rights are not
handled. Where the kernel has no Landlock, `confine_writes` returns None and says so once in the log.

The system calls and their structures follow the kernel's uapi header linux/landlock.h; their numbers are the
same on every architecture (the unified table since Linux 5.1).
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import stat
import threading
from collections.abc import Iterable
from typing import Final

logger = logging.getLogger("toolhost.runners.landlock")

_SYS_LANDLOCK_CREATE_RULESET: Final = 444
_SYS_LANDLOCK_ADD_RULE: Final = 445
_SYS_LANDLOCK_RESTRICT_SELF: Final = 446
_LANDLOCK_CREATE_RULESET_VERSION: Final = 1 << 0
_LANDLOCK_RULE_PATH_BENEATH: Final = 1
_PR_SET_NO_NEW_PRIVS: Final = 38
# What the child exits with when it could not restrict itself: the shell's "cannot execute".
RESTRICT_FAILED_EXIT: Final = 126

# Access rights (LANDLOCK_ACCESS_FS_*) that change the filesystem, with the ABI version that introduced each.
_WRITE_FILE: Final = 1 << 1
_REMOVE_DIR: Final = 1 << 4
_REMOVE_FILE: Final = 1 << 5
_MAKE_CHAR: Final = 1 << 6
_MAKE_DIR: Final = 1 << 7
_MAKE_REG: Final = 1 << 8
_MAKE_SOCK: Final = 1 << 9
_MAKE_FIFO: Final = 1 << 10
_MAKE_BLOCK: Final = 1 << 11
_MAKE_SYM: Final = 1 << 12
_REFER: Final = 1 << 13  # ABI 2: linking or renaming into another directory (always denied when not handled)
_TRUNCATE: Final = 1 << 14  # ABI 3
_ABI_1_WRITES: Final = (_WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_CHAR | _MAKE_DIR | _MAKE_REG | _MAKE_SOCK
                        | _MAKE_FIFO | _MAKE_BLOCK | _MAKE_SYM)
# Rights a rule on a file (not a directory) may carry: the others concern a directory's entries.
_FILE_RIGHTS: Final = _WRITE_FILE | _TRUNCATE

# Device files anything may write to, as a shell's `> /dev/null` does.
WRITABLE_DEVICES: Final = ("/dev/null", "/dev/zero", "/dev/full")


class _RulesetAttr(ctypes.Structure):
    # Only the first field of struct landlock_ruleset_attr: the kernel takes a shorter structure from an older
    # caller, and the later fields (network ports, scopes) stay unhandled.
    _fields_ = (("handled_access_fs", ctypes.c_uint64),)


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in the header: 12 bytes
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
_prctl = _libc.prctl
_prctl.restype = ctypes.c_int

_abi_lock = threading.Lock()
_abi: int | None = None


def landlock_abi() -> int:
    """The Landlock ABI version of this kernel, 0 when it has none (too old, or Landlock disabled at boot)."""
    global _abi
    with _abi_lock:
        if _abi is None:
            version = _syscall(ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET), ctypes.c_void_p(None),
                               ctypes.c_size_t(0), ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
            _abi = max(int(version), 0)
            if _abi == 0:
                reason = os.strerror(code) if (code := ctypes.get_errno()) else "unknown"
                logger.warning("this kernel offers no Landlock (%s): commands meant to be confined (bash) run "
                               "with their writes limited only by the process user's permissions", reason)
    return _abi


def handled_writes(abi: int) -> int:
    """The write-like rights a ruleset handles on a kernel of Landlock ABI `abi`."""
    rights = _ABI_1_WRITES
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    return rights


class WriteConfinement:
    """A Landlock ruleset ready for a child to apply to itself. Close it once the child has started."""

    def __init__(self, ruleset_fd: int) -> None:
        self._ruleset_fd = ruleset_fd

    def restrict_self(self) -> None:
        """Run in the child between fork and exec. It never raises: a child that cannot restrict itself writes
        why to its stderr and exits with RESTRICT_FAILED_EXIT, rather than run unconfined."""
        if _prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or _syscall(
                ctypes.c_long(_SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(self._ruleset_fd), ctypes.c_uint32(0)) != 0:
            code = ctypes.get_errno()
            os.write(2, f"toolhost: could not confine the command's writes with Landlock: "
                        f"{os.strerror(code)}\n".encode())
            os._exit(RESTRICT_FAILED_EXIT)

    def close(self) -> None:
        if self._ruleset_fd >= 0:
            os.close(self._ruleset_fd)
            self._ruleset_fd = -1


def confine_writes(writable: Iterable[str]) -> WriteConfinement | None:
    """A ruleset allowing writes only beneath the directories in `writable` and to WRITABLE_DEVICES, or None when
    the kernel has no Landlock. Every path in `writable` must exist (OSError otherwise): a rule that silently
    went missing would refuse writes the caller was promised."""
    abi = landlock_abi()
    if abi == 0:
        return None
    handled = handled_writes(abi)
    ruleset_fd = _checked(_syscall(ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET),
                                   ctypes.byref(_RulesetAttr(handled)), ctypes.c_size_t(ctypes.sizeof(_RulesetAttr)),
                                   ctypes.c_uint32(0)), "landlock_create_ruleset")
    try:
        for path in writable:
            _allow(ruleset_fd, path, handled)
        for device in WRITABLE_DEVICES:
            if os.path.exists(device):
                _allow(ruleset_fd, device, handled)
    except BaseException:
        os.close(ruleset_fd)
        raise
    return WriteConfinement(ruleset_fd)


def _allow(ruleset_fd: int, path: str, handled: int) -> None:
    """Add a path-beneath rule: every handled right beneath the directory `path`, or writing to the file `path`."""
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        is_directory = stat.S_ISDIR(os.fstat(fd).st_mode)
        rule = _PathBeneathAttr(handled if is_directory else handled & _FILE_RIGHTS, fd)
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
