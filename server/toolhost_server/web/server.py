"""uvicorn running the ASGI app as a task of the current event loop, next to the gRPC server, behind the
browser guard (web.guard); over TLS when the server has a certificate.

Bounded so that no client holds the server: at most `max_connections` connections at once (one more is answered
503), request bodies under the guard's size and time limits, and a stop that waits at most `stop_seconds` for
open requests (and not at all once `exit_now()` is called: a second signal)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import socket
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, suppress

import uvicorn
from starlette.applications import Starlette
from starlette.routing import BaseRoute

from ..config import Config
from ..introspection.surface import ServingSurface
from ..telemetry.metrics import ToolhostMetrics
from .app import LIVE_PATH, METRICS_PATH, READY_PATH, create_http_app, http_routes
from .guard import RequestGuard
from .guard_rules import GuardPolicy, GuardSettings, is_wildcard_bind
from .metrics_token import load_metrics_token
from .tls import ReloadingServerContext, http_server_context

logger = logging.getLogger("toolhost.http")

# Beyond what calls and subscriptions/listen streams may hold (each max_in_flight_calls), the connections left
# for probes, scrapes, listings and idle keep-alive clients.
_SPARE_CONNECTIONS = 64
# How long open requests may take to finish once the listener stops, beyond the processes' kill grace: by then
# every call has ended, so only answers still being written are left.
_STOP_SLACK_SECONDS = 1.0


def max_http_connections(config: Config) -> int:
    """The HTTP listener's connection limit: every call and subscriptions/listen stream the server allows
    (max_in_flight_calls each), plus some spare."""
    return 2 * config.max_in_flight_calls + _SPARE_CONNECTIONS


def http_stop_seconds(config: Config) -> float:
    """How long stopping the HTTP listener waits for open requests before it cancels them."""
    return config.kill_grace_seconds + _STOP_SLACK_SECONDS


class _EmbeddedServer(uvicorn.Server):
    """uvicorn without its signal handlers: serve.py owns SIGTERM and SIGINT and stops this server itself."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class HttpServer:
    """Binds `address` ("host:port"; port 0 picks one) at `start()`, which returns the bound port; serves
    HTTPS with `tls`. With `surface`, records there the app's routes now and the bound address at start.
    `services` are what the app's routes need running while it serves (the MCP endpoint's task group): entered
    at start, before the first request, and left at stop, after the last. Every route but `open_paths` is
    behind the browser guard of `guard` (default: loopback names with the bound port, no Origin, 16 MiB
    bodies), whose policy, complete once the port is known, is `guard_policy` from start on. At most
    `max_connections` at once (None: no limit); `stop()` waits at most `stop_seconds` for open requests."""

    def __init__(self, app: Starlette, address: str, tls: ReloadingServerContext | None = None,
                 metrics_token: bool = False, surface: ServingSurface | None = None,
                 services: Sequence[AbstractAsyncContextManager[object]] = (),
                 guard: GuardSettings | None = None, max_connections: int | None = None,
                 stop_seconds: float = 5.0) -> None:
        self._app = app
        self.max_connections = max_connections
        self._stop_seconds = stop_seconds
        self._guard = guard or GuardSettings()
        self.guard_policy: GuardPolicy | None = None
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
        if self.guard_policy is not None:
            said += "; " + self.guard_policy.describe()
        return said

    async def start(self) -> int:
        host, _, port = self._address.rpartition(":")
        host = host.strip("[]")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # Bound here rather than by uvicorn, so that a busy port fails the start with OSError like gRPC's, and
        # port 0 tells which port it got.
        # IPPROTO_TCP named: asyncio sets TCP_NODELAY on accepted connections only when the listening socket
        # says it is TCP, and without it each keep-alive answer waits for a delayed ACK (~40 ms a request).
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
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
        self.guard_policy = self._guard.policy(host, self.port)
        self._log_guard(host, self.guard_policy)
        guarded = RequestGuard(self._app, self.guard_policy, self.open_paths)
        # No access log (every scrape would be a line) and no logging configuration of its own (the server's
        # redacting handlers apply). The socket listens already: requests wait in its backlog until uvicorn runs.
        # No proxy headers: a local process must not rewrite the client's address or scheme with X-Forwarded-*.
        config = uvicorn.Config(guarded, log_config=None, access_log=False, lifespan="off", proxy_headers=False,
                                limit_concurrency=self.max_connections,
                                timeout_graceful_shutdown=math.ceil(self._stop_seconds))
        config.load()
        # Our context rather than one uvicorn makes from file names: its SNI callback switches each connection
        # to the newest certificate (web.tls).
        config.ssl = self.tls.context if self.tls is not None else None
        self._server = _EmbeddedServer(config)
        for service in self._services:
            await self._running_services.enter_async_context(service)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="http-server")
        return self.port

    @property
    def open_paths(self) -> tuple[str, ...]:
        """The routes the browser guard lets through whatever the Host: the health probes, and /metrics when a
        scraper must prove itself anyway, by the metrics token or a client certificate (the two ways check_exposure
        admits beyond loopback). Without either, a page rebinding its name to a loopback server could read it."""
        scrapers_prove_themselves = self._metrics_token or (
            self.tls is not None and self.tls.client_certificates_required)
        return (LIVE_PATH, READY_PATH, METRICS_PATH) if scrapers_prove_themselves else (LIVE_PATH, READY_PATH)

    def _log_guard(self, host: str, policy: GuardPolicy) -> None:
        if policy.any_host:
            logger.warning("http_allowed_hosts is '*': the HTTP routes answer any Host, so a web page this "
                           "machine's browser opens can reach them by DNS rebinding; list the names clients use "
                           "instead (host:port, or host:* for any port)")
        elif is_wildcard_bind(host) and not policy.configured_hosts:
            logger.info("HTTP listens on every address, but its routes other than %s "
                        "answer only Host localhost:%d, 127.0.0.1:%d and [::1]:%d; to reach them by other names set "
                        "http_allowed_hosts (TOOLHOST_HTTP_ALLOWED_HOSTS), for example "
                        "toolhost.NAMESPACE.svc:%d or toolhost.example.com:*", " and ".join(self.open_paths),
                        self.port, self.port, self.port, self.port)

    async def stop(self) -> None:
        """Stop listening, wait for open requests (at most `stop_seconds`, then they are cancelled), and leave
        the services."""
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        with suppress(asyncio.CancelledError):
            await self._task
        await self._running_services.aclose()

    def exit_now(self) -> None:
        """Stop at once, open requests left unanswered (a second signal); a `stop()` under way returns, and
        the next one waits for nothing."""
        if self._server is not None:
            self._server.should_exit = True
            self._server.force_exit = True


def create_http_server(config: Config, metrics: ToolhostMetrics, ready: Callable[[], bool],
                       surface: ServingSurface | None = None, routes: Sequence[BaseRoute] = (),
                       services: Sequence[AbstractAsyncContextManager[object]] = ()) -> HttpServer:
    """The HTTP listener of `config.http_address`: TLS when the server has a certificate (client certificates
    required with tls_client_ca_file), /metrics behind metrics_token_file when set, `routes` beside them with
    the `services` they need, behind the browser guard of http_allowed_hosts, http_allowed_origins and
    max_message_bytes; at most max_http_connections(config) connections, and stopping waits at most
    http_stop_seconds(config) for open requests; recorded on `surface` when given. OSError naming the setting
    when a file cannot be used."""
    token = load_metrics_token(config.metrics_token_file)
    return HttpServer(create_http_app(metrics, ready, token, routes), config.http_address,
                      http_server_context(config), metrics_token=token is not None, surface=surface,
                      services=services, guard=GuardSettings.of(config),
                      max_connections=max_http_connections(config), stop_seconds=http_stop_seconds(config))
