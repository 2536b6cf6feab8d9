"""Finding and stopping every process one tool call started, including those that left its process group.

A call's processes are recognised by, in order of trust:
  0. being in the call's cgroup, where it has one (process_cgroup): whatever the process did to its
     environment, session or output, it cannot leave that unless it runs as root (or as the server's user,
     where the server is not root);
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
A process without a cgroup that clears its environment, calls setsid(), closes or redirects its output and
loses its parent before a scan sees it is not recognised (a proper daemon).

Because the server is a child subreaper (process_reaper), everything a call started is a descendant of the
server. Finding out whether a finished call left anything walks down from the server's children
(process_sweep), which is cheap when nothing is left; stopping a call SIGTERMs what the scans of /proc
(process_table) find, kills its cgroup, then freezes and kills what walks from the server find (a process that
forks and exits in a chain outruns any scan of /proc, not the walks), until a scan finds nothing alive.
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

from .process_cgroup import CallCgroup
from .process_reaper import become_child_subreaper, reap_strays, spawned_leaders
from .process_signals import LeaderGroup, signal_processes
from .process_steps import run_steps, run_steps_blocking
from .process_sweep import ProcessChase
from .process_table import ProcessStat, ProcessTable, children_of_server, read_all_shared, read_stat

logger = logging.getLogger("toolhost.runners.process")

_FIRST_POLL_SECONDS: Final = 0.005
_LONGEST_POLL_SECONDS: Final = 0.05
# SIGKILL cannot be ignored; only a process stuck in the kernel (state D) outlives a few rounds.
_KILL_ROUNDS: Final = 200
# When the kill cannot yield to the event loop, it blocks it for at most this many short rounds.
_BLOCKING_KILL_ROUNDS: Final = 50
_BLOCKING_POLL_SECONDS: Final = 0.001
# Walks from the server (process_sweep): how many tell whether a finished call left anything (when they cannot,
# the call is stopped), and how long stopping one may chase a process that keeps forking, with and without
# yielding. A walk takes well under a millisecond when little is left.
_CENSUS_WALKS: Final = 20
_CHASE_SECONDS: Final = 10.0
_BLOCKING_CHASE_SECONDS: Final = 2.0


@dataclass(slots=True)
class _Scan:
    alive: list[ProcessStat] = field(default_factory=list)
    zombies: list[ProcessStat] = field(default_factory=list)


class ProcessTree:
    """The processes of one call: recognises them (see the module docstring), stops them, reaps its orphans.

    `leader` is the pid asyncio spawned (None: find the call's processes by the marker alone); it is in
    `spawned_leaders` when the tree is made, unless asyncio already reaped it. `pipes` are the inodes of the
    call's stdout and stderr pipes (rule 5); `cgroup` the call's cgroup, if it has one (rule 0). Use::

        tree = ProcessTree(marker, leader=pid)
        ...                                  # the leader exited on its own
        if tree.may_have_leftovers():
            await tree.stop(grace_seconds)
        tree.close()
    """

    def __init__(self, marker: str, leader: int | None = None, pipes: frozenset[int] = frozenset(),
                 cgroup: CallCgroup | None = None) -> None:
        self.leader = leader
        self._pipe_links = frozenset(f"pipe:[{inode}]" for inode in pipes)
        self._marker = marker.encode()
        self._cgroup = cgroup
        self._server = os.getpid()
        self._known: dict[int, int] = {}
        surely_ours = leader is not None and leader in spawned_leaders
        # Recorded while the pid surely is the leader's, to see later whether it was reused (rule 3).
        stat = read_stat(leader) if leader is not None and surely_ours else None
        self._leader_start = stat.start_time if stat is not None else None
        self._group = LeaderGroup(leader) if leader is not None and surely_ours else None

    def close(self) -> None:
        """Let go of the leader's pidfd; the tree signals its group no more."""
        if self._group is not None:
            self._group.close()
            self._group = None

    def may_have_leftovers(self) -> bool:
        """After the leader exited: whether anything of the call may still run or wait to be reaped.

        Cheap when the answer is no: a walk from the server's children (process_sweep), which are few. False
        negatives are only the unrecognisable processes the module docstring describes.
        """
        if not become_child_subreaper() or not ProcessChase.possible():
            return True
        if self._cgroup is not None and self._cgroup.populated():
            return True
        return ProcessChase(self.leader, self.recognise, self.remember).census(_CENSUS_WALKS)

    async def stop(self, grace_seconds: float) -> None:
        """SIGTERM every process of the call, wait up to `grace_seconds` for them to exit, then kill whatever
        is left: the call's cgroup, then what walks from the server find (frozen first, so that nothing forks
        meanwhile), then what a scan finds, until a scan finds nothing alive; finally reap adopted zombies.

        Cancelled meanwhile (the event loop shutting down cancels every task), it kills at once and waits
        for the deaths without yielding, so that even then nothing is left running.
        """
        chase = self._chase()
        try:
            scan, table = await self._terminate(grace_seconds)
            if self._cgroup is not None and not await run_steps(self._cgroup.stopping(self.remember)):
                logger.error("processes in the cgroup %s of a call survive the kill (stuck in the kernel?)",
                             self._cgroup.path)
            for _ in range(_KILL_ROUNDS):
                self._kill(scan)
                caught = chase is None or await run_steps(chase.stopping(_CHASE_SECONDS))
                scan, table = self._select(await read_all_shared())
                if not caught:
                    _report_chase_failure(scan)
                if not scan.alive or not caught:
                    break
                await asyncio.sleep(_FIRST_POLL_SECONDS)
        except asyncio.CancelledError:
            self._kill_without_yielding(chase)
            raise
        finally:
            if chase is not None:
                chase.close()
        self._finish(scan, table)

    def recognise(self, table: ProcessTable) -> set[int]:
        """Rules 0, 1, 3, 4 and 5 of the module docstring: the processes of `table` known without descent."""
        found = set(table.by_marker.get(self._marker, ()))
        found.update(pid for pid, start in self._known.items()
                     if (stat := table.stats.get(pid)) is not None and stat.start_time == start)
        if self._cgroup is not None:
            found.update(pid for pid in self._cgroup.member_pids() if pid in table.stats)
        if self.leader is not None:
            holder = table.stats.get(self.leader) or read_stat(self.leader)
            # A session or group id cannot be reused while a process is in it, but once the leader was reaped
            # the number may be a stranger's new session: then that stranger holds the pid.
            if holder is None or holder.start_time == self._leader_start:
                found.update(pid for pid in table.groups.get(self.leader, ()) if pid not in table.marked)
        if self._pipe_links:
            found.update(pid for pid, links in table.pipes.items() if not links.isdisjoint(self._pipe_links))
        return found

    def remember(self, stat: ProcessStat) -> None:
        """Take the process for the call's from now on, by its pid and start time (rule 4)."""
        self._known[stat.pid] = stat.start_time

    def _chase(self) -> ProcessChase | None:
        """Walks from the server, where they can find everything of the call (see the module docstring)."""
        if not become_child_subreaper() or not ProcessChase.possible():
            return None
        return ProcessChase(self.leader, self.recognise, self.remember)

    async def _terminate(self, grace_seconds: float) -> tuple[_Scan, ProcessTable]:
        """SIGTERM (and SIGCONT) each process once, new ones as they appear; what is alive after the grace."""
        self._signal_group(signal.SIGTERM)
        scan, table = self._select(await read_all_shared())
        terminated: set[int] = set()
        deadline = time.monotonic() + grace_seconds
        delay = _FIRST_POLL_SECONDS
        while scan.alive:
            fresh = [s for s in scan.alive if s.pid not in terminated]
            signal_processes(fresh, signal.SIGTERM)
            # A stopped process cannot act on SIGTERM until it is continued.
            signal_processes(fresh, signal.SIGCONT)
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
        signal_processes(scan.alive, signal.SIGKILL)

    def _kill_without_yielding(self, chase: ProcessChase | None) -> None:
        if self._cgroup is not None:
            run_steps_blocking(self._cgroup.stopping(self.remember), _BLOCKING_POLL_SECONDS)
        scan, table = self._select(ProcessTable.read(self._server))
        caught = True
        for _ in range(_BLOCKING_KILL_ROUNDS):
            self._kill(scan)
            if chase is not None:
                caught = run_steps_blocking(chase.stopping(_BLOCKING_CHASE_SECONDS), _BLOCKING_POLL_SECONDS)
            scan, table = self._select(ProcessTable.read(self._server))
            if not scan.alive or not caught:
                break
            time.sleep(_BLOCKING_POLL_SECONDS)
        if not caught:
            _report_chase_failure(scan)
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
        # Through the leader's pidfd: never the group of another process that took the leader's pid since.
        if self._group is not None:
            self._group.send(signum)

    def _select(self, table: ProcessTable) -> tuple[_Scan, ProcessTable]:
        """The call's processes in `table` (every rule), remembered for rule 4."""
        pending = list(self.recognise(table))
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


def _report_chase_failure(scan: _Scan) -> None:
    """The walks gave up: a process of the call kept forking faster than they could stop it, or outlived SIGKILL."""
    if not scan.alive:  # else _finish names them
        logger.error("a process of a call could not be stopped: it kept forking faster than the server could "
                     "freeze it, or outlives SIGKILL; give the server a cgroup to contain calls "
                     "(process_cgroup_parent)")
