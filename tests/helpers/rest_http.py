"""The REST API for tests: the real HTTP listener with the /ai/tools routes beside an in-process server (as
serve.py wires them, behind the browser guard), and a client for it.

    async with serving_rest(server) as rest, rest_client(rest, token) as client:
        response = await client.post("/ai/tools/execute", json={"name": "echo", "params": {"text": "hi"}})
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx

from toolhost_server.web.rest import RestApi
from toolhost_server.web.server import HttpServer, create_http_server

from helpers.servers import RunningServer
from helpers.waiting import HANG_GUARD_SECONDS


@dataclass
class RestHttp:
    """A listener serving the REST API of one server."""

    api: RestApi
    http: HttpServer
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@asynccontextmanager
async def serving_rest(server: RunningServer) -> AsyncIterator[RestHttp]:
    """The HTTP listener of `server` on a free port of 127.0.0.1, with the REST routes, until the block ends."""
    toolhost = server.toolhost
    config = dataclasses.replace(toolhost.config, http_address="127.0.0.1:0")
    api = RestApi(toolhost)
    http = create_http_server(config, toolhost.metrics, lambda: toolhost.pipeline.accepting, None,
                              routes=api.routes)
    port = await http.start()
    try:
        yield RestHttp(api, http, port)
    finally:
        await http.stop()


@asynccontextmanager
async def rest_client(rest: RestHttp, token: str | None = None) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client on `rest`'s URL, sending `token` as a bearer token when given."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with httpx.AsyncClient(base_url=rest.url, headers=headers, timeout=HANG_GUARD_SECONDS) as client:
        yield client
