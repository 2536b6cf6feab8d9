"""Finding a call's processes by walking down from the server, and stopping them for good: each is frozen
(SIGSTOP) when a walk finds it and killed once a walk finds nothing new, so that a process forking and exiting
in a chain cannot outrun the search, as it outruns a scan of all of /proc (each generation is gone before the
scan reads it, and its child was not there yet when the scan listed /proc).

It needs the server to be a child subreaper (process_reaper): every process a call started is then a
descendant of the server, and the children of one that dies become the server's at once. A walk reads the
server's children, recognises the call's among them (by process_tree's rules, given as `recognise`), and goes
down from those through each thread's /proc/<pid>/task/<tid>/children: a child of the call's is the call's.

A walk that finds no live process of the call, and no child of the server or process of the call newly dead (or
newly reaped), proves that none is left. Take one alive when the walk read the server's children: its topmost
ancestor below the server was then the server's child, and one of the call's. Read later, that ancestor was
alive (found) or newly dead (its children had moved to the server before it became a zombie, after the read);
nothing reaps it meanwhile but the server. A process born after the read had a parent of the call alive at the
read, so the same holds for it. What the rules cannot recognise at all (a daemon that cleared its environment,
left the session and closed its output) is out of reach, as it is for a scan.

A frozen process cannot fork, so freezing what each walk finds closes the set; the set is killed when a walk
adds nothing to it. A process in the kernel (state D, such as a vfork parent waiting for its frozen child)
stops only when it leaves; after a few walks the set is killed anyway and the walks go on.
"""

from __future__ import annotations

import collections
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from .process_reaper import reap_strays, spawned_leaders
from .process_signals import ProcessHandle
from .process_steps import Steps
from .process_table import (
    ProcessStat,
    ProcessTable,
    children_of_server,
    listed_children_of_server,
    read_proc_file,
    read_stat,
)

# How often one walk reads the server's children again, after finding the newest just dead.
_RELISTS: Final = 20
# Walks follow one another without yielding to the event loop for at most this long.
_STRETCH_SECONDS: Final = 0.01
# Walks that may wait for frozen processes to reach the stopped state before they are killed anyway.
_UNSETTLED_WALKS: Final = 20
_UNSETTLED_PAUSE_SECONDS: Final = 0.001
# After a kill, the killed need a moment to die; kills after which nothing died end the chase.
_AFTER_KILL_PAUSE_SECONDS: Final = 0.001
_FUTILE_KILLS: Final = 50
_STOPPED: Final = (b"T", b"t")

_Key = tuple[int, int]  # (pid, start time): one process, whatever later takes its pid


@dataclass(slots=True)
class _Walk:
    alive: bool = False  # found a live process of the call
    froze: bool = False  # froze a process of the call it had not frozen before
    died: bool = False  # found one newly dead or gone, or a child of the server newly dead or reaped
    unsettled: bool = False  # found a frozen process not stopped yet


class ProcessChase:
    """Walks from the server (see the module docstring) for one call. Use::

        chase = ProcessChase(leader, tree.recognise, tree.remember)
        if chase.census(max_walks=20):      # anything of the call alive? (signals nothing)
            done = await run_steps(chase.stopping(budget_seconds=10))
        chase.close()

    `recognise` tells which processes of a ProcessTable are the call's (it sees only the server's children);
    `remember` is told each process the chase freezes.
    """

    def __init__(self, leader: int | None, recognise: Callable[[ProcessTable], set[int]],
                 remember: Callable[[ProcessStat], None]) -> None:
        self._server = os.getpid()
        self._leader = leader
        self._recognise = recognise
        self._remember = remember
        self._frozen: dict[_Key, ProcessHandle] = {}
        self._dead: set[_Key] = set()
        self._strangers: set[_Key] = set()
        self._leader_gone = False
        # Server's children seen dead during the current stretch of walks, which no yield to the event loop
        # interrupts: nothing reaps them meanwhile, so each needs reading once, however many a chain leaves.
        self._dead_pids: set[int] = set()

    @staticmethod
    def possible() -> bool:
        """Whether walks can be made: the kernel lists the server's children (the server must also be a child
        subreaper, which the caller checks)."""
        return children_of_server() is not None

    def census(self, max_walks: int) -> bool:
        """Whether a process of the call may still run: walks, signalling nothing, until one can tell. True
        also when `max_walks` did not settle it."""
        try:
            for _ in range(max_walks):
                walk = self._walk(freeze=False)
                if walk.alive:
                    return True
                if not walk.died:
                    return False
            return True
        finally:
            self._dead_pids.clear()

    def stopping(self, budget_seconds: float) -> Steps:
        """Freeze and kill until a walk finds nothing of the call; True then. False when that took longer than
        `budget_seconds` or what is left outlives SIGKILL (what is frozen is then killed). Run it with
        process_steps: it pauses to let the killed die, and every few milliseconds to let the loop run."""
        now = time.monotonic()
        deadline, stretch_end = now + budget_seconds, now + _STRETCH_SECONDS
        unsettled_walks = futile_kills = 0
        while time.monotonic() < deadline:
            walk = self._walk(freeze=True)
            if not walk.alive and not walk.died:
                self._dead_pids.clear()
                return True
            pause: float | None = None  # None: walk again at once
            if walk.died:
                futile_kills = 0
            if walk.froze:
                unsettled_walks = 0  # the new ones may have children to freeze
            elif walk.alive and walk.unsettled and unsettled_walks < _UNSETTLED_WALKS:
                unsettled_walks += 1
                pause = _UNSETTLED_PAUSE_SECONDS
            elif walk.alive:  # everything found is frozen
                if futile_kills >= _FUTILE_KILLS:
                    break  # what is left outlives SIGKILL (stuck in the kernel)
                self._kill_frozen()
                futile_kills += 1
                unsettled_walks = 0
                pause = _AFTER_KILL_PAUSE_SECONDS
            if pause is None and time.monotonic() < stretch_end:
                continue
            # While the loop runs, the server may reap a zombie and its pid go to a new process.
            self._dead_pids.clear()
            # A chain leaves a zombie child of the server per generation, and every walk reads them all: the
            # old ones are reaped by the server's rule for strays.
            reap_strays()
            yield pause or 0.0
            stretch_end = time.monotonic() + _STRETCH_SECONDS
        self._dead_pids.clear()
        self._kill_frozen()
        return False

    def close(self) -> None:
        """Let go of the frozen processes' pidfds (they were killed, unless the chase was cut short)."""
        for handle in self._frozen.values():
            handle.close()
        self._frozen.clear()

    def _kill_frozen(self) -> None:
        for handle in self._frozen.values():
            handle.send(signal.SIGKILL)

    def _walk(self, freeze: bool) -> _Walk:
        walk = _Walk()
        listed = listed_children_of_server()
        if listed is None:
            walk.alive = True  # cannot tell: assume the worst
            return walk
        # Newest first: the kernel lists the children the server adopted last at the end, so the live link of
        # a chain is read (and frozen) before the zombies its forebears left. When the newest turns out to have
        # just died, its child has just become the server's: the list is read again to get it while it lives.
        pending = collections.deque(reversed(listed))
        done: set[int] = set()
        relists = 0
        while pending:
            pid = pending.popleft()
            if pid in done:
                continue
            done.add(pid)
            dead_before = len(self._dead)
            stat = self._root(pid, True, walk)
            if stat is not None:
                self._descend(stat, freeze, walk)
            elif len(self._dead) > dead_before and relists < _RELISTS:
                relists += 1
                pending.extendleft(listed_children_of_server() or ())  # newest first
        if self._leader is not None and self._leader not in done:
            # Spawned from another thread of the server, it is listed under that thread (or was reaped).
            stat = self._root(self._leader, False, walk)
            if stat is not None:
                self._descend(stat, freeze, walk)
        return walk

    def _root(self, pid: int, was_listed: bool, walk: _Walk) -> ProcessStat | None:
        """The server's child `pid` if it is a live process of the call; news of it if it died."""
        if (pid in spawned_leaders and pid != self._leader) or pid in self._dead_pids:
            return None  # another call's leader, which asyncio reaps; or a zombie seen in this stretch
        stat = read_stat(pid)
        if stat is None:
            # Reaped since it was listed (or, for the leader, since the last walk): its children moved.
            if was_listed or not self._leader_gone:
                walk.died = True
                self._leader_gone = self._leader_gone or not was_listed
            return None
        key = (pid, stat.start_time)
        if key in self._strangers:
            return None
        if stat.finished:
            self._note_dead(key, walk)
            if pid != self._leader:  # asyncio may reap that one any time, from its own thread
                self._dead_pids.add(pid)
            return None
        if key in self._frozen:
            return stat
        table = ProcessTable.read(self._server, [pid])
        current = table.stats.get(pid)
        if current is None or current.start_time != stat.start_time:
            walk.died = True
            return None
        if pid in self._recognise(table):
            return current
        if current.finished:
            self._note_dead(key, walk)
        else:
            self._strangers.add(key)
        return None

    def _descend(self, root: ProcessStat, freeze: bool, walk: _Walk) -> None:
        """Freeze (when `freeze`) `root` and every descendant of it: all the call's."""
        stack = [root]
        while stack:
            stat = stack.pop()
            key = (stat.pid, stat.start_time)
            if stat.finished:
                self._note_dead(key, walk)
                continue
            walk.alive = True
            if freeze and key not in self._frozen:
                handle = ProcessHandle.open(stat)
                if handle is None:  # gone since it was read: its children moved
                    walk.died = True
                    continue
                handle.send(signal.SIGSTOP)
                self._frozen[key] = handle
                self._remember(stat)
                walk.froze = True
            stack.extend(self._children(stat, freeze, walk))

    def _children(self, parent: ProcessStat, freeze: bool, walk: _Walk) -> list[ProcessStat]:
        """The children of each thread of `parent` (a thread's children are listed under that thread).

        Only what is still `parent`'s child when its stat is read: between the list and the stat a child may
        exit, be reaped by its parent (which may not have stopped yet) and its pid go to a stranger."""
        pid = parent.pid
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:  # gone: its children moved up
            walk.died = True
            return []
        listed: list[bytes] = []
        for task in tasks:
            try:
                if freeze and _task_state(pid, task) not in _STOPPED:
                    walk.unsettled = True
                listed += read_proc_file(f"/proc/{pid}/task/{task}/children").split()
            except (OSError, ValueError):
                walk.died = True
        # The lists were the parent's only if its pid was not someone else's by the end of the reading.
        current = read_stat(pid)
        if current is None or current.start_time != parent.start_time:
            walk.died = True
            return []
        found: list[ProcessStat] = []
        for child in listed:
            stat = read_stat(int(child))
            if stat is None or stat.ppid != pid:
                walk.died = True  # gone since it was listed (its children moved to the server)
            else:
                found.append(stat)
        return found

    def _note_dead(self, key: _Key, walk: _Walk) -> None:
        if key not in self._dead:
            self._dead.add(key)
            walk.died = True
        handle = self._frozen.pop(key, None)
        if handle is not None:
            handle.close()


def _task_state(pid: int, task: str) -> bytes:
    data = read_proc_file(f"/proc/{pid}/task/{task}/stat")
    return data[data.rindex(b")") + 2:].split(maxsplit=1)[0]
