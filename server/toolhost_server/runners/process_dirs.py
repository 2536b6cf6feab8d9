"""The private temporary directory of a call: made fresh for it, out of sight the moment the call ends.

Removing a directory costs a filesystem much more than renaming one: on ext4 (journal, online discard) rmdir
takes 100-400 µs, against about 2 ms for a whole call of `true`. So a finished call's directory is renamed,
in the same parent, to a hidden name (`.toolhost-removed-<random>`): from then on the call's path names
nothing, which is what the call promises, and no other call is ever given it. One worker thread then removes
it, with whatever the tool left in it (the call's processes were stopped before), off the call's path. Where
the rename fails, the directory is removed before the call returns, as it always was.

This moves the work off the call's path; it does not save it: on a machine without an idle core the worker
competes with the calls. At exit the worker finishes what is queued; a server killed meanwhile leaves such a
directory behind, as it would leave the directory of a call under way.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import os
import queue
import secrets
import shutil
import tempfile
import threading
from typing import Final

CALL_DIR_PREFIX: Final = "toolhost-call-"
REMOVED_PREFIX: Final = ".toolhost-removed-"
# How long the exiting interpreter waits for the removals still queued.
_EXIT_WAIT_SECONDS: Final = 30.0

# The directories to remove (with the names of the server's own files in them); None stops the worker.
_removals: queue.SimpleQueue[tuple[str, tuple[str, ...]] | None] = queue.SimpleQueue()


def make_call_dir() -> str:
    """A new private (0700) directory for one call, in the temporary directory (TMPDIR, or /tmp).

    What tempfile.mkdtemp does, with less Python around the mkdir: an unguessable name, made only if new.
    """
    parent = tempfile.gettempdir()
    while True:
        path = os.path.join(parent, CALL_DIR_PREFIX + secrets.token_hex(8))
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return path


async def discard_call_dir(call_dir: str, inside: tuple[str, ...] = ()) -> None:
    """Make `call_dir` vanish from its path now, and have it removed with its contents. `inside` names files
    the server itself wrote there (a script), removed first: then the usual empty directory needs no walk."""
    hidden = os.path.join(os.path.dirname(call_dir), REMOVED_PREFIX + secrets.token_hex(8))
    try:
        os.rename(call_dir, hidden)
    except OSError:
        await asyncio.to_thread(remove_tree, call_dir, inside)
        return
    if _worker() is None:  # the interpreter is exiting: no more threads
        remove_tree(hidden, inside)
    else:
        _removals.put((hidden, inside))


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


@functools.cache
def _worker() -> threading.Thread | None:
    thread = threading.Thread(target=_work, name="toolhost-call-dirs", daemon=True)
    try:
        thread.start()
    except RuntimeError:
        return None
    atexit.register(_stop, thread)
    return thread


def _work() -> None:
    while (job := _removals.get()) is not None:
        remove_tree(*job)


def _stop(thread: threading.Thread) -> None:
    _removals.put(None)
    thread.join(_EXIT_WAIT_SECONDS)
