"""The private temporary directory of a call: made fresh for it, out of sight the moment the call ends.

Making and removing a directory costs a filesystem much more than renaming one. On this project's ext4
benchmark machine (journal, online discard) mkdir took 40-110 µs and rmdir 100-400 µs when the disk was quiet,
0.7 ms and 2 ms while other processes wrote to it, against 1.5-2 ms for a whole call of `true`; a rename in the
same directory stayed at 20-40 µs. So the call's path only renames, and one worker thread does the rest:

  - it makes a spare directory ahead, under a hidden name (`.toolhost-spare-<pid>-<start>-<random>`, 0700,
    empty); a call renames the spare to its own `toolhost-call-<random>` name and takes it only if it is still
    a 0700 directory of the server's user with nothing in it (a tool running as that user can find the spare
    and write into it, and the next call may be another caller's), else makes one itself;
  - a finished call's directory is renamed to a hidden name (`.toolhost-removed-<pid>-<start>-<random>`): from then on
    the call's path names nothing, which is what the call promises, and no other call is ever given it. The
    worker then removes it with whatever the tool left in it (the call's processes were stopped before). Where
    that rename fails, the directory is removed before the call returns, as it always was.

No directory is given to two calls: a spare is taken by one call only, and a call's directory is never reused.
This moves work off the call's path; it does not save it: on a machine without an idle core the worker
competes with the calls. At exit the worker finishes what is queued and removes the spare. A server killed
meanwhile leaves its hidden directories behind; the next server to start a call removes those of processes that
no longer run (`pid` and `start`, the process's start time: a restarted container's server is pid 1 again), with
whatever a tool left in them.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import functools
import logging
import os
import queue
import secrets
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable
from typing import Final

from .process_table import read_stat

CALL_DIR_PREFIX: Final = "toolhost-call-"
SPARE_PREFIX: Final = ".toolhost-spare-"
REMOVED_PREFIX: Final = ".toolhost-removed-"
# Spares made ahead: one per call that can start before the worker has made the next.
SPARES: Final = 1
# How long the exiting interpreter waits for the removals still queued.
_EXIT_WAIT_SECONDS: Final = 30.0

_spares: collections.deque[str] = collections.deque()
# The worker's jobs: a directory to remove (with the names of the server's own files in it), or None: make a
# spare. _STOP ends the worker.
_jobs: queue.SimpleQueue[tuple[str, tuple[str, ...]] | str | None] = queue.SimpleQueue()
_STOP: Final = "stop"

logger = logging.getLogger("toolhost.runners.process")


def make_call_dir() -> str:
    """A new private (0700) directory for one call, in the temporary directory (TMPDIR, or /tmp)."""
    parent = tempfile.gettempdir()
    worker = _worker()
    path = ""
    with contextlib.suppress(IndexError):
        spare = _spares.popleft()  # atomic: a spare goes to one call only
        if os.path.dirname(spare) == parent:  # else it was made before the temporary directory changed
            named = _name(parent, CALL_DIR_PREFIX)
            with contextlib.suppress(OSError):
                os.rename(spare, named)
                spare = named
                if _untouched(named):
                    path = named
        if not path and worker is not None:
            _jobs.put((spare, ()))
    if worker is not None:
        _jobs.put(None)  # the next spare
    return path or new_dir(parent, CALL_DIR_PREFIX)


def _untouched(path: str) -> bool:
    """Whether `path` is still as new_dir made it: a directory of this user, 0700, empty."""
    status = os.lstat(path)
    return (stat.S_ISDIR(status.st_mode) and status.st_uid == os.geteuid() and stat.S_IMODE(status.st_mode) == 0o700
            and not os.listdir(path))


def new_dir(parent: str, prefix: str) -> str:
    """mkdtemp with less Python around the mkdir: an unguessable name, 0700, made only if it is new."""
    while True:
        path = _name(parent, prefix)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return path


def _name(parent: str, prefix: str) -> str:
    # The hidden names carry the server's pid and start time, by which a later server tells a dead server's
    # leftovers.
    middle = "" if prefix == CALL_DIR_PREFIX else f"{_this_process()}-"
    return os.path.join(parent, f"{prefix}{middle}{secrets.token_hex(8)}")


@functools.cache
def _this_process() -> str:
    own = read_stat(os.getpid())
    return f"{os.getpid()}-{own.start_time if own is not None else 0}"


async def discard_call_dir(call_dir: str, inside: tuple[str, ...] = ()) -> None:
    """Make `call_dir` vanish from its path now, and have it removed with its contents. `inside` names files
    the server itself wrote there (a script), removed first: then the usual empty directory needs no walk."""
    hidden = _name(os.path.dirname(call_dir), REMOVED_PREFIX)
    try:
        os.rename(call_dir, hidden)
    except OSError:
        await asyncio.to_thread(remove_tree, call_dir, inside)
        return
    worker = _worker()
    if worker is None or not worker.is_alive():  # the interpreter is exiting: no more threads
        remove_tree(hidden, inside)
    else:
        _jobs.put((hidden, inside))


def remove_tree(path: str, inside: tuple[str, ...] = ()) -> None:
    """Remove the directory `path`: the files `inside` it, then the directory, or failing that the whole tree."""
    for name in inside:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(path, name))
    try:
        os.rmdir(path)
    except OSError:
        # The tool left files behind. rmtree follows no symbolic link, not even one put in place of `path`.
        shutil.rmtree(path, ignore_errors=True)


def clear_stale(parent: str) -> None:
    """Remove the hidden directories in `parent` that servers no longer running left behind (killed ones):
    only directories of this user, named with the pid and start time of a process that does not run now."""
    if read_stat(os.getpid()) is None:
        return  # no /proc to tell a running server from a gone one
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        prefix = SPARE_PREFIX if name.startswith(SPARE_PREFIX) else REMOVED_PREFIX
        if not name.startswith(prefix):
            continue
        pid, _, rest = name[len(prefix):].partition("-")
        start = rest.partition("-")[0]
        # Anyone may name an entry in /tmp: only ASCII digits are read as numbers.
        if not (pid.isascii() and pid.isdigit() and start.isascii() and start.isdigit()) or _running(pid, start):
            continue
        path = os.path.join(parent, name)
        with contextlib.suppress(OSError):
            status = os.lstat(path)
            if stat.S_ISDIR(status.st_mode) and status.st_uid == os.geteuid():
                remove_tree(path)


def _running(pid: str, start: str) -> bool:
    """Whether the process `pid` that started at `start` runs: a pid alone may be another process's by now."""
    found = read_stat(int(pid))
    return found is not None and int(start) == found.start_time


@functools.cache
def _worker() -> threading.Thread | None:
    """The worker, started on first use."""
    thread = threading.Thread(target=_work, name="toolhost-call-dirs", daemon=True)
    try:
        thread.start()
    except RuntimeError:
        return None
    atexit.register(_stop, thread)
    return thread


def _work() -> None:
    _survive(clear_stale, tempfile.gettempdir())
    while (job := _jobs.get()) != _STOP:
        if isinstance(job, tuple):
            _survive(remove_tree, *job)
        elif job is None and len(_spares) < SPARES:
            # A failure (TMPDIR gone, disk full) is the next call's own mkdir to report.
            with contextlib.suppress(OSError):
                _spares.append(new_dir(tempfile.gettempdir(), SPARE_PREFIX))


def _survive(job: Callable[..., None], *args: str | tuple[str, ...]) -> None:
    """Run one job; a failure is logged and the worker goes on: every later call's directory depends on it."""
    try:
        job(*args)
    except Exception:
        logger.exception("removing temporary call directories failed")


def _stop(thread: threading.Thread) -> None:
    _jobs.put(_STOP)
    thread.join(_EXIT_WAIT_SECONDS)
    while _spares:
        with contextlib.suppress(IndexError, OSError):
            os.rmdir(_spares.popleft())
