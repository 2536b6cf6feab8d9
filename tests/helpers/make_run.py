"""`make run`'s own command, started on free ports as a newcomer would start it: what the README promises of it
is tested against the server it really starts."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import NamedTuple

import grpc
import pytest

from helpers.paths import REPO_ROOT
from helpers.waiting import within

_LISTENING = re.compile(rb"serving gRPC on 127\.0\.0\.1:(\d+)")


def make_run_command() -> str:
    """The command `make run` runs, its prerequisites taken as done."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    printed = subprocess.run(["make", "--no-print-directory", "-n", "-o", "venv", "run"], cwd=REPO_ROOT,
                             capture_output=True, text=True, check=True).stdout.strip().splitlines()
    assert len(printed) == 1 and "toolhost serve" in printed[0], printed
    return printed[0]


class MadeRun(NamedTuple):
    """A server `make run` started: a channel to it, its gRPC port, and its log up to the line saying where it
    serves."""

    channel: grpc.aio.Channel
    port: int
    log: str


@asynccontextmanager
async def make_run(data_dir: Path) -> AsyncIterator[MadeRun]:
    """`make run` with its data in `data_dir`, on free ports and without the caller's TOOLHOST_* settings."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith("TOOLHOST_")}
    environment.update(TOOLHOST_GRPC_ADDRESS="127.0.0.1:0", TOOLHOST_HTTP_ADDRESS="127.0.0.1:0",
                       TOOLHOST_DATA_DIR=str(data_dir))
    # A session of its own: the shell make would run and the server it starts are stopped together.
    process = await asyncio.create_subprocess_shell(
        make_run_command(), cwd=REPO_ROOT, env=environment, start_new_session=True,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    assert process.stderr is not None
    draining: asyncio.Task[bytes] | None = None
    try:
        log = b""

        async def listening() -> re.Match[bytes]:
            nonlocal log
            while (found := _LISTENING.search(log)) is None:
                line = await process.stderr.readline()  # type: ignore[union-attr]
                assert line, f"the server exited before listening:\n{log.decode()}"
                log += line
            return found

        found = await within(listening(), "make run listening")
        # The rest of the log is read and dropped, so that a full pipe never stops the server.
        draining = asyncio.create_task(process.stderr.read())
        port = int(found.group(1))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield MadeRun(channel, port, log.decode())
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
        if draining is not None:
            await draining
