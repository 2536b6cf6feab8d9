"""/mcp: the registry over MCP's streamable HTTP, stateless, on the HTTP listener.

Stateless (no session id) so that any replica or worker process can answer any request. In front of the SDK:
authentication (401 before the SDK sees a byte), the caller handed to the handlers through the request's
scope state, and cancellation by a POSTed `notifications/cancelled` (legacy_cancel). Host, Origin, content
type and size are checked before this endpoint by the HTTP app's guard, for every route alike.

Responses are SSE streams when there is something to stream (progress, subscriptions/listen), because a
plain JSON reply can carry neither progress nor notice that the client went away.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager
from typing import Any

from mcp.server import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from .. import __version__
from ..app import Toolhost
from ..auth import Caller
from ..auth.rights import Right
from ..errors import UnauthenticatedError
from ..web.app import requires
from ..web.http_auth import HttpAuthentication, authorization_of, challenge
from .backend import ToolBackend
from .legacy_cancel import CancellableBackend, InFlightCalls, cancelled_request_id, owner_of
from .listen_streams import ListenStreams, StreamLimitedBackend
from .local_backend import LocalBackend
from .protocol_server import build_mcp_server
from .sdk_logging import quiet_sdk_loggers

MCP_PATH = "/mcp"
# Where the endpoint leaves the authenticated caller in the request's scope state for the handlers.
CALLER_STATE_KEY = "toolhost_mcp_caller"
# And whose calls a posted cancel may reach, and whose subscriptions/listen streams a request counts against.
_OWNER_STATE_KEY = "toolhost_mcp_owner"


class McpHttpEndpoint:
    """The ASGI app of /mcp for `toolhost`. `route` mounts it; `running()` is the SDK's task group, which
    must be entered before the first request and left after the last (HttpServer's `services`). One
    endpoint per HTTP app: the SDK's manager runs once."""

    def __init__(self, toolhost: Toolhost) -> None:
        config = toolhost.config
        self._toolhost = toolhost
        self._max_bytes = config.max_message_bytes
        # Shared with the REST API: a bearer token, or a TLS connection when the client CA is the access list.
        self._authentication = HttpAuthentication.of(toolhost)
        self.calls = InFlightCalls()
        # As many streams as calls may run at once: the HTTP listener's connection limit leaves room for both.
        self.listen_streams = ListenStreams(total=config.max_in_flight_calls)
        quiet_sdk_loggers()
        self._manager = StreamableHTTPSessionManager(
            app=build_mcp_server(self._backend_of, version=__version__),
            stateless=True,
            json_response=False,
            # The guard checks Host and Origin for every route before this endpoint (403, not the SDK's 421).
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            max_request_body_size=self._max_bytes,
        )
        self.route = Route(MCP_PATH, requires(Right.AUTHENTICATED, self), methods=["POST"])

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The SDK's task group for the requests of this endpoint, while the block runs (enter once). It
        lives in a task of its own, so that it may be entered and left by different tasks (a test fixture)."""
        stop = asyncio.Event()
        started = asyncio.Event()

        async def run() -> None:
            async with self._manager.run():
                started.set()
                await stop.wait()

        task = asyncio.create_task(run(), name="mcp-http-requests")
        waiting = asyncio.create_task(started.wait())
        await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
        if not started.is_set():
            waiting.cancel()
            await task  # raises what stopped it
        try:
            yield
        finally:
            stop.set()
            await task

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            caller = self._authenticate(scope)
        except UnauthenticatedError as exc:
            await _unauthenticated(exc, scope)(scope, receive, send)
            return
        body = await _read_body(receive, self._max_bytes)
        if body is None:
            await _error(413, "body_too_large", f"the request body is over {self._max_bytes} bytes: send less, "
                         "or raise max_message_bytes (TOOLHOST_MAX_MESSAGE_BYTES)")(scope, receive, send)
            return
        if isinstance(body, _Disconnected):
            return
        owner = owner_of(caller, _client_address(scope))
        request_id = cancelled_request_id(body)
        if request_id is not None:
            self.calls.cancel(owner, request_id)
            # Accepted whether or not it found the call, as any notification is: it says nothing about
            # calls that are not the caller's own.
            await Response(status_code=202)(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        state[CALLER_STATE_KEY] = caller
        state[_OWNER_STATE_KEY] = owner
        await self._manager.handle_request(scope, _replaying(body, receive), send)

    def _authenticate(self, scope: Scope) -> Caller:
        return self._authentication.caller(scope)

    def _backend_of(self, ctx: ServerRequestContext[Any, Any]) -> ToolBackend:
        state = getattr(ctx.request, "state", None)
        caller = getattr(state, CALLER_STATE_KEY, None) if state is not None else None
        if not isinstance(caller, Caller):
            # Never a default caller: a request that did not pass __call__ must not reach a tool.
            raise RuntimeError("an /mcp request reached the MCP handlers without an authenticated caller")
        owner: Hashable = getattr(state, _OWNER_STATE_KEY)
        cancellable = CancellableBackend(LocalBackend(self._toolhost, caller), self.calls, owner, ctx.request_id)
        return StreamLimitedBackend(cancellable, self.listen_streams, owner)


def _client_address(scope: Scope) -> str:
    """The connection's peer address ("" when the server does not know it, as on a unix socket)."""
    client = scope.get("client")
    return str(client[0]) if client else ""


class _Disconnected:
    """The client went away before its body was read."""


async def _read_body(receive: Receive, limit: int) -> bytes | _Disconnected | None:
    """The whole request body, or None once it grows past `limit` (nothing more is read)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return _Disconnected()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """`receive` with the body already read given back first. Later calls go to the client's connection, so
    that the SDK still notices a disconnect (that is how a 2026-07-28 client cancels)."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replay


def _unauthenticated(exc: UnauthenticatedError, scope: Scope) -> Response:
    sent_token = authorization_of(scope) is not None
    message = exc.message if sent_token else \
        "/mcp needs the header 'Authorization: Bearer <token>' with a token from the server's auth file"
    return _error(401, "unauthenticated", message, {"WWW-Authenticate": challenge(scope)})


def _error(status: int, error: str, message: str, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse({"error": error, "message": message}, status_code=status, headers=headers)
