"""A cgroup v2 per process call, where the server can make them: the call's processes are born in it, cannot
leave it unless they run as root or as the server's own user (a server that is not root has the cgroups it made
delegated to its user, so a process with that user may move itself anywhere in them, or make cgroups below its
call's: those are stopped and removed with it), and are stopped all at once, forks included (cgroup.kill; freeze
then SIGKILL where the kernel has no cgroup.kill, before 5.14).

Where (the `process_cgroup_parent` setting): "" is the server's own cgroup on the cgroup2 hierarchy, found
through /proc/self/cgroup and /proc/self/mountinfo, used when the server may make cgroups there; a path names a
cgroup2 directory delegated to the server; "off" uses none. The server makes `toolhost-<pid>-<start>` there for
itself and a `call-<random>` cgroup in that per call. A server killed meanwhile leaves its directory behind; the
next one to start there kills what still runs in it and removes it.

No controller is enabled anywhere, so cgroup v2's rule that a cgroup which enables controllers for its
children holds no processes itself never applies: the server stays in its own cgroup, the calls' cgroups
below it. (An operator who wants limits per call names a parent that holds no process and enables them there.)

Joining: the child writes "0" (itself) to its call cgroup's cgroup.procs between fork and exec (a preexec_fn),
so no instruction of the tool runs outside it. The server opens that file beforehand: since Linux 5.16 the
kernel checks the opener's rights, so a child already switched to `nobody` can still write it.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import secrets
import signal
import time
from collections.abc import Callable
from typing import Final

from .process_signals import signal_processes
from .process_steps import Steps
from .process_table import ProcessStat, read_proc_file, read_stat

logger = logging.getLogger("toolhost.runners.process")

CGROUPS_OFF: Final = "off"
_SERVER_PREFIX: Final = "toolhost-"
_CALL_PREFIX: Final = "call-"
# Waits for a cgroup to freeze, and to empty after the kill, in pauses of _PAUSE_SECONDS (a process in the
# kernel, state D, does either only when it leaves the kernel).
_FREEZE_WAITS: Final = 200
_EMPTY_WAITS: Final = 2000
_PAUSE_SECONDS: Final = 0.002


class CallCgroup:
    """The cgroup of one call. `join` is the preexec_fn that moves the child into it; `joined()` after the
    spawn; `stopping(remember)` kills everything in it; `remove()` at the end."""

    def __init__(self, path: str, procs: int) -> None:
        self.path = path
        self._procs = procs
        # Between fork and exec only this runs, in the child: one write through a descriptor opened here.
        self.join: Callable[[], object] = functools.partial(os.write, procs, b"0")

    def joined(self) -> None:
        """The spawn is done: the server needs the cgroup.procs descriptor no more."""
        if self._procs >= 0:
            os.close(self._procs)
            self._procs = -1

    def member_pids(self) -> list[int]:
        """The processes in the cgroup and below it now (not its zombies: a process leaves at exit). A process
        that may write the cgroup (one running as the server's user, where that is not root) can make cgroups
        below it and move there."""
        pids: list[int] = []
        for directory in _cgroup_tree(self.path):
            with contextlib.suppress(OSError):
                pids += [int(pid) for pid in read_proc_file(os.path.join(directory, "cgroup.procs")).split()]
        return pids

    def populated(self) -> bool:
        """Whether a process still lives in the cgroup: one small read, cheap enough for every call's end."""
        return self._event(b"populated")

    def stopping(self, remember: Callable[[ProcessStat], None]) -> Steps:
        """Freeze the cgroup, tell `remember` each process in it (none can fork now), kill them all, and wait
        until it is empty; True then. Run it with process_steps."""
        if not self.populated():
            return True
        frozen = _write(self.path, "cgroup.freeze", b"1")
        for _ in range(_FREEZE_WAITS if frozen else 0):
            if self._event(b"frozen") or not self.populated():
                break
            yield _PAUSE_SECONDS
        members = [stat for pid in self.member_pids() if (stat := read_stat(pid)) is not None]
        for stat in members:
            remember(stat)
        killed = _write(self.path, "cgroup.kill", b"1")
        for _ in range(_EMPTY_WAITS):
            if not killed:
                # No cgroup.kill: SIGKILL each member; frozen, none forks, and a SIGKILL ends a frozen process.
                signal_processes(members, signal.SIGKILL)
            if not self.populated():
                return True
            yield _PAUSE_SECONDS
            members = [stat for pid in self.member_pids() if (stat := read_stat(pid)) is not None]
        return not self.populated()

    def remove(self) -> None:
        """Remove the cgroup and any made below it (their zombies do not hold them); one a process still holds
        is left and logged."""
        self.joined()
        failure = _remove_cgroup_tree(self.path)
        if failure is not None:
            logger.error("cannot remove the cgroup %s of a finished process call (%s); the next server to start "
                         "removes it", failure.filename, failure.strerror)

    def _event(self, name: bytes) -> bool:
        try:
            events = read_proc_file(os.path.join(self.path, "cgroup.events"))
        except OSError:
            return False
        return any(line.split() == [name, b"1"] for line in events.splitlines())


class CgroupParent:
    """Where this server makes its calls' cgroups: its own directory under the configured or found parent."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._enabled = True

    def new_call(self) -> CallCgroup | None:
        """A fresh cgroup for one call, or None (logged) when it cannot be made: the call then runs without."""
        if not self._enabled:
            return None
        path = os.path.join(self.directory, _CALL_PREFIX + secrets.token_hex(8))
        try:
            os.mkdir(path)
        except OSError as exc:
            logger.error("cannot make a cgroup for a process call in %s (%s); the call runs without one, its "
                         "processes found through /proc", self.directory, exc.strerror)
            return None
        try:
            procs = os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.rmdir(path)
            logger.error("cannot open %s/cgroup.procs (%s); the call runs without a cgroup", path, exc.strerror)
            return None
        return CallCgroup(path, procs)

    def disable(self, why: str) -> None:
        """Stop making cgroups for calls (a child could not join one): from now on calls run without."""
        if self._enabled:
            self._enabled = False
            logger.error("process calls no longer run in cgroups of their own: %s; their processes are found "
                         "through /proc from now on", why)


@functools.cache
def call_cgroups(setting: str) -> CgroupParent | None:
    """The CgroupParent for `setting` (process_cgroup_parent), or None when calls run without cgroups. Found
    once per process, on the first call; says in the log which way calls are contained."""
    if setting == CGROUPS_OFF:
        logger.info("process calls run in no cgroup (process_cgroup_parent=%s): their processes are found "
                    "through /proc and stopped by a freezing sweep", CGROUPS_OFF)
        return None
    parent, why_not = (setting, _unusable_parent(setting)) if setting else own_cgroup()
    if parent is not None and not why_not:
        directory, why_not = _server_directory(parent)
        if directory is not None:
            clear_stale(parent)
            atexit.register(remove_server_directory, directory)
            logger.info("process calls each run in a cgroup of their own, under %s", directory)
            return CgroupParent(directory)
    if setting:
        logger.error("process_cgroup_parent=%s cannot be used: %s; process calls run in no cgroup (their "
                     "processes are found through /proc). Name a cgroup2 directory the server may write, or "
                     "set it to %s", setting, why_not, CGROUPS_OFF)
    else:
        logger.info("process calls run in no cgroup (%s): their processes are found through /proc and stopped "
                    "by a freezing sweep; set process_cgroup_parent to a delegated cgroup2 directory to change "
                    "that", why_not)
    return None


def _unusable_parent(path: str) -> str:
    """Why the configured parent cannot hold the calls' cgroups, or "" when it can."""
    if not os.path.isabs(path):
        return "it is not an absolute path"
    if not os.path.isfile(os.path.join(path, "cgroup.controllers")):
        return "it is not a directory of a cgroup2 filesystem (it has no cgroup.controllers)"
    return ""


def own_cgroup() -> tuple[str | None, str]:
    """The directory of the server's own cgroup on the cgroup2 hierarchy and "", or None and why not."""
    try:
        lines = read_proc_file("/proc/self/cgroup").decode().splitlines()
        mounts = read_proc_file("/proc/self/mountinfo").decode().splitlines()
    except OSError as exc:
        return None, f"/proc cannot tell the server's cgroup ({exc.strerror})"
    own = next((line[3:] for line in lines if line.startswith("0::")), None)
    if own is None:
        return None, "the server is in no cgroup v2 hierarchy (this system has cgroup v1 only)"
    for line in mounts:
        fields, _, tail = line.partition(" - ")
        if tail.split(" ", 1)[0] != "cgroup2":
            continue
        root, mount_point = (_unescape(field) for field in fields.split()[3:5])
        # The mount shows the hierarchy from `root` down (a container's mount starts at its own cgroup).
        if root != "/" and own != root and not own.startswith(root + "/"):
            continue
        directory = os.path.join(mount_point, own[len(root.rstrip("/")):].lstrip("/"))
        if not (os.access(directory, os.W_OK) and os.access(os.path.join(directory, "cgroup.procs"), os.W_OK)):
            return None, f"the server may not make cgroups in its own cgroup {directory} (not delegated to it)"
        return directory, ""
    return None, f"no cgroup2 filesystem is mounted where the server sees its own cgroup {own}"


def _unescape(field: str) -> str:
    """A path of /proc/self/mountinfo, where space, tab, newline and backslash are octal escapes."""
    for escaped, plain in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(escaped, plain)
    return field


def _server_directory(parent: str) -> tuple[str | None, str]:
    """This server's own directory under `parent`, made now, or None and why it could not be."""
    me = read_stat(os.getpid())
    name = f"{_SERVER_PREFIX}{os.getpid()}-{me.start_time if me is not None else 0}"
    directory = os.path.join(parent, name)
    try:
        os.mkdir(directory)
    except FileExistsError:
        pass
    except OSError as exc:
        return None, f"it cannot make {directory} ({exc.strerror})"
    return directory, ""


def clear_stale(parent: str) -> None:
    """Kill what the calls of servers no longer running left in `parent`, and remove their directories."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        pid, _, start = name.removeprefix(_SERVER_PREFIX).partition("-")
        if not name.startswith(_SERVER_PREFIX) or not (pid.isdigit() and start.isdigit()):
            continue
        running = read_stat(int(pid))
        if running is not None and running.start_time == int(start):
            continue
        directory = os.path.join(parent, name)
        for call in _call_cgroups_in(directory):
            _write(call, "cgroup.kill", b"1")
            left = CallCgroup(call, -1)
            for _ in range(_EMPTY_WAITS):
                if not left.populated():
                    break
                time.sleep(_PAUSE_SECONDS)
        remove_server_directory(directory)
        if os.path.isdir(directory):
            logger.warning("the cgroup %s of a server that is gone still holds processes; left for the next "
                           "start", directory)


def _call_cgroups_in(directory: str) -> list[str]:
    try:
        return [os.path.join(directory, n) for n in os.listdir(directory) if n.startswith(_CALL_PREFIX)]
    except OSError:
        return []


def remove_server_directory(directory: str) -> None:
    """Remove the empty call cgroups in `directory` (with any made below them), then it (a cgroup holding a
    process is left)."""
    for call in _call_cgroups_in(directory):
        _remove_cgroup_tree(call)
    with contextlib.suppress(OSError):
        os.rmdir(directory)


def _cgroup_tree(path: str) -> list[str]:
    """`path` and every cgroup below it, the deepest first."""
    return [directory for directory, _, _ in os.walk(path, topdown=False)]


def _remove_cgroup_tree(path: str) -> OSError | None:
    """Remove the cgroup `path` and those below it, the deepest first; None, or the error that stopped it (a
    cgroup that still holds a process)."""
    for directory in _cgroup_tree(path):
        try:
            os.rmdir(directory)
        except FileNotFoundError:
            pass
        except OSError as exc:
            return exc
    return None


def _write(directory: str, name: str, value: bytes) -> bool:
    """Write a cgroup control file; False when it is missing (an older kernel) or refuses."""
    try:
        descriptor = os.open(os.path.join(directory, name), os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        os.write(descriptor, value)
        return True
    except OSError:
        return False
    finally:
        os.close(descriptor)
