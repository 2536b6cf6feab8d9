"""/mcp for tests: the real HTTP listener with the MCP endpoint, beside an in-process server (`serving_mcp`, as
serve.py wires it), the MCP SDK's own client connected to it with a bearer token in either protocol era
(`mcp_client`), and raw JSON-RPC posts for what a client library would not send (`post_jsonrpc`).

    async with serving_mcp(server) as mcp, mcp_client(mcp.url, token, era="legacy") as client:
        await client.call_tool("echo", {"text": "hi"})
"""

from __future__ import annotations

import dataclasses
import json
import ssl
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from toolhost_server.mcp.http_endpoint import MCP_PATH, McpHttpEndpoint
from toolhost_server.web.server import HttpServer, create_http_server

from helpers.servers import RunningServer
from helpers.waiting import HANG_GUARD_SECONDS

# The protocol eras, as the SDK client's modes: 2025-11-25 by initialize (what the TypeScript SDK and most hosts
# speak), and 2026-07-28 found by discovery.
ERAS = ["legacy", "auto"]
MODERN_VERSION = "2026-07-28"
LEGACY_VERSION = "2025-11-25"
_MODERN_META = {"io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
                "io.modelcontextprotocol/clientCapabilities": {}}


@dataclass
class McpHttp:
    """A listener serving /mcp for one server."""

    endpoint: McpHttpEndpoint
    http: HttpServer
    port: int

    @property
    def url(self) -> str:
        scheme = "https" if self.http.tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}{MCP_PATH}"


@asynccontextmanager
async def serving_mcp(server: RunningServer) -> AsyncIterator[McpHttp]:
    """The HTTP listener of `server` on a free port of 127.0.0.1, /mcp included, until the block ends."""
    toolhost = server.toolhost
    config = dataclasses.replace(toolhost.config, http_address="127.0.0.1:0")
    endpoint = McpHttpEndpoint(toolhost)
    http = create_http_server(config, toolhost.metrics, lambda: toolhost.pipeline.accepting, None,
                              routes=[endpoint.route], services=[endpoint.running()])
    port = await http.start()
    try:
        yield McpHttp(endpoint, http, port)
    finally:
        await http.stop()


def bearer(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token is not None else {}


@asynccontextmanager
async def mcp_client(url: str, token: str | None = None, *, era: str = "auto",
                     headers: Mapping[str, str] | None = None,
                     tls: ssl.SSLContext | None = None) -> AsyncIterator[Client]:
    """The SDK's client on `url` with `token`, in `era` (an ERAS value), tools/list uncached; over HTTPS
    with the `tls` context (its CA and any client certificate)."""
    http = httpx2.AsyncClient(headers={**bearer(token), **(headers or {})}, timeout=HANG_GUARD_SECONDS,
                              verify=tls if tls is not None else True)
    async with http, Client(streamable_http_client(url, http_client=http), mode=era,  # type: ignore[arg-type]
                            cache=None, read_timeout_seconds=HANG_GUARD_SECONDS) as client:
        yield client


def jsonrpc_headers(era: str, method: str = "", name: str = "") -> dict[str, str]:
    """What a client sends with a raw JSON-RPC POST in `era` ("legacy" or "modern")."""
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if era == "legacy":
        headers["MCP-Protocol-Version"] = LEGACY_VERSION
        return headers
    headers["MCP-Protocol-Version"] = MODERN_VERSION
    if method:
        headers["Mcp-Method"] = method
    if name:
        headers["Mcp-Name"] = name
    return headers


def request(method: str, params: dict[str, Any], era: str, request_id: Any = 1) -> dict[str, Any]:
    """A JSON-RPC request as a client of `era` sends it (modern: the `_meta` envelope in its params)."""
    if era != "legacy":
        params = {**params, "_meta": {**_MODERN_META, **params.get("_meta", {})}}
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


async def post_jsonrpc(url: str, body: bytes | dict[str, Any] | list[Any], token: str | None, era: str = "legacy",
                       headers: Mapping[str, str] | None = None) -> tuple[httpx.Response, list[dict[str, Any]]]:
    """POST `body` (JSON, or raw bytes as they are) to /mcp; the response and the JSON-RPC messages it carried
    (from a JSON body or an SSE stream)."""
    method = body.get("method", "") if isinstance(body, dict) else ""
    name = body.get("params", {}).get("name", "") if isinstance(body, dict) and method == "tools/call" else ""
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with httpx.AsyncClient(timeout=HANG_GUARD_SECONDS) as client:
        response = await client.post(url, content=content, headers={
            **jsonrpc_headers(era, method, name), **bearer(token), **(headers or {})})
    return response, messages_of(response)


def messages_of(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a /mcp response: its JSON body, or each SSE `data:` line."""
    kind = response.headers.get("content-type", "")
    if kind.startswith("text/event-stream"):
        return [json.loads(line[5:]) for line in response.text.splitlines()
                if line.startswith("data:") and line[5:].strip()]
    if kind.startswith("application/json") and response.content:
        parsed = json.loads(response.content)
        return parsed if isinstance(parsed, list) else [parsed]
    return []
