"""The `toolhost` command run as a real child process, in an environment without the caller's TOOLHOST_*
settings. `toolhost` runs it through asyncio, so that a server on the test's own event loop keeps serving
while the command waits for it; `toolhost_offline` for commands that need no server."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from typing import NamedTuple

from helpers.waiting import within


class Run(NamedTuple):
    """How a command ended: its exit code and what it wrote (`code, out, err = await toolhost(...)`)."""

    code: int
    out: str
    err: str


def cli_env(**extra: str) -> dict[str, str]:
    """This process's environment without TOOLHOST_* variables, plus `extra`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("TOOLHOST_")}
    env.update(extra)
    return env


async def toolhost(*args: str, env: dict[str, str] | None = None, stdin: bytes | None = None) -> Run:
    """Run `toolhost *args` to its end, with `stdin` as its input (none when not given)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "toolhost_server.cli", *args, env=env or cli_env(),
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await within(process.communicate(stdin), f"toolhost {' '.join(args)} ending")
    return Run(await process.wait(), out.decode(), err.decode())


def toolhost_offline(*args: str) -> Run:
    """Run `toolhost *args` to its end, blocking: for commands that talk to no server on this event loop."""
    done = subprocess.run([sys.executable, "-m", "toolhost_server.cli", *args], env=cli_env(),
                          capture_output=True, text=True, timeout=60, check=False)
    return Run(done.returncode, done.stdout, done.stderr)
