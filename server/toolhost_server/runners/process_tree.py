"""Finding and stopping every process one tool call started, including those that left its process group.

A call's processes are recognised by, in order of trust:
  1. the call's marker, TOOLHOST_CALL_MARKER=<random hex>, in /proc/<pid>/environ (inherited by every
     descendant that does not clear its environment, whatever session or group it moves to);
  2. descent, via the ppid in /proc/<pid>/stat, from a process already recognised;
  3. the leader's session or process group (catches children that cleared their environment but stayed put),
     unless the process carries another call's marker, and only while the leader's pid is not someone else's;
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
/proc scan only runs when something is (or when a call is stopped early). That scan reads every process's stat
and environment (about 50 ms for 1,000 processes), so it runs in a worker thread, and the calls that need one
while one is under way share the next.

Adopted orphans, recognised or not, must be reaped by the server. asyncio's child watcher waits only for the
pids it spawned, by pid, so reaping is done the same way: waitpid() on a specific zombie child of the server
that is not a leader asyncio spawned (those are in `spawned_leaders`). A zombie not recognised as a call's is
left alone while a spawn is under way (`spawning()`: the new child's pid is not known yet) and until it has
been a zombie for a moment (so it is not a child that asyncio is about to reap). Never waitpid(-1), which
would steal asyncio's exit statuses. `sweep_strays()` does this at each call's end, and again while the
server has children it did not spawn (daemons that may exit later); where the kernel keeps no list of a
process's children, only the scans of stopping calls find such zombies.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ctypes
import functools
import logging
import os
import signal
import sys
import time
import weakref
from collections.abc import Iterable, Iterator
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
_SWEEP_INTERVAL_SECONDS: Final = 1.0
_STRAY_AGE_SECONDS: Final = 0.2

# The leaders the process runners spawned through asyncio and asyncio has not reported exited yet: asyncio
# reaps them, so they are never waitpid()ed here, and other calls never take them for their own.
spawned_leaders: set[int] = set()
_spawns_in_progress = 0


@contextlib.contextmanager
def spawning() -> Iterator[None]:
    """Hold around an asyncio spawn until its pid is in `spawned_leaders` (or the spawn failed).

    Meanwhile the new child may already be a zombie that asyncio is about to reap, under a pid not known yet,
    so unrecognised zombies are left to a later sweep.
    """
    global _spawns_in_progress
    _spawns_in_progress += 1
    try:
        yield
    finally:
        _spawns_in_progress -= 1


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


def _markers_of(pid: int) -> list[bytes]:
    """The values of every marker variable in the process's initial environment (none when unreadable)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = b"\0" + handle.read()
    except OSError:
        return []
    found = []
    start = environ.find(_MARKER_PREFIX)
    while start >= 0:
        value = start + len(_MARKER_PREFIX)
        end = environ.find(b"\0", value)
        end = len(environ) if end < 0 else end
        found.append(environ[value:end])
        start = environ.find(_MARKER_PREFIX, end)
    return found


def _pipes_of(pid: int) -> frozenset[str]:
    """The pipes the process holds open, as their /proc/<pid>/fd links read ("pipe:[<inode>]")."""
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return frozenset()
    links = set()
    for descriptor in descriptors:
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/{pid}/fd/{descriptor}")
            if link.startswith("pipe:"):
                links.add(link)
    return frozenset(links)


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
class _ProcessTable:
    """One reading of /proc (the server itself left out), indexed for the rules of the module docstring."""

    stats: dict[int, _Stat] = field(default_factory=dict)
    children: dict[int, list[int]] = field(default_factory=dict)
    # Session and process group ids, each with the processes in it.
    groups: dict[int, list[int]] = field(default_factory=dict)
    by_marker: dict[bytes, list[int]] = field(default_factory=dict)
    marked: set[int] = field(default_factory=set)
    # The pipes held by the server's live children that carry no marker (rule 5).
    pipes: dict[int, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def read(cls, server: int, pids: Iterable[int] | None = None) -> _ProcessTable:
        """Every process, or only `pids`. Blocking: about 50 µs a process."""
        if pids is None:
            pids = [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
        table = cls()
        for pid in pids:
            stat = _read_stat(pid) if pid != server else None
            if stat is None:
                continue
            table.stats[pid] = stat
            table.children.setdefault(stat.ppid, []).append(pid)
            table.groups.setdefault(stat.session, []).append(pid)
            if stat.pgrp != stat.session:
                table.groups.setdefault(stat.pgrp, []).append(pid)
            if stat.finished:
                continue
            markers = _markers_of(pid)
            if markers:
                table.marked.add(pid)
                for value in markers:
                    table.by_marker.setdefault(value, []).append(pid)
            elif stat.ppid == server:
                table.pipes[pid] = _pipes_of(pid)
        return table


class _SharedReads:
    """Full /proc reads for the calls of one event loop, in a worker thread, one at a time. A call that asks
    while a read runs gets the next one, shared with every other call that asks meanwhile: a read always
    starts after the request, and 20 calls stopping together cost a few reads, not 20."""

    def __init__(self) -> None:
        self._running = False
        self._next: asyncio.Future[_ProcessTable] | None = None

    def request(self) -> asyncio.Future[_ProcessTable]:
        if self._next is None:
            loop = asyncio.get_running_loop()
            self._next = loop.create_future()
            if not self._running:
                loop.call_soon(self._start)  # the requests of this loop iteration share it
        return self._next

    def _start(self) -> None:
        future, self._next = self._next, None
        if future is None:
            return
        loop = asyncio.get_running_loop()
        try:
            work = _scan_executor().submit(_ProcessTable.read, os.getpid())
        except RuntimeError:  # the interpreter is exiting and takes no more threads: read in this one
            future.set_result(_ProcessTable.read(os.getpid()))
            return
        self._running = True

        def report(_: concurrent.futures.Future[_ProcessTable]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile; no one waits any more
                loop.call_soon_threadsafe(self._deliver, future, work)

        work.add_done_callback(report)

    def _deliver(self, future: asyncio.Future[_ProcessTable], work: concurrent.futures.Future[_ProcessTable]) -> None:
        self._running = False
        if not future.done():
            error = work.exception()
            if error is None:
                future.set_result(work.result())
            else:
                future.set_exception(error)
        if self._next is not None:
            self._start()


_shared_reads: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _SharedReads] = weakref.WeakKeyDictionary()


@functools.cache
def _scan_executor() -> concurrent.futures.ThreadPoolExecutor:
    # Its own thread: the default executor may be busy with the python runner's blocking tools.
    return concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolhost-proc-scan")


async def _read_all() -> _ProcessTable:
    loop = asyncio.get_running_loop()
    reads = _shared_reads.get(loop)
    if reads is None:
        reads = _shared_reads[loop] = _SharedReads()
    # Shielded: one caller cancelled must not cancel the read the others wait for.
    return await asyncio.shield(reads.request())


@dataclass(slots=True)
class _Scan:
    alive: list[_Stat] = field(default_factory=list)
    zombies: list[_Stat] = field(default_factory=list)


class ProcessTree:
    """The processes of one call: recognises them (see the module docstring), stops them, reaps its orphans.

    `leader` is the pid asyncio spawned (None: find the call's processes by the marker alone); it is in
    `spawned_leaders` when the tree is made, unless asyncio already reaped it. `pipes` are the inodes of the
    call's stdout and stderr pipes (rule 5). Use::

        tree = ProcessTree(marker, leader=pid)
        ...                                  # the leader exited on its own
        if tree.may_have_leftovers():
            await tree.stop(grace_seconds)
    """

    def __init__(self, marker: str, leader: int | None = None, pipes: frozenset[int] = frozenset()) -> None:
        self.leader = leader
        self._pipe_links = frozenset(f"pipe:[{inode}]" for inode in pipes)
        self._marker = marker.encode()
        self._server = os.getpid()
        self._known: dict[int, int] = {}
        # Recorded while the pid surely is the leader's, to see later whether it was reused (rule 3).
        stat = _read_stat(leader) if leader is not None and leader in spawned_leaders else None
        self._leader_start = stat.start_time if stat is not None else None

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
        candidates = {pid for pid in children if pid != self.leader and pid not in spawned_leaders}
        if not candidates:
            return False
        pids = candidates if self.leader is None else candidates | {self.leader}
        return not candidates.isdisjoint(self._recognised(_ProcessTable.read(self._server, pids)))

    async def stop(self, grace_seconds: float) -> None:
        """SIGTERM every process of the call, wait up to `grace_seconds` for them to exit, then SIGKILL whatever
        is left (rescanning, for what forked meanwhile) until nothing is; finally reap adopted zombies.

        Cancelled meanwhile (the event loop shutting down cancels every task), it SIGKILLs at once and waits
        for the deaths without yielding, so that even then nothing is left running.
        """
        try:
            scan, table = await self._terminate(grace_seconds)
            for _ in range(_KILL_ROUNDS):
                if not scan.alive:
                    break
                self._kill(scan)
                await asyncio.sleep(_FIRST_POLL_SECONDS)
                scan, table = self._select(await _read_all())
        except asyncio.CancelledError:
            self._kill_without_yielding()
            raise
        self._finish(scan, table)

    async def _terminate(self, grace_seconds: float) -> tuple[_Scan, _ProcessTable]:
        """SIGTERM (and SIGCONT) each process once, new ones as they appear; what is alive after the grace."""
        self._signal_group(signal.SIGTERM)
        scan, table = self._select(await _read_all())
        terminated: set[int] = set()
        deadline = time.monotonic() + grace_seconds
        delay = _FIRST_POLL_SECONDS
        while scan.alive:
            fresh = [s for s in scan.alive if s.pid not in terminated]
            _signal(fresh, signal.SIGTERM)
            # A stopped process cannot act on SIGTERM until it is continued.
            _signal(fresh, signal.SIGCONT)
            terminated.update(s.pid for s in fresh)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            await asyncio.sleep(min(delay, remaining))
            delay = min(delay * 2, _LONGEST_POLL_SECONDS)
            scan, table = self._select(await _read_all())
        return scan, table

    def _kill(self, scan: _Scan) -> None:
        self._signal_group(signal.SIGKILL)
        _signal(scan.alive, signal.SIGKILL)

    def _kill_without_yielding(self) -> None:
        scan, table = self._select(_ProcessTable.read(self._server))
        for _ in range(_BLOCKING_KILL_ROUNDS):
            if not scan.alive:
                break
            self._kill(scan)
            time.sleep(_BLOCKING_POLL_SECONDS)
            scan, table = self._select(_ProcessTable.read(self._server))
        self._finish(scan, table)

    def _finish(self, scan: _Scan, table: _ProcessTable) -> None:
        if scan.alive:
            logger.error("processes %s of a call survive SIGKILL (stuck in the kernel?); giving up on them",
                         [s.pid for s in scan.alive])
        for stat in scan.zombies:
            # Recognised as the call's, so not a child being spawned: reaped even while a spawn is under way.
            if stat.ppid == self._server and stat.pid != self.leader and stat.pid not in spawned_leaders:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(stat.pid, os.WNOHANG)
        if _children_of_server() is None:  # no list for sweep_strays: reap the other zombies the scan saw
            reap_strays(s.pid for s in table.stats.values() if s.ppid == self._server and s.finished)

    def _signal_group(self, signum: signal.Signals) -> None:
        # The leader's process group id stays the call's only while asyncio has not reaped the leader; after
        # that the number could be reused, so the group is signalled through its members instead.
        if self.leader is not None and self.leader in spawned_leaders:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.leader, signum)

    def _recognised(self, table: _ProcessTable) -> set[int]:
        """Rules 1, 3, 4 and 5 of the module docstring: the processes of `table` known without descent."""
        found = set(table.by_marker.get(self._marker, ()))
        found.update(pid for pid, start in self._known.items()
                     if (stat := table.stats.get(pid)) is not None and stat.start_time == start)
        if self.leader is not None:
            holder = table.stats.get(self.leader)
            # A session or group id cannot be reused while a process is in it, but once the leader was reaped
            # the number may be a stranger's new session: then that stranger holds the pid.
            if holder is None or holder.start_time == self._leader_start:
                found.update(pid for pid in table.groups.get(self.leader, ()) if pid not in table.marked)
        if self._pipe_links:
            found.update(pid for pid, links in table.pipes.items() if not links.isdisjoint(self._pipe_links))
        return found

    def _select(self, table: _ProcessTable) -> tuple[_Scan, _ProcessTable]:
        """The call's processes in `table` (every rule), remembered for rule 4."""
        pending = list(self._recognised(table))
        members: set[int] = set()
        while pending:
            pid = pending.pop()
            if pid not in members:
                members.add(pid)
                pending.extend(table.children.get(pid, ()))
        scan = _Scan()
        for pid in members:
            stat = table.stats[pid]
            self._known[pid] = stat.start_time
            (scan.zombies if stat.finished else scan.alive).append(stat)
        return scan, table


def _signal(stats: list[_Stat], signum: signal.Signals) -> None:
    """Send `signum` to each process, unless its pid now belongs to another process (the table may be a
    few milliseconds old): through a pidfd where the kernel has them, so the check and the send cannot race."""
    for stat in stats:
        try:
            pidfd = os.pidfd_open(stat.pid)
        except ProcessLookupError:
            continue
        except (OSError, AttributeError):
            pidfd = -1
        try:
            current = _read_stat(stat.pid)
            if current is None or current.start_time != stat.start_time:
                continue
            if pidfd >= 0:
                signal.pidfd_send_signal(pidfd, signum)
            else:
                os.kill(stat.pid, signum)
        except (ProcessLookupError, PermissionError):
            continue
        finally:
            if pidfd >= 0:
                os.close(pidfd)


def reap_strays(candidates: Iterable[int] | None = None) -> float | None:
    """Reap the zombie children of the server that no one else waits for, each by its pid; `candidates` are
    the pids to look at (default: the server's children, from the kernel's list). Returns when the next
    sweep is due, in seconds: soon when a zombie had to be left for now, later when a child the server did
    not spawn still runs, never (None) when neither.

    A zombie this function does not know to be a call's is left alone while a spawn is under way (it may be
    the new leader, exited already) and until a sweep at least `_STRAY_AGE_SECONDS` earlier saw it: by then
    any child that something else in the server spawned through asyncio has been reaped by asyncio.
    """
    if candidates is None:
        if not become_child_subreaper():
            return None  # then the server has no children but those it spawned itself
        candidates = _children_of_server() or ()
    server = os.getpid()
    now = time.monotonic()
    left: dict[tuple[int, int], float] = {}
    others_run = False
    for pid in candidates:
        stat = _read_stat(pid) if pid not in spawned_leaders else None
        if stat is None or stat.ppid != server:
            continue
        if not stat.finished:
            others_run = True
            continue
        key = (pid, stat.start_time)
        first_seen = _strays_seen.get(key, now)
        if _spawns_in_progress or now - first_seen < _STRAY_AGE_SECONDS:
            left[key] = first_seen
            continue
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    _strays_seen.clear()
    _strays_seen.update(left)
    if left:
        return _STRAY_AGE_SECONDS
    return _SWEEP_INTERVAL_SECONDS if others_run else None


# The unrecognised zombie children of the server the last sweep left, by (pid, start time): when it first saw each.
_strays_seen: dict[tuple[int, int], float] = {}
_sweeping: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()


def sweep_strays() -> None:
    """Reap stray zombies now (see `reap_strays`), and again as long as the server has children it did not
    spawn: they may exit at any time."""
    loop = asyncio.get_running_loop()
    delay = reap_strays()
    if delay is not None and loop not in _sweeping:
        _sweeping.add(loop)
        loop.call_later(delay, _sweep_again, loop)


def _sweep_again(loop: asyncio.AbstractEventLoop) -> None:
    delay = reap_strays()
    if delay is None:
        _sweeping.discard(loop)
    else:
        loop.call_later(delay, _sweep_again, loop)
