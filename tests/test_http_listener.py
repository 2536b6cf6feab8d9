"""The HTTP listener's own sockets (web/server.py)."""

from __future__ import annotations

import socket

import httpx

from helpers.guarded_http import guarded_server
from helpers.waiting import HANG_GUARD_SECONDS


async def test_accepted_connections_send_answers_without_waiting_for_the_clients_ack():
    # Without TCP_NODELAY every keep-alive answer waits for the client's delayed ACK (~40 ms a request: /mcp
    # served a fifth of its calls per second for it). asyncio sets it only on connections of a listening socket
    # made as IPPROTO_TCP.
    async with guarded_server() as server, httpx.AsyncClient(timeout=HANG_GUARD_SECONDS) as client:
        assert (await client.get(server.url + "/healthz")).status_code == 200
        connections = server.http._server.server_state.connections  # type: ignore[union-attr]
        sockets = [connection.transport.get_extra_info("socket") for connection in connections]
        assert sockets
        assert all(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for s in sockets)
