"""The `toolhost` command with its stdout, its stderr or both on pseudo-terminals, as a person runs it: what it
writes there is read as it comes. A stream not on a terminal is a pipe, read as helpers.cli does."""

from __future__ import annotations

import asyncio
import os
import pty
import sys
import tty

from helpers.cli import Run
from helpers.waiting import within


def _read_until_closed(leader: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: every writer has closed the terminal
            return b"".join(chunks)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


async def toolhost_on_terminals(*args: str, env: dict[str, str], stdout: bool = True, stderr: bool = True) -> Run:
    """Run `toolhost *args` to its end with the streams asked for on terminals (raw: no \\r added to newlines)."""
    terminals: dict[str, tuple[int, int]] = {}
    for name, wanted in (("stdout", stdout), ("stderr", stderr)):
        if wanted:
            leader, follower = pty.openpty()
            tty.setraw(follower)
            terminals[name] = (leader, follower)
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "toolhost_server.cli", *args, env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=terminals["stdout"][1] if stdout else asyncio.subprocess.PIPE,
            stderr=terminals["stderr"][1] if stderr else asyncio.subprocess.PIPE)
        for name, (leader, follower) in terminals.items():
            os.close(follower)
            terminals[name] = (leader, -1)
        readers = [asyncio.to_thread(_read_until_closed, leader) for leader, _ in terminals.values()]
        *read, (piped_out, piped_err) = await within(asyncio.gather(*readers, process.communicate()),
                                                     f"toolhost {' '.join(args)} ending")
    finally:
        for leader, follower in terminals.values():
            if follower >= 0:
                os.close(follower)
            os.close(leader)
    shown = dict(zip(terminals, read, strict=True))
    out = shown.get("stdout", piped_out)
    err = shown.get("stderr", piped_err)
    return Run(await process.wait(), out.decode(errors="replace"), err.decode(errors="replace"))
