"""Signals to a call's processes through pidfds, so that a pid another process has taken since it was seen is
never signalled: to one process (`signal_processes`, `ProcessHandle`) and to the leader's process group
(`LeaderGroup`)."""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
from collections.abc import Iterable
from typing import Final

from .process_table import ProcessStat, read_stat

# <linux/pidfd.h>: pidfd_send_signal() to the process group the pidfd's process leads (Linux 6.9).
PIDFD_SIGNAL_PROCESS_GROUP: Final = 1 << 2
# A handle without a pidfd (a kernel before 5.3, or no descriptor left): signals then go by pid, checked first.
_NO_PIDFD: Final = -1


class ProcessHandle:
    """One process, held by a pidfd opened only after checking that the pid is still the process a scan saw
    (same start time): the kernel then signals that process or none, never a successor under its pid."""

    __slots__ = ("_pidfd", "stat")

    def __init__(self, stat: ProcessStat, pidfd: int) -> None:
        self.stat = stat
        self._pidfd = pidfd

    @classmethod
    def open(cls, stat: ProcessStat) -> ProcessHandle | None:
        """A handle on the process `stat` describes, or None if it is gone (its pid may be another's now)."""
        try:
            pidfd = os.pidfd_open(stat.pid)
        except ProcessLookupError:
            return None
        except (OSError, AttributeError):  # no pidfds here, or no descriptor left: checked by pid at each send
            pidfd = _NO_PIDFD
        current = read_stat(stat.pid)
        if current is None or current.start_time != stat.start_time:
            if pidfd != _NO_PIDFD:
                os.close(pidfd)
            return None
        return cls(stat, pidfd)

    def send(self, signum: signal.Signals) -> bool:
        """Send `signum`; False when the process is gone (a zombie still takes signals, and ignores them)."""
        try:
            if self._pidfd != _NO_PIDFD:
                signal.pidfd_send_signal(self._pidfd, signum)
                return True
            current = read_stat(self.stat.pid)
            if current is None or current.start_time != self.stat.start_time:
                return False
            os.kill(self.stat.pid, signum)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    def close(self) -> None:
        if self._pidfd != _NO_PIDFD:
            os.close(self._pidfd)
            self._pidfd = _NO_PIDFD


def signal_processes(stats: Iterable[ProcessStat], signum: signal.Signals) -> None:
    """Send `signum` to each process, unless its pid now belongs to another (the stats may be a few
    milliseconds old)."""
    for stat in stats:
        handle = ProcessHandle.open(stat)
        if handle is not None:
            try:
                handle.send(signum)
            finally:
                handle.close()


class LeaderGroup:
    """The process group a call's leader started (it runs in a session of its own), signalled as a whole.

    Made while the leader is surely the call's (asyncio spawned it and has not reaped it). Where the kernel can
    signal a group through the leader's pidfd, the signal reaches exactly the group the leader made, even after
    the leader is gone and its pid reused. Elsewhere killpg() is used only while the leader has not exited: its
    pid, and so the group id, cannot be someone else's while it lives.
    """

    def __init__(self, leader: int) -> None:
        self.leader = leader
        try:
            self._pidfd = os.pidfd_open(leader)
        except (OSError, AttributeError):
            self._pidfd = _NO_PIDFD
        self._group_flag = True

    def send(self, signum: signal.Signals) -> None:
        if self._pidfd == _NO_PIDFD:
            return  # the members are signalled one by one, as the scans find them
        if self._group_flag:
            try:
                signal.pidfd_send_signal(self._pidfd, signum, None, PIDFD_SIGNAL_PROCESS_GROUP)
                return
            except (ProcessLookupError, PermissionError):
                return  # no one left in the group (or no one this server may signal)
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
                self._group_flag = False  # a kernel before 6.9
        if not self._exited():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.leader, signum)

    def _exited(self) -> bool:
        """Whether the leader has exited: its pidfd is then readable."""
        poller = select.poll()
        poller.register(self._pidfd, select.POLLIN)
        return bool(poller.poll(0))

    def close(self) -> None:
        if self._pidfd != _NO_PIDFD:
            os.close(self._pidfd)
            self._pidfd = _NO_PIDFD
