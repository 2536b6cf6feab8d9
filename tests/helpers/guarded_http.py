"""The HTTP app as serve() builds it (create_http_server, so behind the browser guard) with one more route, /echo,
standing for any surface beside the probes; and raw HTTP/1.x exchanges for requests httpx will not send."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from toolhost_server.auth.rights import Right
from toolhost_server.config import Config
from toolhost_server.telemetry.metrics import ToolhostMetrics
from toolhost_server.web.app import requires
from toolhost_server.web.server import HttpServer, create_http_server

from helpers.waiting import HANG_GUARD_SECONDS

ECHO_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


@dataclass
class GuardedServer:
    """A started listener; `bodies` holds the length of each body /echo was given, so a test can tell that a
    refused request never reached it."""

    http: HttpServer
    port: int
    bodies: list[int] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@asynccontextmanager
async def guarded_server(**fields: Any) -> AsyncIterator[GuardedServer]:
    """create_http_server on 127.0.0.1:0 (or `http_address`) with those Config fields and /echo, which answers
    {"bytes": <length of the body it read>}."""
    bodies: list[int] = []

    async def echo(request: Request) -> Response:
        body = await request.body()
        bodies.append(len(body))
        return JSONResponse({"bytes": len(body)})

    config = dataclasses.replace(Config(), **{"http_address": "127.0.0.1:0", **fields})
    http = create_http_server(config, ToolhostMetrics(), lambda: True,
                              routes=[Route("/echo", requires(Right.NONE, echo), methods=ECHO_METHODS)])
    port = await http.start()
    try:
        yield GuardedServer(http, port, bodies)
    finally:
        await http.stop()


@dataclass(frozen=True)
class RawAnswer:
    status: int
    head: bytes
    body: bytes


def _parse(answer: bytes) -> RawAnswer:
    head, _, body = answer.partition(b"\r\n\r\n")
    return RawAnswer(int(head.split(b" ", 2)[1]), head, body)


def _exchange(port: int, head: bytes, chunks: Iterable[bytes]) -> RawAnswer:
    with socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD_SECONDS) as connection:
        try:
            connection.sendall(head)
            for data in chunks:
                connection.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before taking it all: its answer is still to be read
        received = b""
        while True:
            try:
                data = connection.recv(65536)
            except ConnectionResetError:  # closed with our unread bytes in its buffer, after answering
                break
            if not data:
                break
            received += data
    return _parse(received)


async def raw_request(port: int, head: str | bytes, *chunks: bytes) -> RawAnswer:
    """Send `head` (the request line and headers, written as they should go on the wire, blank line included)
    and then `chunks` on a new connection, and read the answer until the server closes it (refusals close; send
    `Connection: close` or HTTP/1.0 to be answered otherwise). Nothing more is sent while waiting: a server that
    wanted more than was sent would hang the test, not pass it."""
    data = head.encode("latin-1") if isinstance(head, str) else head
    return await asyncio.to_thread(_exchange, port, data, chunks)


def chunk(data: bytes) -> bytes:
    """`data` as one chunk of a chunked body."""
    return b"%x\r\n" % len(data) + data + b"\r\n"
