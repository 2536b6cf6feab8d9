"""Finding and stopping every process one tool call started, including those that left its process group.

A call's processes are recognised by, in order of trust:
  1. the call's marker, TOOLHOST_CALL_MARKER=<random hex>, in /proc/<pid>/environ (inherited by every
     descendant that does not clear its environment, whatever session or group it moves to);
  2. descent, via the ppid in /proc/<pid>/stat, from a process already recognised;
  3. the leader's session or process group (catches children that cleared their environment but stayed put),
     unless the process carries another call's marker, and only while the leader's pid is not someone else's;
  4. a (pid, start time) pair recognised in an earlier scan of the same call (exact even after the process
     lost its parent or became a zombie);
  5. for an orphan the server adopted: holding the call's stdout or stderr pipe open for writing (only the
     call's processes can have inherited that end; the read end is also held by the server and by each process
     it forks until that execs, such as another call's leader being spawned). Looked at only for the server's
     own children, so scans do not read every process's descriptors.
A process that clears its environment, calls setsid(), closes or redirects its output and loses its parent
before a scan sees it is not recognised (a proper daemon); only a cgroup per call would close that gap.

Finding out whether a finished call left anything is cheap because the server is a child subreaper
(process_reaper): what a call left running has become a direct child of the server, so one read of the
server's children list answers, and the full /proc read (process_table) runs only when something is left or
a call is stopped early.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Final

from .process_reaper import become_child_subreaper, reap_strays, spawned_leaders
from .process_table import ProcessStat, ProcessTable, children_of_server, read_all_shared, read_stat

logger = logging.getLogger("toolhost.runners.process")

_FIRST_POLL_SECONDS: Final = 0.005
_LONGEST_POLL_SECONDS: Final = 0.05
# SIGKILL cannot be ignored; only a process stuck in the kernel (state D) outlives a few rounds.
_KILL_ROUNDS: Final = 200
# When the kill cannot yield to the event loop, it blocks it for at most this many short rounds.
_BLOCKING_KILL_ROUNDS: Final = 50
_BLOCKING_POLL_SECONDS: Final = 0.001


@dataclass(slots=True)
class _Scan:
    alive: list[ProcessStat] = field(default_factory=list)
    zombies: list[ProcessStat] = field(default_factory=list)


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
        stat = read_stat(leader) if leader is not None and leader in spawned_leaders else None
        self._leader_start = stat.start_time if stat is not None else None

    def may_have_leftovers(self) -> bool:
        """After the leader exited: whether anything of the call may still run or wait to be reaped.

        Cheap when the answer is no: one read of the server's children list. False negatives are only the
        unrecognisable processes the module docstring describes.
        """
        if not become_child_subreaper():
            return True
        children = children_of_server()
        if children is None:
            return True
        candidates = {pid for pid in children if pid != self.leader and pid not in spawned_leaders}
        if not candidates:
            return False
        pids = candidates if self.leader is None else candidates | {self.leader}
        return not candidates.isdisjoint(self._recognised(ProcessTable.read(self._server, pids)))

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
                scan, table = self._select(await read_all_shared())
        except asyncio.CancelledError:
            self._kill_without_yielding()
            raise
        self._finish(scan, table)

    async def _terminate(self, grace_seconds: float) -> tuple[_Scan, ProcessTable]:
        """SIGTERM (and SIGCONT) each process once, new ones as they appear; what is alive after the grace."""
        self._signal_group(signal.SIGTERM)
        scan, table = self._select(await read_all_shared())
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
            scan, table = self._select(await read_all_shared())
        return scan, table

    def _kill(self, scan: _Scan) -> None:
        self._signal_group(signal.SIGKILL)
        _signal(scan.alive, signal.SIGKILL)

    def _kill_without_yielding(self) -> None:
        scan, table = self._select(ProcessTable.read(self._server))
        for _ in range(_BLOCKING_KILL_ROUNDS):
            if not scan.alive:
                break
            self._kill(scan)
            time.sleep(_BLOCKING_POLL_SECONDS)
            scan, table = self._select(ProcessTable.read(self._server))
        self._finish(scan, table)

    def _finish(self, scan: _Scan, table: ProcessTable) -> None:
        if scan.alive:
            logger.error("processes %s of a call survive SIGKILL (stuck in the kernel?); giving up on them",
                         [s.pid for s in scan.alive])
        for stat in scan.zombies:
            # Recognised as the call's, so not a child being spawned: reaped even while a spawn is under way.
            if stat.ppid == self._server and stat.pid != self.leader and stat.pid not in spawned_leaders:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(stat.pid, os.WNOHANG)
        if children_of_server() is None:  # no list for sweep_strays: reap the other zombies the scan saw
            reap_strays(s.pid for s in table.stats.values() if s.ppid == self._server and s.finished)

    def _signal_group(self, signum: signal.Signals) -> None:
        # The leader's process group id stays the call's only while asyncio has not reaped the leader; after
        # that the number could be reused, so the group is signalled through its members instead.
        if self.leader is not None and self.leader in spawned_leaders:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.leader, signum)

    def _recognised(self, table: ProcessTable) -> set[int]:
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

    def _select(self, table: ProcessTable) -> tuple[_Scan, ProcessTable]:
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


def _signal(stats: list[ProcessStat], signum: signal.Signals) -> None:
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
            current = read_stat(stat.pid)
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

