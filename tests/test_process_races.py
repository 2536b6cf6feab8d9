"""Races between calls: one call's stop must never take another call's processes for its own."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from toolhost_server.runners.process_launch import SAFE_PATH
from toolhost_server.runners.process_tree import ProcessTree

from helpers.waiting import until


@contextmanager
def output_pipe() -> Iterator[tuple[int, int]]:
    """A pipe like a call's stdout: (read end, the server's; write end, the call's)."""
    read_end, write_end = os.pipe()
    try:
        yield read_end, write_end
    finally:
        os.close(read_end)
        os.close(write_end)


@contextmanager
def server_child_holding(descriptor: int) -> Iterator[subprocess.Popen[bytes]]:
    """A child of the server with no marker, holding `descriptor` open: what rule 5 looks at."""
    child = subprocess.Popen(["sleep", "300"], pass_fds=(descriptor,), env={"PATH": SAFE_PATH})
    try:
        yield child
    finally:
        child.kill()
        child.wait()


def alive(child: subprocess.Popen[bytes]) -> bool:
    try:
        with open(f"/proc/{child.pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except FileNotFoundError:
        return False


async def test_a_process_the_server_forks_for_another_call_is_not_taken_for_this_ones():
    # Between fork and exec the child of any spawn holds a copy of every descriptor of the server, among them
    # the read end of each running call's output pipes, and carries no marker yet. A call stopping meanwhile
    # once took it for its own (by the pipe) and SIGTERMed another call's leader before its script ran.
    with output_pipe() as (read_end, _), server_child_holding(read_end) as spawning:
        tree = ProcessTree(uuid.uuid4().hex, pipes=frozenset({os.fstat(read_end).st_ino}))
        assert not tree.may_have_leftovers()
        await tree.stop(grace_seconds=0.05)
        assert alive(spawning)


async def test_a_process_that_kept_the_calls_output_open_for_writing_is_still_stopped():
    with output_pipe() as (_, write_end), server_child_holding(write_end) as escaped:
        tree = ProcessTree(uuid.uuid4().hex, pipes=frozenset({os.fstat(write_end).st_ino}))
        assert tree.may_have_leftovers()
        await tree.stop(grace_seconds=0.05)
        await until(lambda: not alive(escaped), "the process holding the output pipe stopped")
