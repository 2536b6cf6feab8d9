"""Landlock (Linux 5.13 and later): confining what a child process may do to the filesystem, with no privilege
needed. The one module that speaks to the kernel's Landlock; callers say which rights to handle and where to allow
them.

The parent builds a ruleset per call (`build_ruleset`): the rights it handles are denied everywhere except beneath
the directories and on the files its rules allow; the rights it does not handle stay allowed everywhere. The
child applies it between fork and exec (`LandlockRuleset.restrict_self`, a `before_exec` or `preexec_fn`): it sets
no_new_privs (no setuid program regains what the restriction withholds) and restricts itself; exec keeps both,
and every process it starts inherits them. Where the kernel has no Landlock, `build_ruleset` returns None and the
log says once, per kind of confinement, what then goes unconfined.

`confine_writes` is the ruleset for `bash` (writes only beneath the workspace, no ioctl on devices, and, with ABI
6, no signal to and no abstract unix socket of a process outside the call); workspaces/read_confinement.py builds
the one for grep's rg (reads only beneath the workspace).

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
from dataclasses import dataclass
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

# Filesystem access rights (LANDLOCK_ACCESS_FS_*).
EXECUTE: Final = 1 << 0
WRITE_FILE: Final = 1 << 1
READ_FILE: Final = 1 << 2  # opening a program to exec it needs it too
READ_DIR: Final = 1 << 3
REMOVE_DIR: Final = 1 << 4
REMOVE_FILE: Final = 1 << 5
MAKE_CHAR: Final = 1 << 6
MAKE_DIR: Final = 1 << 7
MAKE_REG: Final = 1 << 8
MAKE_SOCK: Final = 1 << 9
MAKE_FIFO: Final = 1 << 10
MAKE_BLOCK: Final = 1 << 11
MAKE_SYM: Final = 1 << 12
REFER: Final = 1 << 13  # ABI 2: linking or renaming into another directory (always denied when not handled)
TRUNCATE: Final = 1 << 14  # ABI 3
IOCTL_DEV: Final = 1 << 15  # ABI 5
# The rights each ABI version knows: a ruleset handling a right the kernel does not know is refused (EINVAL).
_RIGHTS_BY_ABI: Final = ((1, (1 << 13) - 1), (2, REFER), (3, TRUNCATE), (5, IOCTL_DEV))
# Scopes (ABI 6): a scoped process may not signal, or connect to an abstract unix socket of, a process outside
# its own Landlock domain (each ruleset applied is a domain of its own: one per call).
SCOPE_ABSTRACT_UNIX_SOCKET: Final = 1 << 0
SCOPE_SIGNAL: Final = 1 << 1
_SCOPES_ABI: Final = 6
# Rights a rule on a file (not a directory) may carry: the others concern a directory's entries.
_FILE_RIGHTS: Final = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
# The rights that change the filesystem (ioctl on devices aside).
WRITE_RIGHTS: Final = (WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO
                       | MAKE_BLOCK | MAKE_SYM | REFER | TRUNCATE)

# Device files anything may write to, as a shell's `> /dev/null` does.
WRITABLE_DEVICES: Final = ("/dev/null", "/dev/zero", "/dev/full")


class _RulesetAttr(ctypes.Structure):
    # struct landlock_ruleset_attr up to `scoped` (ABI 6). A kernel older than a field takes the longer structure
    # as long as the fields it does not know are zero, so `scoped` is set only where the ABI has it.
    _fields_ = (("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64))


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
_absence_reason = "unknown"
_said_unconfined: set[str] = set()


def landlock_abi() -> int:
    """The Landlock ABI version of this kernel, 0 when it has none (too old, or Landlock disabled at boot)."""
    global _abi, _absence_reason
    with _abi_lock:
        if _abi is None:
            version = _syscall(ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET), ctypes.c_void_p(None),
                               ctypes.c_size_t(0), ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
            _abi = max(int(version), 0)
            if _abi == 0 and (code := ctypes.get_errno()):
                _absence_reason = os.strerror(code)
    return _abi


def supported_rights(abi: int) -> int:
    """The access rights a kernel of Landlock ABI `abi` knows."""
    return sum(rights for version, rights in _RIGHTS_BY_ABI if abi >= version)


@dataclass(frozen=True)
class PathRule:
    """Allow `rights` beneath the directory `path`, or on the file `path` (its file rights only). A rule that
    is `required` fails the ruleset when `path` does not exist; another is then left out."""

    path: str
    rights: int
    required: bool = True


class LandlockRuleset:
    """A ruleset ready for a child to apply to itself. Close it once the child has started."""

    def __init__(self, ruleset_fd: int, confines: str) -> None:
        self._ruleset_fd = ruleset_fd
        # Made before the fork: the child only writes it.
        self._failure_prefix = f"toolhost: could not confine {confines} with Landlock: "

    def restrict_self(self) -> None:
        """Run in the child between fork and exec. It never raises: a child that cannot restrict itself writes
        why to its stderr and exits with RESTRICT_FAILED_EXIT, rather than run unconfined."""
        if _prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or _syscall(
                ctypes.c_long(_SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(self._ruleset_fd), ctypes.c_uint32(0)) != 0:
            code = ctypes.get_errno()
            os.write(2, f"{self._failure_prefix}{os.strerror(code)}\n".encode())
            os._exit(RESTRICT_FAILED_EXIT)

    def close(self) -> None:
        if self._ruleset_fd >= 0:
            os.close(self._ruleset_fd)
            self._ruleset_fd = -1


def build_ruleset(handled: int, rules: Iterable[PathRule], *, confines: str, when_absent: str,
                  scoped: int = 0) -> LandlockRuleset | None:
    """A ruleset handling the rights in `handled` that this kernel knows, allowing them only as `rules` say, and
    the scopes in `scoped` where the kernel has them (ABI 6); None when the kernel has no Landlock, said once in
    the log with `when_absent` (what then goes unconfined). `confines` names what is confined ("the command's
    writes") in the message of a child that cannot apply it. Raises OSError when a required rule's path does not
    exist (its `filename` is that path): a rule that silently went missing would refuse what the caller was
    promised."""
    abi = landlock_abi()
    if abi == 0:
        if when_absent not in _said_unconfined:
            _said_unconfined.add(when_absent)
            logger.warning("this kernel offers no Landlock (%s): %s", _absence_reason, when_absent)
        return None
    handled &= supported_rights(abi)
    attr = _RulesetAttr(handled, 0, scoped if abi >= _SCOPES_ABI else 0)
    ruleset_fd = _checked(_syscall(ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET), ctypes.byref(attr),
                                   ctypes.c_size_t(ctypes.sizeof(_RulesetAttr)), ctypes.c_uint32(0)),
                          "landlock_create_ruleset")
    try:
        for rule in rules:
            _add_rule(ruleset_fd, rule, handled)
    except BaseException:
        os.close(ruleset_fd)
        raise
    return LandlockRuleset(ruleset_fd, confines)


def confine_writes(writable: Iterable[str]) -> LandlockRuleset | None:
    """A ruleset allowing writes only beneath the directories in `writable` (which must exist) and to
    WRITABLE_DEVICES, refusing ioctl on devices opened after it applies (ABI 5) and signals to, and abstract unix
    sockets of, processes outside it (ABI 6); None when the kernel has no Landlock. Reading and executing stay
    allowed everywhere."""
    rules = [*(PathRule(path, WRITE_RIGHTS) for path in writable),
             *(PathRule(device, WRITE_RIGHTS, required=False) for device in WRITABLE_DEVICES)]
    return build_ruleset(WRITE_RIGHTS | IOCTL_DEV, rules, confines="the command's writes",
                         scoped=SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET, when_absent=(
                             "commands meant to be confined (bash) run with their writes limited only by the "
                             "process user's permissions"))


def _add_rule(ruleset_fd: int, rule: PathRule, handled: int) -> None:
    try:
        fd = os.open(rule.path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        if rule.required:
            raise
        return
    try:
        allowed = rule.rights & handled
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            allowed &= _FILE_RIGHTS
        attr = _PathBeneathAttr(allowed, fd)
        _checked(_syscall(ctypes.c_long(_SYS_LANDLOCK_ADD_RULE), ctypes.c_int(ruleset_fd),
                          ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH), ctypes.byref(attr), ctypes.c_uint32(0)),
                 f"landlock_add_rule for {rule.path}")
    finally:
        os.close(fd)


def _checked(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno() or errno.EINVAL
        raise OSError(code, f"{what}: {os.strerror(code)}")
    return int(result)
