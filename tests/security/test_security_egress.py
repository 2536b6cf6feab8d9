"""Security review finding 4 (issue 16): with loopback denied, no spelling of an address reaches it. The
unspecified address (0.0.0.0, "0", "0x0", ::) connects to this host, and an IPv6 address that embeds an IPv4
one connects to that IPv4 address; each is judged as where it goes, in every network tool."""

from __future__ import annotations

import json

import pytest

from toolhost.v1 import tool_service_pb2
from toolhost_server.tools.egress import DENY_ENV

# Each reaches this host's loopback; the server under test listens there, so an allowed connection succeeds.
LOOPBACK_SPELLINGS = [
    "0.0.0.0", "0", "0x0", "::", "::ffff:0.0.0.0", "::ffff:127.0.0.1", "::127.0.0.1", "64:ff9b::7f00:1",
    "2002:7f00:1::", "127.1", "2130706433",
]


@pytest.fixture
async def loopback_denied(start_server, monkeypatch):
    monkeypatch.setenv(DENY_ENV, "127.0.0.0/8,::1/128")
    return await start_server()


async def call(server, name: str, **arguments: object) -> tool_service_pb2.CallToolResponse:
    return await server.stub.CallTool(tool_service_pb2.CallToolRequest(name=name, arguments_json=json.dumps(arguments)))


@pytest.mark.parametrize("host", LOOPBACK_SPELLINGS)
async def test_tcp_port_check_cannot_reach_loopback_by_another_spelling(loopback_denied, host):
    response = await call(loopback_denied, "tcp_port_check", host=host, port=loopback_denied.port)
    assert not response.success and response.error.code == "EGRESS_DENIED", (host, response)


@pytest.mark.parametrize("host", ["0.0.0.0", "0", "::", "::ffff:0.0.0.0"])
async def test_shell_ping_cannot_reach_loopback_by_another_spelling(loopback_denied, host):
    response = await call(loopback_denied, "shell_ping", host=host, count=1)
    assert not response.success and response.error.code == "EGRESS_DENIED", (host, response)


@pytest.mark.parametrize("nameserver", ["0.0.0.0", "::", "::ffff:0.0.0.0", "64:ff9b::7f00:1"])
async def test_dns_lookup_cannot_use_a_loopback_nameserver_by_another_spelling(loopback_denied, nameserver):
    response = await call(loopback_denied, "dns_lookup", domain="example.com", nameserver=nameserver)
    assert not response.success and response.error.code == "EGRESS_DENIED", (nameserver, response)


@pytest.mark.parametrize("host", ["0.0.0.0", "[::]", "[::ffff:0.0.0.0]", "[64:ff9b::7f00:1]"])
async def test_http_check_cannot_reach_loopback_by_another_spelling(loopback_denied, host):
    response = await call(loopback_denied, "http_check", url=f"http://{host}:{loopback_denied.port}/")
    assert not response.success and response.error.code == "EGRESS_DENIED", (host, response)


async def test_the_refusal_says_where_the_address_goes(loopback_denied):
    response = await call(loopback_denied, "tcp_port_check", host="0.0.0.0", port=loopback_denied.port)
    assert "0.0.0.0, which reaches 127.0.0.1" in response.error.message
    assert "127.0.0.0/8" in response.error.message


async def test_without_a_deny_for_loopback_the_unspecified_address_still_connects(start_server, monkeypatch):
    # The finding is about the policy, not the tool: with loopback allowed, 0.0.0.0 works as before.
    monkeypatch.delenv(DENY_ENV, raising=False)
    server = await start_server()
    response = await call(server, "tcp_port_check", host="0.0.0.0", port=server.port)
    assert response.success, response.error
