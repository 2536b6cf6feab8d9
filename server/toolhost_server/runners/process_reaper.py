"""The server as child subreaper, and reaping the orphans it adopts without stealing asyncio's exit statuses.

The server makes itself a child subreaper, so the orphans of a tool are reparented to the server rather than to
init. That keeps the end of a normal call cheap: everything a finished tool left running is now a direct child
of the server, so reading one /proc file of the server's children tells whether anything is left, and the full
/proc scan (process_table) only runs when something is (or when a call is stopped early).

Adopted orphans, recognised or not, must be reaped by the server. asyncio's child watcher waits only for the
pids it spawned, by pid, so reaping is done the same way: waitpid() on a specific zombie child of the server
that is not a leader asyncio spawned (those are in `spawned_leaders`). A zombie not recognised as a call's is
left alone while a spawn is under way (`spawning()`: the new child's pid is not known yet) and until it has
been a zombie for a moment (so it is not a child that asyncio is about to reap). Never waitpid(-1), which
would steal asyncio's exit statuses. `sweep_strays()` does this at each call's start and end, and again every
second while the server has children it did not spawn (daemons that may exit later) or calls run (a fork chain
leaves a zombie of the server per generation); where the kernel keeps no list of a process's children, only
the scans of stopping calls find such zombies.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import logging
import os
import sys
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from typing import Final

from .process_table import children_of_server, read_stat

logger = logging.getLogger("toolhost.runners.process")

_PR_SET_CHILD_SUBREAPER: Final = 36
_SWEEP_INTERVAL_SECONDS: Final = 1.0
_STRAY_AGE_SECONDS: Final = 0.2

# The leaders the process runners spawned through asyncio and asyncio has not reported exited yet: asyncio
# reaps them, so they are never waitpid()ed here, and other calls never take them for their own.
spawned_leaders: set[int] = set()
_spawns_in_progress = 0
_spawns_lock = threading.Lock()


@contextlib.contextmanager
def spawning() -> Iterator[None]:
    """Hold around an asyncio spawn until its pid is in `spawned_leaders` (or the spawn failed).

    Meanwhile the new child may already be a zombie that asyncio is about to reap, under a pid not known yet,
    so unrecognised zombies are left to a later sweep.
    """
    global _spawns_in_progress
    # Spawns happen on the event loop and in worker threads (memory_query's, database_schema's): a lock, since
    # `+=` is a read and a write another thread may come between.
    with _spawns_lock:
        _spawns_in_progress += 1
    try:
        yield
    finally:
        with _spawns_lock:
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

def reap_strays(candidates: Iterable[int] | None = None) -> float | None:
    """Reap the zombie children of the server that no one else waits for, each by its pid; `candidates` are
    the pids to look at (default: the server's children, from the kernel's list). Returns when the next
    sweep is due, in seconds: soon when a zombie had to be left for now, later when a child the server did
    not spawn still runs or a call's leader does (its tool may leave zombies of the server at any time, one
    per generation of a fork chain), never (None) when none of these.

    A zombie this function does not know to be a call's is left alone while a spawn is under way (it may be
    the new leader, exited already) and until a sweep at least `_STRAY_AGE_SECONDS` earlier saw it: by then
    any child that something else in the server spawned through asyncio has been reaped by asyncio.
    """
    if candidates is None:
        if not become_child_subreaper():
            return None  # then the server has no children but those it spawned itself
        candidates = children_of_server() or ()
    server = os.getpid()
    now = time.monotonic()
    left: dict[tuple[int, int], float] = {}
    others_run = False
    for pid in candidates:
        stat = read_stat(pid) if pid not in spawned_leaders else None
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
    return _SWEEP_INTERVAL_SECONDS if others_run or spawned_leaders else None


# The unrecognised zombie children of the server the last sweep left, by (pid, start time): when it first saw each.
_strays_seen: dict[tuple[int, int], float] = {}
_sweeping: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()


def sweep_strays() -> None:
    """Reap stray zombies now (see `reap_strays`), and again as long as the server has children it did not
    spawn or calls run: they may exit at any time."""
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
