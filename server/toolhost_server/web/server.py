"""uvicorn running the ASGI app as a task of the current event loop, next to the gRPC server."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from contextlib import suppress

import uvicorn
from starlette.applications import Starlette


class _EmbeddedServer(uvicorn.Server):
    """uvicorn without its signal handlers: serve.py owns SIGTERM and SIGINT and stops this server itself."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class HttpServer:
    """Binds `address` ("host:port"; port 0 picks one) at `start()`, which returns the bound port."""

    def __init__(self, app: Starlette, address: str) -> None:
        self._app = app
        self._address = address
        self._server: _EmbeddedServer | None = None
        self._task: asyncio.Task[None] | None = None
        self.port = 0

    async def start(self) -> int:
        host, _, port = self._address.rpartition(":")
        host = host.strip("[]")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # Bound here rather than by uvicorn, so that a busy port fails the start with OSError like gRPC's, and
        # port 0 tells which port it got.
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, int(port)))
            sock.listen(128)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            raise OSError(f"cannot listen on {self._address} ({exc.strerror or exc}); change http_address") from exc
        self.port = int(sock.getsockname()[1])
        # No access log (every scrape would be a line) and no logging configuration of its own (the server's
        # redacting handlers apply). The socket listens already: requests wait in its backlog until uvicorn runs.
        config = uvicorn.Config(self._app, log_config=None, access_log=False, lifespan="off")
        self._server = _EmbeddedServer(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="http-server")
        return self.port

    async def stop(self) -> None:
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        with suppress(asyncio.CancelledError):
            await self._task
