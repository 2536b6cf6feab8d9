"""The HTTP app's browser guard: a pure ASGI middleware in front of every route but the probes' (health and
/metrics), so that a web page cannot drive tools on a loopback server by DNS rebinding or a cross-site request.

In order, each refusal a small JSON body {"error", "message"} and `Connection: close`:
- 403 unless there is exactly one `Host` and the policy allows it (web.guard_rules);
- 403 when an `Origin` header is present and not allowed;
- 415 for POST, PUT and PATCH with a body unless `Content-Type` is application/json (parameters ignored): the
  types a page may send without a CORS preflight (text/plain, forms) never reach an endpoint;
- 413 when `Content-Length` is over max_message_bytes (before the app runs), or when a body of unknown length
  (chunked) grows past it as the app reads it;
- 408 when the body has not arrived whole within body_seconds of the headers.

Nothing is read ahead of the app: the guard counts the body in the `receive` it hands on, so an endpoint that
authenticates first (/mcp, 401) never takes a byte of an unauthenticated body. Past a limit the guard answers
in the app's place (when the app has not answered yet) and tells the app the client went away. A response sent
before the body was read whole closes the connection, so that the server reads nothing more of a body it did
not want.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Collection

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .guard_rules import GuardPolicy

_JSON_TYPE = b"application/json"
_METHODS_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})
# Over 20 digits is over any limit, and int() of thousands of digits raises instead of answering.
_MAX_LENGTH_DIGITS = 20
_SHOWN_CHARACTERS = 100
_POLICY_VIOLATION = 1008  # the WebSocket close code for a refused handshake


class RequestGuard:
    """Wraps `app`: requests to `open_paths` (exact paths) pass untouched, the others are checked against
    `policy` first. Lifespan events pass."""

    def __init__(self, app: ASGIApp, policy: GuardPolicy, open_paths: Collection[str]) -> None:
        self._app = app
        self._policy = policy
        self._open_paths = frozenset(open_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan" or scope["path"] in self._open_paths:
            await self._app(scope, receive, send)
            return
        policy = self._policy
        host: bytes | None = None
        hosts = content_types = 0
        refused_origin: bytes | None = None
        content_type = length = b""
        chunked = False
        # One pass over the raw headers, compared as bytes: this runs before every /mcp call.
        for name, value in scope["headers"]:
            if name == b"host":
                hosts += 1
                host = value
            elif name == b"origin":
                if refused_origin is None and not policy.allows_origin(value):
                    refused_origin = value
            elif name == b"content-type":
                content_types += 1
                content_type = value
            elif name == b"content-length":
                length = value
            elif name == b"transfer-encoding":
                chunked = True
        refusal = _header_refusal(policy, hosts, host, refused_origin)
        if refusal is not None:
            await _refuse(kind, send, 403, *refusal)
            return
        if kind != "http":
            await self._app(scope, receive, send)
            return
        bodiless = not chunked and content_types == 0 and length in (b"", b"0")
        # A request with no body at all (`curl -X POST URL`) has nothing to type: the REST reload takes one.
        # It is no way around the rule for pages: a browser sends Origin on every cross-site POST.
        if scope["method"] in _METHODS_WITH_BODY and not bodiless and (
                content_types != 1 or not _is_json(content_type)):
            await _refuse(kind, send, 415, "unsupported_media_type",
                          "the request body must be JSON: send Content-Type: application/json")
            return
        limit = policy.max_body_bytes
        if length.isdigit() and (len(length) > _MAX_LENGTH_DIGITS or int(length) > limit):
            await _refuse(kind, send, 413, *_too_large(limit))
            return
        # A Content-Length body cannot pass the limit any more, but it can stall: every body is read through
        # the guard's bounds.
        body = _GuardedBody(receive, send, limit, policy.body_seconds, has_body=chunked or length not in (b"", b"0"))
        try:
            await self._app(scope, body.receive, body.send)
        except ClientDisconnect:
            if not body.refused:
                raise
            # The app read on after the guard had answered for it (Starlette's request.body()): already answered.


def _header_refusal(policy: GuardPolicy, hosts: int, host: bytes | None,
                    refused_origin: bytes | None) -> tuple[str, str] | None:
    if hosts != 1 or host is None:
        return ("missing_host", "send exactly one Host header, naming the address the client connected to "
                "(HTTP/1.1 requires it)")
    if not policy.allows_host(host):
        return ("host_not_allowed", f"Host {_shown(host)} is not a name this server answers to (DNS-rebinding "
                "protection): connect by an allowed name, or add this one to http_allowed_hosts "
                "(TOOLHOST_HTTP_ALLOWED_HOSTS)")
    if refused_origin is not None:
        return ("origin_not_allowed", f"Origin {_shown(refused_origin)} is not allowed: web pages may call this "
                "server only from origins listed in http_allowed_origins (TOOLHOST_HTTP_ALLOWED_ORIGINS); "
                "clients other than browsers send no Origin")
    return None


def _is_json(content_type: bytes) -> bool:
    return content_type == _JSON_TYPE or content_type.partition(b";")[0].strip().lower() == _JSON_TYPE


def _too_large(limit: int) -> tuple[str, str]:
    return ("body_too_large", f"the request body is over {limit} bytes: send less, or raise max_message_bytes "
            "(TOOLHOST_MAX_MESSAGE_BYTES)")


def _shown(value: bytes) -> str:
    text = value.decode("latin-1")
    return repr(text if len(text) <= _SHOWN_CHARACTERS else text[:_SHOWN_CHARACTERS] + "...")


class _GuardedBody:
    """The request's `receive` and `send` as the app gets them: the body counted and timed as the app reads it.

    Past `limit` bytes (413) or `seconds` after the headers (408) the guard answers in the app's place, unless
    the app has answered already, and from then on the app reads a disconnect and its own answer is dropped.
    Once the body is whole, `receive` is the server's again, unbounded: the app waits on it for the client to
    go away (a stream of events)."""

    def __init__(self, receive: Receive, send: Send, limit: int, seconds: float, has_body: bool) -> None:
        self._receive = receive
        self._send = send
        self._limit = limit
        self._seconds = seconds
        self._deadline = asyncio.get_running_loop().time() + seconds
        self._size = 0
        self._whole = not has_body
        self._answered = False
        self.refused = False

    async def receive(self) -> Message:
        if self.refused:
            return {"type": "http.disconnect"}
        if self._whole:
            return await self._receive()
        try:
            async with asyncio.timeout_at(self._deadline):
                message = await self._receive()
        except TimeoutError:
            await self._refuse(408, "request_timeout", f"the request body did not arrive within {self._seconds:g}s "
                               "of its headers: send the whole body at once, and check the network in between")
            return {"type": "http.disconnect"}
        if message["type"] != "http.request":
            self._whole = True
            return message
        self._size += len(message.get("body", b""))
        if self._size > self._limit:
            await self._refuse(413, *_too_large(self._limit))
            return {"type": "http.disconnect"}
        if not message.get("more_body", False):
            self._whole = True
        return message

    async def send(self, message: Message) -> None:
        if self.refused:
            return  # the guard answered for the app: there is nothing left to answer
        if message["type"] == "http.response.start":
            self._answered = True
            if not self._whole:
                message = {**message, "headers": [*message.get("headers", ()), (b"connection", b"close")]}
        await self._send(message)

    async def _refuse(self, status: int, error: str, message: str) -> None:
        self.refused = True
        if not self._answered:
            await _refuse("http", self._send, status, error, message)


async def _refuse(kind: str, send: Send, status: int, error: str, message: str) -> None:
    if kind != "http":
        # Closing before accepting refuses the handshake (the server answers it with 403).
        await send({"type": "websocket.close", "code": _POLICY_VIOLATION, "reason": error})
        return
    body = json.dumps({"error": error, "message": message}).encode()
    # Connection: close, so that the server neither keeps a refused client nor reads the body it did not want.
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", _JSON_TYPE), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
