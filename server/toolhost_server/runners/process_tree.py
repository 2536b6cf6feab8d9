"""Finding and stopping every process one tool call started, including those that left its process group.

A call's processes are recognised by, in order of trust:
  1. the call's marker, TOOLHOST_CALL_MARKER=<random hex>, in /proc/<pid>/environ (inherited by every
     descendant that does not clear its environment, whatever session or group it moves to);
  2. descent, via the ppid in /proc/<pid>/stat, from a process already recognised;
  3. the leader's session or process group (catches children that cleared their environment but stayed put),
     unless the process carries another call's marker;
  4. a (pid, start time) pair recognised in an earlier scan of the same call (exact even after the process
     lost its parent or became a zombie);
  5. for an orphan the server adopted: holding the call's stdout or stderr pipe (only the call's processes can
     have inherited it). Looked at only for the server's own children, so scans do not read every process's
     descriptors.
A process that clears its environment, calls setsid(), closes or redirects its output and loses its parent
before a scan sees it is not recognised (a proper daemon); only a cgroup per call would close that gap.

The server makes itself a child subreaper, so the orphans of a tool are reparented to the server rather than to
init. That keeps the end of a normal call cheap: everything a finished tool left running is now a direct child
of the server, so reading one /proc file of the server's children tells whether anything is left, and the full
/proc scan only runs when something is (or when a call is stopped early).

Adopted orphans must be reaped by the server. asyncio's child watcher waits only for the pids it spawned, by
pid, so reaping is done the same way: waitpid() on a specific zombie that was recognised as the call's, is a
child of the server, and is not a process leader asyncio spawned (those are in `spawned_leaders`). Never
waitpid(-1), which would steal asyncio's exit statuses.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Final

logger = logging.getLogger("toolhost.runners.process")

CALL_MARKER_VARIABLE: Final = "TOOLHOST_CALL_MARKER"
_MARKER_PREFIX: Final = b"\0" + CALL_MARKER_VARIABLE.encode() + b"="
_PR_SET_CHILD_SUBREAPER: Final = 36
_FIRST_POLL_SECONDS: Final = 0.005
_LONGEST_POLL_SECONDS: Final = 0.05
# SIGKILL cannot be ignored; only a process stuck in the kernel (state D) outlives a few rounds.
_KILL_ROUNDS: Final = 200
# When the kill cannot yield to the event loop, it blocks it for at most this many short rounds.
_BLOCKING_KILL_ROUNDS: Final = 50
_BLOCKING_POLL_SECONDS: Final = 0.001

# The leaders the process runners spawned through asyncio and asyncio has not reported exited yet: asyncio
# reaps them, so they are never waitpid()ed here, and other calls never take them for their own.
spawned_leaders: set[int] = set()


@functools.cache
def become_child_subreaper() -> bool:
    """Make the server adopt its descendants' orphans (Linux prctl PR_SET_CHILD_SUBREAPER). True if it worked.

    Done once per process, on the first spawn rather than at import, so importing the runners has no effect.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        result = libc.prctl(_PR_SET_CHILD_SUBREAPER, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0),
                            ctypes.c_ulong(0))
    except (OSError, AttributeError) as exc:
        logger.warning("cannot make the server a child subreaper (%s); every process call ends with a /proc scan",
                       exc)
        return False
    if result != 0:
        logger.warning("prctl(PR_SET_CHILD_SUBREAPER) failed: %s; every process call ends with a /proc scan",
                       os.strerror(ctypes.get_errno()))
        return False
    return True


@dataclass(frozen=True, slots=True)
class _Stat:
    """The fields of /proc/<pid>/stat this module reads."""

    pid: int
    state: bytes
    ppid: int
    pgrp: int
    session: int
    start_time: int

    @property
    def finished(self) -> bool:
        """A zombie (exited, not reaped) or a process being reaped: nothing left to signal."""
        return self.state in (b"Z", b"X", b"x")


def _read_stat(pid: int) -> _Stat | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    # The command name is in parentheses and may itself contain ") ", so split at the last one.
    fields = data[data.rindex(b")") + 2:].split()
    return _Stat(pid, fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))


def _read_environ(pid: int) -> bytes:
    """The process's initial environment, NUL-separated, with a leading NUL; empty when unreadable."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return b"\0" + handle.read()
    except OSError:
        return b""


def _children_of_server() -> set[int] | None:
    """The server's direct children as the kernel lists them for its main thread, or None if /proc cannot say.

    Orphans are always adopted by the subreaper's main thread while it lives, which Python's does.
    """
    pid = os.getpid()
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as handle:
            return {int(p) for p in handle.read().split()}
    except OSError:
        return None


@dataclass(slots=True)
class _Scan:
    alive: list[_Stat] = field(default_factory=list)
    zombies: list[_Stat] = field(default_factory=list)


class ProcessTree:
    """The processes of one call: recognises them (see the module docstring), stops them, reaps its orphans.

    `leader` is the pid asyncio spawned (None: find the call's processes by the marker alone). `pipes` are the
    inodes of the call's stdout and stderr pipes (rule 5). Use::

        tree = ProcessTree(marker, leader=pid)
        ...                                  # the leader exited on its own
        if tree.may_have_leftovers():
            await tree.stop(grace_seconds)
    """

    def __init__(self, marker: str, leader: int | None = None, pipes: frozenset[int] = frozenset()) -> None:
        self.leader = leader
        self._pipe_links = frozenset(f"pipe:[{inode}]" for inode in pipes)
        self._own_marker = _MARKER_PREFIX + marker.encode() + b"\0"
        self._server = os.getpid()
        self._known: dict[int, int] = {}

    def may_have_leftovers(self) -> bool:
        """After the leader exited: whether anything of the call may still run or wait to be reaped.

        Cheap when the answer is no: one read of the server's children list. False negatives are only the
        unrecognisable processes the module docstring describes.
        """
        if not become_child_subreaper():
            return True
        children = _children_of_server()
        if children is None:
            return True
        for pid in children:
            if pid == self.leader or pid in spawned_leaders:
                continue
            stat = _read_stat(pid)
            if stat is not None and self._recognises(stat, b"" if stat.finished else _read_environ(pid)):
                return True
        return False

    async def stop(self, grace_seconds: float) -> None:
        """SIGTERM every process of the call, wait up to `grace_seconds` for them to exit, then SIGKILL whatever
        is left (rescanning, for what forked meanwhile) until nothing is; finally reap adopted zombies.

        Cancelled meanwhile (the event loop shutting down cancels every task), it SIGKILLs at once and waits
        for the deaths without yielding, so that even then nothing is left running.
        """
        try:
            scan = await self._terminate(grace_seconds)
            for _ in range(_KILL_ROUNDS):
                if not scan.alive:
                    break
                self._kill(scan)
                await asyncio.sleep(_FIRST_POLL_SECONDS)
                scan = self._scan()
        except asyncio.CancelledError:
            self._kill_without_yielding()
            raise
        self._finish(scan)

    async def _terminate(self, grace_seconds: float) -> _Scan:
        """SIGTERM (and SIGCONT) each process once, new ones as they appear; what is alive after the grace."""
        self._signal_group(signal.SIGTERM)
        scan = self._scan()
        terminated: set[int] = set()
        deadline = time.monotonic() + grace_seconds
        delay = _FIRST_POLL_SECONDS
        while scan.alive:
            fresh = [s for s in scan.alive if s.pid not in terminated]
            self._signal(fresh, signal.SIGTERM)
            # A stopped process cannot act on SIGTERM until it is continued.
            self._signal(fresh, signal.SIGCONT)
            terminated.update(s.pid for s in fresh)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            await asyncio.sleep(min(delay, remaining))
            delay = min(delay * 2, _LONGEST_POLL_SECONDS)
            scan = self._scan()
        return scan

    def _kill(self, scan: _Scan) -> None:
        self._signal_group(signal.SIGKILL)
        self._signal(scan.alive, signal.SIGKILL)

    def _kill_without_yielding(self) -> None:
        scan = self._scan()
        for _ in range(_BLOCKING_KILL_ROUNDS):
            if not scan.alive:
                break
            self._kill(scan)
            time.sleep(_BLOCKING_POLL_SECONDS)
            scan = self._scan()
        self._finish(scan)

    def _finish(self, scan: _Scan) -> None:
        if scan.alive:
            logger.error("processes %s of a call survive SIGKILL (stuck in the kernel?); giving up on them",
                         [s.pid for s in scan.alive])
        self._reap(scan.zombies)

    def _signal_group(self, signum: signal.Signals) -> None:
        # The leader's process group id stays the call's only while asyncio has not reaped the leader; after
        # that the number could be reused, so the group is signalled through its members instead.
        if self.leader is not None and self.leader in spawned_leaders:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.leader, signum)

    @staticmethod
    def _signal(stats: list[_Stat], signum: signal.Signals) -> None:
        for stat in stats:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(stat.pid, signum)

    def _reap(self, zombies: list[_Stat]) -> None:
        for stat in zombies:
            if stat.ppid != self._server or stat.pid == self.leader or stat.pid in spawned_leaders:
                continue
            with contextlib.suppress(ChildProcessError):
                os.waitpid(stat.pid, os.WNOHANG)

    def _recognises(self, stat: _Stat, environ: bytes) -> bool:
        """Rules 1, 3 and 4 of the module docstring (rule 2 needs the whole process table)."""
        if self._known.get(stat.pid) == stat.start_time:
            return True
        if self._own_marker in environ + b"\0":
            return True
        if _MARKER_PREFIX in environ:
            return False
        if self.leader is not None and self.leader in (stat.session, stat.pgrp):
            return True
        return stat.ppid == self._server and not stat.finished and self._holds_our_pipes(stat.pid)

    def _holds_our_pipes(self, pid: int) -> bool:
        """Rule 5: an orphan the server adopted that holds the call's stdout or stderr pipe."""
        if not self._pipe_links:
            return False
        try:
            descriptors = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            return False
        for descriptor in descriptors:
            try:
                if os.readlink(f"/proc/{pid}/fd/{descriptor}") in self._pipe_links:
                    return True
            except OSError:
                continue
        return False

    def _scan(self) -> _Scan:
        stats: dict[int, _Stat] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != self._server:
                stat = _read_stat(int(entry))
                if stat is not None:
                    stats[stat.pid] = stat
        ours = [s.pid for s in stats.values() if self._recognises(s, b"" if s.finished else _read_environ(s.pid))]
        children: dict[int, list[int]] = {}
        for stat in stats.values():
            children.setdefault(stat.ppid, []).append(stat.pid)
        members: set[int] = set()
        while ours:
            pid = ours.pop()
            if pid not in members:
                members.add(pid)
                ours.extend(children.get(pid, ()))
        scan = _Scan()
        for pid in members:
            stat = stats[pid]
            self._known[pid] = stat.start_time
            (scan.zombies if stat.finished else scan.alive).append(stat)
        return scan
