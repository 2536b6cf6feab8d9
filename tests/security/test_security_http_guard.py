"""Attacks on the HTTP app's browser guard (web/guard.py, issue 23). A web page the user opens must not drive the
tools of a loopback toolhost: by DNS rebinding (its own name resolving to 127.0.0.1, so the browser sends the
attacker's Host), by a cross-site request (the browser sends the page's Origin, or "null" from a sandboxed
frame or a file), by a "simple" request that needs no CORS preflight (text/plain or form bodies); and nobody
may make the server buffer more than max_message_bytes of a body, nor hold a connection with a body that never
ends, nor open connections without end. Each refusal must happen before the route runs: /echo records every
body it was given."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Message, Scope

from toolhost_server.auth.rights import Right
from toolhost_server.config import Config
from toolhost_server.telemetry.metrics import ToolhostMetrics
from toolhost_server.web.app import PROBE_PATHS, create_http_app, requires
from toolhost_server.web.guard import RequestGuard
from toolhost_server.web.guard_rules import GuardSettings
from toolhost_server.web.server import HttpServer, max_http_connections

from helpers.guarded_http import chunk, guarded_server, raw_request
from helpers.waiting import HANG_GUARD_SECONDS, within


def post_head(host: str, *more: str, path: str = "/echo", length: int | str = 2) -> str:
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}", "Content-Type: application/json",
             f"Content-Length: {length}", "Connection: close", *more]
    return "\r\n".join(lines) + "\r\n\r\n"


# --- DNS rebinding: the Host is the attacker's name, or a spelling of loopback nobody dials -------------------

@pytest.mark.parametrize("host", [
    "attacker.example:{port}", "attacker.example", "127.0.0.1", "localhost", "127.0.0.1:{port}.attacker.example",
    "localhost:{port}@attacker.example", "attacker.example#@localhost:{port}", "127.1:{port}", "2130706433:{port}",
    "0x7f000001:{port}", "[::ffff:127.0.0.1]:{port}", "localhost.:{port}", "127.0.0.1:0{port}",
    "127.0.0.1:{port}:{port}", "localhost:+{port}", "[::1]", "", "localhost :{port}",
])
async def test_a_host_that_is_not_a_loopback_name_with_the_port_is_refused(host):
    async with guarded_server() as server:
        answer = await raw_request(server.port, post_head(host.format(port=server.port)) + "{}")
    assert answer.status == 403 and b'"host_not_allowed"' in answer.body
    assert server.bodies == []


@pytest.mark.parametrize("host", [b"localhost\xe9:{port}", b"LOCALHO\xc5\xbfT:{port}", b"xn--localhost:{port}"])
async def test_non_ascii_and_unicode_lookalikes_of_localhost_are_refused(host):
    """Compared as bytes with ASCII lowercasing: no Unicode folding can turn U+017F (long s) into "s"."""
    async with guarded_server() as server:
        head = post_head("HOST").encode().replace(b"HOST", host.replace(b"{port}", str(server.port).encode()))
        answer = await raw_request(server.port, head + b"{}")
    assert answer.status in (400, 403) and server.bodies == []


@pytest.mark.parametrize("order", ["allowed first", "attacker first"])
async def test_two_host_headers_are_refused_whichever_comes_first(order):
    async with guarded_server() as server:
        hosts = [f"127.0.0.1:{server.port}", f"attacker.example:{server.port}"]
        if order == "attacker first":
            hosts.reverse()
        head = post_head(hosts[0], f"Host: {hosts[1]}")
        answer = await raw_request(server.port, head + "{}")
    # uvicorn's h11 parser (what a plain install runs) refuses a repeated Host itself with 400; httptools (installed
    # with `make bench`) passes both on, and the guard refuses them with 403. Either way no route runs.
    if answer.status == 400:
        assert answer.body == b"Invalid HTTP request received."
    else:
        assert answer.status == 403 and b'"missing_host"' in answer.body
    assert server.bodies == []


async def test_a_rebound_page_cannot_use_any_method_nor_dodge_the_guard_by_the_path():
    """The probe paths are exempt by exact match on the decoded path the router also uses."""
    async with guarded_server() as server:
        rebound = f"attacker.example:{server.port}"
        statuses = []
        for method, path in [("GET", "/echo"), ("DELETE", "/echo"), ("OPTIONS", "/echo"), ("POST", "/%65cho"),
                             ("POST", "/healthz/../echo"), ("POST", "/metrics/"), ("GET", "/healthz/"),
                             ("POST", "//echo")]:
            head = f"{method} {path} HTTP/1.1\r\nHost: {rebound}\r\nContent-Type: application/json\r\n" \
                   "Content-Length: 2\r\nConnection: close\r\n\r\n{}"
            statuses.append((method, path, (await raw_request(server.port, head)).status))
    assert all(status == 403 for _, _, status in statuses), statuses
    assert server.bodies == []


# --- cross-site requests: an Origin that is not listed -------------------------------------------------------

@pytest.mark.parametrize("origin", [
    "https://evil.example", "null", "", "https://app.example.com.evil.example", "https://app.example.com:8443",
    "http://app.example.com", "https://app.example.com/", "https://app.example.com\tx", "file://",
    "https://evil.example, https://app.example.com",
])
async def test_an_origin_that_is_not_listed_is_refused(origin):
    async with guarded_server(http_allowed_origins=("https://app.example.com",)) as server:
        head = post_head(f"127.0.0.1:{server.port}", f"Origin: {origin}")
        answer = await raw_request(server.port, head + "{}")
    assert answer.status in (400, 403) and server.bodies == []
    if answer.status == 403:
        assert b'"origin_not_allowed"' in answer.body


async def test_an_allowed_origin_beside_a_refused_one_is_refused():
    async with guarded_server(http_allowed_origins=("https://app.example.com",)) as server:
        host = f"127.0.0.1:{server.port}"
        answers = [await raw_request(server.port, post_head(host, f"Origin: {first}", f"Origin: {second}") + "{}")
                   for first, second in [("https://app.example.com", "https://evil.example"),
                                         ("https://evil.example", "https://app.example.com")]]
    assert [answer.status for answer in answers] == [403, 403] and server.bodies == []


async def test_a_cors_preflight_from_another_site_is_refused():
    async with guarded_server() as server, httpx.AsyncClient(timeout=HANG_GUARD_SECONDS) as client:
        preflight = await client.options(server.url + "/echo", headers={
            "origin": "https://evil.example", "access-control-request-method": "POST",
            "access-control-request-headers": "content-type, authorization"})
    assert preflight.status_code == 403 and "access-control-allow-origin" not in preflight.headers


# --- simple requests: bodies a page may send without a preflight --------------------------------------------

@pytest.mark.parametrize("content_type", [
    "text/plain", "text/plain; charset=application/json", "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=----x", "application/jsonx", "application/json-seq", "application/json+x",
    "application/ json", "application/json\x0b", "xapplication/json",
])
async def test_a_body_that_is_not_declared_json_is_refused(content_type):
    async with guarded_server() as server:
        head = post_head(f"127.0.0.1:{server.port}").replace("Content-Type: application/json",
                                                              f"Content-Type: {content_type}")
        answer = await raw_request(server.port, head + "{}")
    assert answer.status in (400, 415) and server.bodies == []


@pytest.mark.parametrize("json_first", [True, False])
async def test_two_content_types_are_refused_even_if_one_is_json(json_first):
    async with guarded_server() as server:
        head = post_head(f"127.0.0.1:{server.port}", "Content-Type: text/plain")
        if not json_first:
            head = head.replace("Content-Type: application/json", "Content-Type: text/plain", 1)
            head = head.replace("Content-Type: text/plain\r\n\r\n", "Content-Type: application/json\r\n\r\n")
        answer = await raw_request(server.port, head + "{}")
    assert head.count("Content-Type: application/json") == 1
    assert answer.status == 415 and server.bodies == []


# --- body size: never more than max_message_bytes held ---------------------------------------------------------

async def test_a_declared_length_over_the_limit_is_refused_before_any_body_is_sent():
    """Only the head is sent: a server that waited for the body would hang this test."""
    async with guarded_server(max_message_bytes=1000) as server:
        host = f"127.0.0.1:{server.port}"
        declared = await raw_request(server.port, post_head(host, length=1001))
        huge = await raw_request(server.port, post_head(host, length=10**19))
        # Past 20 digits h11 refuses the head itself; the guard would answer 413 without calling int() on it.
        absurd = await raw_request(server.port, post_head(host, length="9" * 5000))
        # 100-continue: the client waits for the server's go before sending; it gets the refusal instead.
        expecting = await raw_request(server.port, post_head(host, "Expect: 100-continue", length=2**40))
    assert (declared.status, huge.status, expecting.status) == (413, 413, 413) and absurd.status in (400, 413)
    assert b"100 Continue" not in expecting.head and b'"body_too_large"' in expecting.body
    assert server.bodies == []


async def test_a_chunked_body_is_refused_once_past_the_limit_without_reading_the_rest():
    """The client sends one byte over the limit and never ends the body: the 413 can only come from a guard that
    stopped there (a server that read on would wait for more, and hang this test)."""
    limit = 64 * 1024
    async with guarded_server(max_message_bytes=limit) as server:
        head = (f"POST /echo HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
                "Transfer-Encoding: chunked\r\n\r\n")
        pieces = [chunk(b"x" * 4096) for _ in range(limit // 4096)] + [chunk(b"!")]
        answer = await raw_request(server.port, head, *pieces)
        # The connection is closed after the refusal: a client cannot keep streaming into it.
        closing = answer.head.lower()
    assert answer.status == 413 and b'"body_too_large"' in answer.body
    assert b"connection: close" in closing
    assert server.bodies == []


async def test_a_length_that_is_not_a_number_is_never_trusted():
    async with guarded_server(max_message_bytes=1000) as server:
        host = f"127.0.0.1:{server.port}"
        answers = [await raw_request(server.port, post_head(host).replace("Content-Length: 2", f"Content-Length: {v}")
                                     + "{}") for v in ("-1", "2, 2000", "0x10", "1e9", "")]
    # The HTTP server's parser refuses these itself (400); the guard never takes them as a small length.
    assert all(answer.status in (400, 413) for answer in answers), [a.status for a in answers]
    assert server.bodies == []


# --- WebSocket handshakes get the same Host and Origin rules -------------------------------------------------

async def test_a_websocket_handshake_from_a_rebound_page_is_closed_before_the_app():
    """uvicorn here has no WebSocket library, so this drives the guard with the scope a server that had one would
    give it."""
    reached: list[Scope] = []

    async def app(scope: Scope, receive: object, send: object) -> None:
        reached.append(scope)

    policy = GuardSettings().policy("127.0.0.1", 8010)
    guard = RequestGuard(app, policy, PROBE_PATHS)
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "websocket.connect"}

    async def send(message: Message) -> None:
        sent.append(message)

    for headers in ([(b"host", b"attacker.example:8010")],
                    [(b"host", b"127.0.0.1:8010"), (b"origin", b"https://evil.example")]):
        await guard({"type": "websocket", "path": "/ws", "headers": headers}, receive, send)
    await guard({"type": "websocket", "path": "/ws", "headers": [(b"host", b"localhost:8010")]}, receive, send)
    assert [message["type"] for message in sent] == ["websocket.close", "websocket.close"]
    assert {message["code"] for message in sent} == {1008}
    assert len(reached) == 1


# --- Bodies: nothing read ahead of the route, no body that stalls, no connections without end ----------------

@asynccontextmanager
async def serving(*routes: Route, **options: Any) -> AsyncIterator[int]:
    """An HttpServer with `routes` (behind the guard) and HttpServer `options`, on a free port of 127.0.0.1."""
    http = HttpServer(create_http_app(ToolhostMetrics(), lambda: True, routes=routes), "127.0.0.1:0", **options)
    port = await http.start()
    try:
        yield port
    finally:
        await http.stop()


def guarded(methods: list[str], endpoint: Any) -> Route:
    """A route at /<endpoint's name, dashed> behind the guard."""
    return Route("/" + endpoint.__name__.replace("_", "-"), requires(Right.NONE, endpoint), methods=methods)


async def answer_without_reading(request: Request) -> Response:
    return JSONResponse({"read": False})


async def read_body(request: Request) -> Response:
    return JSONResponse({"bytes": len(await request.body())})


async def where_from(request: Request) -> Response:
    assert request.client is not None
    return JSONResponse({"client": request.client.host, "scheme": request.url.scheme})


async def test_the_guard_reads_no_body_ahead_of_the_route():
    """A chunked body that never ends: the route answers without reading it, and the connection closes so that
    nothing more of it is read. A guard that buffered the body first (for a route that authenticates first, a
    client without credentials) would wait for it, and hang this test."""
    async with serving(guarded(["POST"], answer_without_reading)) as port:
        head = (f"POST /answer-without-reading HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        answer = await raw_request(port, head, chunk(b"x" * 1000))
    assert answer.status == 200 and answer.body.endswith(b'{"read":false}')
    assert b"connection: close" in answer.head.lower()


@pytest.mark.parametrize("framing", ["length", "chunked"])
async def test_a_body_that_stops_arriving_is_answered_408_and_the_connection_closed(framing):
    """10 bytes of a declared 100, or a chunked body without its last chunk: the client then sends nothing. The
    guard's deadline (here 0.5 s) ends the wait instead of the connection being held for ever."""
    async with serving(guarded(["POST"], read_body), guard=GuardSettings(body_seconds=0.5)) as port:
        framing_header = "Content-Length: 100" if framing == "length" else "Transfer-Encoding: chunked"
        head = (f"POST /read-body HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                f"{framing_header}\r\n\r\n")
        answer = await raw_request(port, head, b'{"jsonrpc"' if framing == "length" else chunk(b'{"jsonrpc"'))
    assert answer.status == 408 and b'"request_timeout"' in answer.body
    assert b"send the whole body" in answer.body
    assert b"connection: close" in answer.head.lower()


async def test_a_body_that_arrives_whole_in_time_reaches_the_route():
    async with serving(guarded(["POST"], read_body), guard=GuardSettings(body_seconds=5)) as port, \
            httpx.AsyncClient(timeout=HANG_GUARD_SECONDS) as client:
        answer = await client.post(f"http://127.0.0.1:{port}/read-body", json={"a": "b" * 5000})
    assert answer.status_code == 200 and answer.json() == {"bytes": len(b'{"a":"' + b"b" * 5000 + b'"}')}


async def test_connections_past_the_limit_are_refused_503_until_one_closes():
    """Two connections stall in their bodies; with max_connections 3 (uvicorn counts the new connection too) the
    next request is answered 503 at once."""
    entered = asyncio.Semaphore(0)

    async def stall(request: Request) -> Response:
        entered.release()
        return await read_body(request)

    async with serving(guarded(["POST"], stall), max_connections=3) as port:
        head = (f"POST /stall HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                "Content-Length: 100\r\n\r\n{").encode()
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
        for _, writer in held:
            writer.write(head)
            await writer.drain()
        for _ in held:
            await within(entered.acquire(), "a held request to reach its route")
        refused = await raw_request(port, post_head(f"127.0.0.1:{port}", path="/stall") + "{}")
        for _, writer in held:
            writer.close()
            await writer.wait_closed()

        async def served_again() -> None:
            # The server notices the closed connections on its own time: no event says when.
            while (await raw_request(port, post_head(f"127.0.0.1:{port}", path="/stall") + "{}")).status != 200:
                await asyncio.sleep(0.01)

        await within(served_again(), "a request once the held connections closed")
    assert refused.status == 503


def test_the_connection_limit_leaves_room_for_every_call_and_listen_stream():
    config = dataclasses.replace(Config(), max_in_flight_calls=3)
    assert max_http_connections(config) > 2 * config.max_in_flight_calls


async def test_forwarded_headers_from_a_local_process_rewrite_neither_address_nor_scheme():
    """uvicorn trusts X-Forwarded-* from 127.0.0.1 by default: a local process could then pose as another
    client address (the owner of /mcp's posted cancels) or as HTTPS."""
    async with serving(guarded(["GET"], where_from)) as port, httpx.AsyncClient(timeout=HANG_GUARD_SECONDS) as client:
        answer = await client.get(f"http://127.0.0.1:{port}/where-from", headers={
            "X-Forwarded-For": "203.0.113.9", "X-Forwarded-Proto": "https", "Forwarded": "for=203.0.113.9"})
    assert answer.json() == {"client": "127.0.0.1", "scheme": "http"}
