"""Reading /proc: the stat and environment of every process, and the pipes the server's children write to.

What process_tree recognises a call's processes by, read as one `ProcessTable`. A full read takes every
process's stat and environment (about 50 ms for 1,000 processes), so `read_all_shared` runs it in a worker
thread, and the calls that need one while one is under way share the next.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import os
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

CALL_MARKER_VARIABLE: Final = "TOOLHOST_CALL_MARKER"
_MARKER_PREFIX: Final = b"\0" + CALL_MARKER_VARIABLE.encode() + b"="


@dataclass(frozen=True, slots=True)
class ProcessStat:
    """The fields of /proc/<pid>/stat the process runners use."""

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


def read_proc_file(path: str) -> bytes:
    """The whole of a small /proc file, with bare system calls: open() with its buffering, fstat and isatty
    costs twice as much, and every process call reads several."""
    descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(descriptor, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(descriptor)


def read_stat(pid: int) -> ProcessStat | None:
    try:
        data = read_proc_file(f"/proc/{pid}/stat")
    except OSError:
        return None
    # The command name is in parentheses and may itself contain ") ", so split at the last one.
    fields = data[data.rindex(b")") + 2:].split()
    return ProcessStat(pid, fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))


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


def _pipes_written_by(pid: int) -> frozenset[str]:
    """The pipes the process holds open for writing, as their /proc/<pid>/fd links read ("pipe:[<inode>]").

    Only the writing end: the server holds the read end of every running call's output pipes, and so does
    each process it forks, until that process execs (another call's leader being spawned)."""
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return frozenset()
    links = set()
    for descriptor in descriptors:
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/{pid}/fd/{descriptor}")
            if link.startswith("pipe:") and _open_for_writing(pid, descriptor):
                links.add(link)
    return frozenset(links)


def _open_for_writing(pid: int, descriptor: str) -> bool:
    """Whether the process's descriptor was opened to write (its "flags:" in /proc/<pid>/fdinfo, in octal)."""
    for line in read_proc_file(f"/proc/{pid}/fdinfo/{descriptor}").splitlines():
        if line.startswith(b"flags:"):
            return (int(line[len(b"flags:"):], 8) & os.O_ACCMODE) in (os.O_WRONLY, os.O_RDWR)
    return False


def children_of_server() -> set[int] | None:
    """The server's direct children as the kernel lists them for its main thread, or None if /proc cannot say.

    Orphans are always adopted by the subreaper's main thread while it lives, which Python's does.
    """
    children = listed_children_of_server()
    return None if children is None else set(children)


def listed_children_of_server() -> list[int] | None:
    """`children_of_server` in the kernel's order: the latest spawned or adopted last."""
    pid = os.getpid()
    try:
        return [int(p) for p in read_proc_file(f"/proc/{pid}/task/{pid}/children").split()]
    except OSError:
        return None


@dataclass(slots=True)
class ProcessTable:
    """One reading of /proc (the server itself left out), indexed for process_tree's recognition rules."""

    stats: dict[int, ProcessStat] = field(default_factory=dict)
    children: dict[int, list[int]] = field(default_factory=dict)
    # Session and process group ids, each with the processes in it.
    groups: dict[int, list[int]] = field(default_factory=dict)
    by_marker: dict[bytes, list[int]] = field(default_factory=dict)
    marked: set[int] = field(default_factory=set)
    # The pipes each live child of the server that carries no marker holds open for writing (process_tree's
    # rule 5).
    pipes: dict[int, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def read(cls, server: int, pids: Iterable[int] | None = None) -> ProcessTable:
        """Every process, or only `pids`. Blocking: about 50 µs a process."""
        if pids is None:
            pids = [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
        table = cls()
        for pid in pids:
            stat = read_stat(pid) if pid != server else None
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
                table.pipes[pid] = _pipes_written_by(pid)
        return table


class _SharedReads:
    """Full /proc reads for the calls of one event loop, in a worker thread, one at a time. A call that asks
    while a read runs gets the next one, shared with every other call that asks meanwhile: a read always
    starts after the request, and 20 calls stopping together cost a few reads, not 20."""

    def __init__(self) -> None:
        self._running = False
        self._next: asyncio.Future[ProcessTable] | None = None

    def request(self) -> asyncio.Future[ProcessTable]:
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
            work = _scan_executor().submit(ProcessTable.read, os.getpid())
        except RuntimeError:  # the interpreter is exiting and takes no more threads: read in this one
            future.set_result(ProcessTable.read(os.getpid()))
            return
        self._running = True

        def report(_: concurrent.futures.Future[ProcessTable]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile; no one waits any more
                loop.call_soon_threadsafe(self._deliver, future, work)

        work.add_done_callback(report)

    def _deliver(self, future: asyncio.Future[ProcessTable], work: concurrent.futures.Future[ProcessTable]) -> None:
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


async def read_all_shared() -> ProcessTable:
    """A full read of /proc that starts after this call, shared with the calls asking meanwhile."""
    loop = asyncio.get_running_loop()
    reads = _shared_reads.get(loop)
    if reads is None:
        reads = _shared_reads[loop] = _SharedReads()
    # Shielded: one caller cancelled must not cancel the read the others wait for.
    return await asyncio.shield(reads.request())

