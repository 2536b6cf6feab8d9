"""Reading a `toolhost serve` child's stderr while a test runs, so that a server under load never blocks on a full
pipe (its log writer waits for the pipe, then logging waits for the writer), and its log can be searched.

    async with draining(server):       # after server.start()
        ... load the server ...
        await logged(server, rb"cannot write \\d+ audit records")
    await server.wait()                # reads the rest itself
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

from helpers.servers import ServerProcess
from helpers.waiting import HANG_GUARD_SECONDS, until


@asynccontextmanager
async def draining(server: ServerProcess) -> AsyncIterator[None]:
    """Append the server's stderr lines to `server.log` as they come, until the block ends."""
    reading = asyncio.ensure_future(_read_lines(server))
    try:
        yield
    finally:
        reading.cancel()
        with suppress(asyncio.CancelledError):
            await reading


async def _read_lines(server: ServerProcess) -> None:
    assert server.process is not None and server.process.stderr is not None
    while line := await server.process.stderr.readline():
        server.log += line


async def logged(server: ServerProcess, pattern: bytes, seconds: float = HANG_GUARD_SECONDS) -> re.Match[bytes]:
    """The first match of `pattern` in the server's log, once a drained line holds it."""
    await until(lambda: re.search(pattern, server.log) is not None, f"a log line matching {pattern!r}", seconds,
                interval=0.05)
    found = re.search(pattern, server.log)
    assert found is not None
    return found
