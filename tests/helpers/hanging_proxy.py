"""A TCP proxy in front of PostgreSQL that relays a connection's start (the TLS refusal, the login) and then, once
the server has said ReadyForQuery the first time, swallows everything the server sends: the backend "hangs" at the
application level while TCP keeps acknowledging, as a stuck pgbouncer, a SIGSTOPped backend or a hostile server
would. Statement timeouts are the server's to enforce, so none ever fires.

    async with HangingProxy(cluster.port) as proxy:
        url = f"postgresql://user:pw@127.0.0.1:{proxy.port}/db"
        ...
        await proxy.wait_for(lambda: proxy.hanging == 1, "one connection hanging")
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from types import TracebackType

from helpers.waiting import within

# PostgreSQL's ReadyForQuery message ('Z', length 5), with its status byte after.
_READY_FOR_QUERY = b"Z\x00\x00\x00\x05"


class HangingProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.accepted = 0  # connections made through the proxy
        self.hanging = 0  # connections past their login, whose answers are swallowed from then on
        self.closed = 0  # connections the client side has closed
        self._changed = asyncio.Condition()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> HangingProxy:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def wait_for(self, condition: Callable[[], bool], what: str) -> None:
        """Until `condition` holds: it is looked at each time a connection is accepted, hangs or closes."""
        async def changed() -> None:
            async with self._changed:
                await self._changed.wait_for(condition)

        await within(changed(), what)

    async def _note(self, counter: str) -> None:
        async with self._changed:
            setattr(self, counter, getattr(self, counter) + 1)
            self._changed.notify_all()

    async def _relay(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        await self._note("accepted")
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        answers = asyncio.create_task(self._answers(server_reader, client_writer))
        try:
            with contextlib.suppress(ConnectionError):
                while data := await client_reader.read(65536):
                    server_writer.write(data)
                    await server_writer.drain()
        finally:
            await self._note("closed")
            answers.cancel()
            with contextlib.suppress(BaseException):
                await answers
            for writer in (server_writer, client_writer):
                writer.close()
            self._tasks.discard(task)

    async def _answers(self, server_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        hanging = False
        with contextlib.suppress(ConnectionError):
            while data := await server_reader.read(65536):
                if hanging:
                    continue  # swallowed: the client waits for an answer that never comes
                client_writer.write(data)
                await client_writer.drain()
                if _READY_FOR_QUERY in data:
                    hanging = True
                    await self._note("hanging")
