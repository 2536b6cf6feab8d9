"""The HTTP app's browser guard: a pure ASGI middleware in front of every route but the probes' (health and
/metrics), so that a web page cannot drive tools on a loopback server by DNS rebinding or a cross-site request.

In order, each refusal a small JSON body {"error", "message"} and `Connection: close`:
- 403 unless there is exactly one `Host` and the policy allows it (web.guard_rules);
- 403 when an `Origin` header is present and not allowed;
- 415 for POST, PUT and PATCH with a body unless `Content-Type` is application/json (parameters ignored): the
  types a page may send without a CORS preflight (text/plain, forms) never reach an endpoint;
- 413 when `Content-Length` is over max_message_bytes, or a chunked body grows past it. A chunked body is read
  before the app runs, at most the limit plus the server's last chunk, so a refusal is a clean 413.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Collection

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
        if chunked or (length and not length.isdigit()):
            read = await _read_body(receive, limit)
            if read is None:
                await _refuse(kind, send, 413, *_too_large(limit))
                return
            receive = _replay(read, receive)
        elif length and (len(length) > _MAX_LENGTH_DIGITS or int(length) > limit):
            await _refuse(kind, send, 413, *_too_large(limit))
            return
        # Otherwise the HTTP server delivers exactly Content-Length bytes (none without it): nothing to count.
        await self._app(scope, receive, send)


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


async def _read_body(receive: Receive, limit: int) -> list[Message] | None:
    """The messages of a body of unknown length, up to its end (or a disconnect); None once it passes `limit`,
    without reading further."""
    messages: list[Message] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages
        size += len(message.get("body", b""))
        if size > limit:
            return None
        if not message.get("more_body", False):
            return messages


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = deque(messages)

    async def replayed() -> Message:
        return pending.popleft() if pending else await receive()

    return replayed


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
