"""A gate across processes: a python tool of a `toolhost serve` child announces each of its calls on a unix socket
the test listens on, and returns once the test releases it (helpers.gates is the in-process version). Its
catalog entrypoint is `helpers.socket_gates:socket_gated_echo`.

    async with SocketGate() as gate:
        write_tool(catalog_dir, "gated", socket_gated_tool("gated"))
        ... start calls of `gated` with arguments {"gate": gate.path} ...
        await gate.started(32)     # 32 calls are inside the tool now
        gate.release()             # each returns its text
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from types import TracebackType


class SocketGate:
    """Listens on a unix socket of its own; each call of socket_gated_echo connects to it and waits there."""

    def __init__(self) -> None:
        # A short directory: a unix socket's path is limited to about 100 bytes.
        self._directory = Path(tempfile.mkdtemp(prefix="gate-"))
        self.path = str(self._directory / "gate.sock")
        self._arrived: list[asyncio.StreamWriter] = []
        self._changed = asyncio.Condition()
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> SocketGate:
        self._server = await asyncio.start_unix_server(self._call_arrived, self.path)
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        for writer in self._arrived:
            writer.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        shutil.rmtree(self._directory, ignore_errors=True)

    async def _call_arrived(self, _reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with self._changed:
            self._arrived.append(writer)
            self._changed.notify_all()

    async def started(self, count: int) -> None:
        """Return once `count` calls are waiting at the gate."""
        async with self._changed:
            await self._changed.wait_for(lambda: len(self._arrived) >= count)

    def release(self) -> None:
        """Let every call waiting now return."""
        for writer in self._arrived:
            writer.write(b"go\n")


async def socket_gated_echo(gate: str, text: str = "done") -> str:
    """Entrypoint `helpers.socket_gates:socket_gated_echo`: connects to the gate at `gate`, waits for the
    release, returns `text`."""
    reader, writer = await asyncio.open_unix_connection(gate)
    try:
        if not await reader.readline():
            raise RuntimeError("the gate closed without releasing the call")
    finally:
        writer.close()
    return text


def socket_gated_tool(name: str) -> str:
    """A catalog file for a tool running socket_gated_echo, with `gate` required and `text` defaulting to done."""
    return (f"name: {name}\ndescription: Answers when the test releases its gate.\n"
            "runner: {type: python, entrypoint: 'helpers.socket_gates:socket_gated_echo'}\n"
            "parameters: [{name: gate, type: string, required: true}, {name: text, type: string, default: done}]\n")
