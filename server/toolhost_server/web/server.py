"""uvicorn running the ASGI app as a task of the current event loop, next to the gRPC server; over TLS when
the server has a certificate."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, suppress

import uvicorn
from starlette.applications import Starlette
from starlette.routing import BaseRoute

from ..config import Config
from ..introspection.surface import ServingSurface
from ..telemetry.metrics import ToolhostMetrics
from .app import create_http_app, http_routes
from .metrics_token import load_metrics_token
from .tls import ReloadingServerContext, http_server_context


class _EmbeddedServer(uvicorn.Server):
    """uvicorn without its signal handlers: serve.py owns SIGTERM and SIGINT and stops this server itself."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class HttpServer:
    """Binds `address` ("host:port"; port 0 picks one) at `start()`, which returns the bound port; serves
    HTTPS with `tls`. With `surface`, records there the app's routes now and the bound address at start.
    `services` are what the app's routes need running while it serves (the MCP endpoint's task group): entered
    at start, before the first request, and left at stop, after the last."""

    def __init__(self, app: Starlette, address: str, tls: ReloadingServerContext | None = None,
                 metrics_token: bool = False, surface: ServingSurface | None = None,
                 services: Sequence[AbstractAsyncContextManager[object]] = ()) -> None:
        self._app = app
        self._services = tuple(services)
        self._running_services = AsyncExitStack()
        self._address = address
        self.tls = tls
        self._metrics_token = metrics_token
        self._surface = surface
        if surface is not None:
            surface.set_http_routes(http_routes(app))
        self._server: _EmbeddedServer | None = None
        self._task: asyncio.Task[None] | None = None
        self.port = 0

    @property
    def protection(self) -> str:
        """What guards the listener, for the start-up log line: "" when nothing does."""
        said = ""
        if self.tls is not None:
            said = " over TLS, client certificates required" if self.tls.client_certificates_required \
                else " over TLS"
        if self._metrics_token:
            said += "; /metrics needs the metrics token"
        return said

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
        if self._surface is not None:
            self._surface.add_address("http", f"{self._address.rpartition(':')[0]}:{self.port}", self.tls is not None)
        # No access log (every scrape would be a line) and no logging configuration of its own (the server's
        # redacting handlers apply). The socket listens already: requests wait in its backlog until uvicorn runs.
        config = uvicorn.Config(self._app, log_config=None, access_log=False, lifespan="off")
        config.load()
        # Our context rather than one uvicorn makes from file names: its SNI callback switches each connection
        # to the newest certificate (web.tls).
        config.ssl = self.tls.context if self.tls is not None else None
        self._server = _EmbeddedServer(config)
        for service in self._services:
            await self._running_services.enter_async_context(service)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="http-server")
        return self.port

    async def stop(self) -> None:
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        with suppress(asyncio.CancelledError):
            await self._task
        await self._running_services.aclose()


def create_http_server(config: Config, metrics: ToolhostMetrics, ready: Callable[[], bool],
                       surface: ServingSurface | None = None, routes: Sequence[BaseRoute] = (),
                       services: Sequence[AbstractAsyncContextManager[object]] = ()) -> HttpServer:
    """The HTTP listener of `config.http_address`: TLS when the server has a certificate (client certificates
    required with tls_client_ca_file), /metrics behind metrics_token_file when set, `routes` beside them with
    the `services` they need; recorded on `surface` when given. OSError naming the setting when a file cannot
    be used."""
    token = load_metrics_token(config.metrics_token_file)
    return HttpServer(create_http_app(metrics, ready, token, routes), config.http_address,
                      http_server_context(config), metrics_token=token is not None, surface=surface,
                      services=services)
