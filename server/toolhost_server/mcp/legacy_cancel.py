"""Cancellation of /mcp calls by a POSTed `notifications/cancelled`, which the SDK drops on stateless HTTP.

A handshake-era client (2025-11-25: the TypeScript SDK, most hosts) cancels a call by POSTing the notification
and keeps the call's response stream open. Stateless, that POST reaches a fresh dispatcher that never saw the
call, so the tool would run on. /mcp keeps its own table of running calls, keyed by who called (the identity
and the client's address) and the request's JSON-RPC id, and the endpoint cancels the entry of the same owner
only: a caller with a token of its own can never stop another's call by guessing its id, nor can a host on
another machine that shares its token. (A 2026-07-28 client cancels by closing the stream instead; the SDK then
cancels the handler itself.)

Best effort, as the notification itself is: a cancel that arrives before the call is registered, or at
another worker process, finds nothing. Stateless, nothing tells apart two clients of one identity on one
machine (one shared token, every anonymous loopback client, every certificate when the client CA alone admits):
a cancel reaches each of their calls with that id. One token per host keeps them apart.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
from mcp.server.streamable_http import REQUEST_CANCELLED
from mcp.shared.dispatcher import as_request_id, coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, RequestId

from ..auth import Caller
from .backend import CallArguments, CallOutcome, ProgressReport, ToolBackend, ToolPage

CANCELLED_METHOD = "notifications/cancelled"
_CANCELLED_BYTES = CANCELLED_METHOD.encode()


def owner_of(caller: Caller, address: str) -> Hashable:
    """Whose calls a cancel may reach: the same authenticated identity (one token, one certificate) from the
    same client address (the connection's own: the HTTP listener trusts no X-Forwarded-For)."""
    return (caller.method, caller.name, address)


class InFlightCalls:
    """The /mcp tools/call requests running in this process, by owner and JSON-RPC id."""

    def __init__(self) -> None:
        # A list per key: two clients of one caller may have the same id in flight.
        self._calls: dict[tuple[Hashable, RequestId], list[anyio.CancelScope]] = {}
        self.stopped = False

    def __len__(self) -> int:
        return sum(len(scopes) for scopes in self._calls.values())

    @contextmanager
    def running(self, owner: Hashable, request_id: RequestId) -> Iterator[anyio.CancelScope]:
        """A cancel scope for the call's work, cancellable by `cancel(owner, request_id)` while the block runs.
        The scope absorbs that cancellation: check `cancelled_caught` after the block."""
        key = (owner, coerce_request_id(request_id))
        scope = anyio.CancelScope()
        self._calls.setdefault(key, []).append(scope)
        try:
            with scope:
                yield scope
        finally:
            scopes = self._calls[key]
            scopes.remove(scope)
            if not scopes:
                del self._calls[key]

    def cancel(self, owner: Hashable, request_id: RequestId) -> int:
        """Cancel `owner`'s calls with that id; how many there were (0 for an unknown id: harmless)."""
        scopes = self._calls.get((owner, coerce_request_id(request_id)), [])
        for scope in scopes:
            scope.cancel()
        return len(scopes)


    def stop_all(self) -> None:
        """Cancel every call, now and from now on: the server is shutting down and its grace is over."""
        self.stopped = True
        for scopes in self._calls.values():
            for scope in scopes:
                scope.cancel()


def cancelled_request_id(body: bytes) -> RequestId | None:
    """The id a `notifications/cancelled` body cancels; None for any other body. Cheap for the bodies of
    every other message: only one that names the method is parsed."""
    if _CANCELLED_BYTES not in body:
        return None
    try:
        message: Any = json.loads(body)
    except (ValueError, RecursionError):
        return None  # the SDK answers what it cannot parse
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or "id" in message \
            or message.get("method") != CANCELLED_METHOD:
        return None
    params = message.get("params")
    return as_request_id(params.get("requestId")) if isinstance(params, dict) else None


class CancellableBackend:
    """`backend` for one request, whose tools/call is registered in `calls` while it runs. A cancelled call
    is answered as the SDK answers one on this wire: JSON-RPC error -32800 ("Request cancelled"), which a
    client that cancelled has stopped waiting for; one stopped by the server's shutdown, with an error that
    says so."""

    def __init__(self, backend: ToolBackend, calls: InFlightCalls, owner: Hashable,
                 request_id: RequestId | None) -> None:
        self._backend = backend
        self._calls = calls
        self._owner = owner
        self._request_id = request_id

    async def list_tools(self, cursor: str) -> ToolPage:
        return await self._backend.list_tools(cursor)

    async def call(self, request: CallArguments, progress: ProgressReport | None) -> CallOutcome:
        if self._request_id is None:
            return await self._backend.call(request, progress)
        with self._calls.running(self._owner, self._request_id) as scope:
            if self._calls.stopped:
                scope.cancel()
            return await self._backend.call(request, progress)
        if self._calls.stopped:
            raise MCPError(code=INTERNAL_ERROR, message="the server shut down before the call finished; "
                                                        "call again (another replica, or once it is back)")
        raise MCPError(code=REQUEST_CANCELLED, message="Request cancelled")

    def tool_changes(self) -> AsyncIterator[None]:
        return self._backend.tool_changes()
