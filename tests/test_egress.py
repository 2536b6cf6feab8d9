"""The egress policy of the network tools, called through a real toolhost server against servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import ssl
import subprocess
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import pytest

from toolhost.v1 import tool_service_pb2
from toolhost_server.tools.base import ToolRaisedFailure
from toolhost_server.tools.egress import ALLOW_ENV, DEFAULT_DENY, DENY_ENV, EgressPolicy

from helpers.calls import call
from helpers.http_servers import serving_http
from helpers.waiting import until

METADATA = "169.254.169.254"


@pytest.fixture(autouse=True)
def default_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts from the default policy, whatever the environment running the tests sets."""
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    monkeypatch.delenv(DENY_ENV, raising=False)


async def expect_denied(server: Any, name: str, **arguments: Any) -> str:
    """The message of a call the policy must refuse. EGRESS_DENIED is the policy's answer, not a connection's
    (which would be CONNECTION_FAILED, TIMEOUT, ...); test_a_denied_destination_is_never_contacted shows that
    nothing is sent."""
    response = await call(server, name, **arguments)
    assert not response.success
    assert response.error.code == "EGRESS_DENIED", response.error.message
    return response.error.message


@pytest.fixture
async def listener() -> AsyncIterator[tuple[int, list[str]]]:
    """A TCP port on 127.0.0.1 and the peers that connected to it."""
    peers: list[str] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peers.append(writer.get_extra_info("peername")[0])
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1], peers
    server.close()
    await server.wait_closed()


class Handler(BaseHTTPRequestHandler):
    """/ok, and /to-metadata which redirects to the metadata service."""

    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).paths.append(self.path)
        if self.path == "/to-metadata":
            self.send_response(302)
            self.send_header("Location", f"http://{METADATA}/latest/meta-data")
        else:
            self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def http_port() -> Iterator[int]:
    Handler.paths = []
    with serving_http(Handler) as httpd:
        yield httpd.server_address[1]


# --- the policy itself --------------------------------------------------------------------------------------

def test_policy_semantics():
    default = EgressPolicy()
    for allowed in ("127.0.0.1", "::1", "10.1.2.3", "192.168.0.1", "8.8.8.8", "2001:db8::1"):
        default.check(allowed)
    for denied in (METADATA, "169.254.1.1", "fe80::1", "fe80::1%eth0", "fd00:ec2::254", "100.100.100.200",
                   f"::ffff:{METADATA}"):
        with pytest.raises(ToolRaisedFailure) as raised:
            default.check(denied)
        assert raised.value.code == "EGRESS_DENIED"
    # Deny wins over allow; with an allow list, only what is inside it passes.
    policy = EgressPolicy(allow=["10.0.0.0/8", "169.254.0.0/16"], deny=["10.9.0.0/16", *DEFAULT_DENY])
    policy.check("10.1.2.3")
    for denied in ("10.9.0.1", METADATA, "127.0.0.1", "::1"):
        with pytest.raises(ToolRaisedFailure):
            policy.check(denied)


# --- tcp_port_check -----------------------------------------------------------------------------------------

async def test_tcp_metadata_address_refused(start_server):
    server = await start_server()
    message = await expect_denied(server, "tcp_port_check", host=METADATA, port=80, timeout_seconds=5)
    assert METADATA in message and "169.254.0.0/16" in message and DENY_ENV in message
    # The same address written as IPv6 is the same address.
    message = await expect_denied(server, "tcp_port_check", host=f"::ffff:{METADATA}", port=80, timeout_seconds=5)
    assert "169.254.0.0/16" in message


async def test_a_denied_destination_is_never_contacted(start_server, listener, http_port, monkeypatch):
    port, peers = listener
    server = await start_server()
    monkeypatch.setenv(DENY_ENV, "127.0.0.0/8,::1/128")
    await expect_denied(server, "tcp_port_check", host="127.0.0.1", port=port)
    await expect_denied(server, "http_check", url=f"http://127.0.0.1:{http_port}/ok")
    # Allowed again, the same calls reach the servers, which then saw one connection and one request each.
    monkeypatch.delenv(DENY_ENV)
    assert (await call(server, "tcp_port_check", host="127.0.0.1", port=port)).success
    assert (await call(server, "http_check", url=f"http://127.0.0.1:{http_port}/ok")).success
    await until(lambda: bool(peers), "the allowed connection reaching the listener")
    assert peers == ["127.0.0.1"] and Handler.paths == ["/ok"]


async def test_tcp_loopback_allowed_by_default(start_server, listener):
    port, peers = listener
    server = await start_server()
    response = await call(server, "tcp_port_check", host="127.0.0.1", port=port)
    assert response.success, response.error.message
    assert json.loads(response.output)["open"] is True
    assert peers == ["127.0.0.1"]


async def test_allow_list_refuses_what_is_outside_it(start_server, listener, monkeypatch):
    port, peers = listener
    monkeypatch.setenv(ALLOW_ENV, "10.0.0.0/8")
    server = await start_server()
    message = await expect_denied(server, "tcp_port_check", host="127.0.0.1", port=port)
    assert "127.0.0.1" in message and "10.0.0.0/8" in message and ALLOW_ENV in message
    assert peers == []


async def test_name_resolving_to_a_denied_address_is_refused(start_server, listener, http_port, monkeypatch):
    port, peers = listener
    monkeypatch.setenv(DENY_ENV, "127.0.0.0/8,::1/128")
    server = await start_server()
    message = await expect_denied(server, "tcp_port_check", host="localhost", port=port)
    assert "resolved from 'localhost'" in message
    await expect_denied(server, "http_check", url=f"http://localhost:{http_port}/ok")
    assert peers == [] and Handler.paths == []


async def test_misconfigured_policy_fails_the_call(start_server, listener, monkeypatch):
    port, peers = listener
    monkeypatch.setenv(DENY_ENV, "169.254.0.0/16,not-a-network")
    server = await start_server()
    response = await call(server, "tcp_port_check", host="127.0.0.1", port=port)
    assert not response.success and response.error.code == "EGRESS_MISCONFIGURED"
    assert DENY_ENV in response.error.message and "'not-a-network'" in response.error.message
    assert peers == []


# --- http_check ---------------------------------------------------------------------------------------------

async def test_http_metadata_url_refused(start_server):
    server = await start_server()
    message = await expect_denied(server, "http_check", url=f"http://{METADATA}/", timeout_seconds=5)
    assert METADATA in message and "169.254.0.0/16" in message


async def test_http_redirect_to_metadata_refused_before_it_is_followed(start_server, http_port):
    server = await start_server()
    url = f"http://127.0.0.1:{http_port}/to-metadata"
    message = await expect_denied(server, "http_check", url=url, follow_redirects=True, timeout_seconds=5)
    assert f"redirect 1 to http://{METADATA}/latest/meta-data" in message and "169.254.0.0/16" in message
    assert Handler.paths == ["/to-metadata"]
    # Not following it, the redirect is only reported.
    response = await call(server, "http_check", url=url)
    assert response.success and json.loads(response.output)["status_code"] == 302


async def test_http_connects_to_the_checked_address_with_the_name_as_host(start_server, http_port):
    server = await start_server()
    response = await call(server, "http_check", url=f"http://localhost:{http_port}/ok")
    if not response.success:  # the resolver put ::1 first and nothing listens there: still a real answer
        assert response.error.code == "CONNECTION_FAILED", response.error.message
        pytest.skip("localhost does not reach 127.0.0.1 here")
    result = json.loads(response.output)
    assert result["status_code"] == 200 and result["final_url"] == f"http://localhost:{http_port}/ok"


@pytest.fixture
def tls_port(tmp_path: Path) -> Iterator[tuple[int, list[str | None]]]:
    """A TLS server on 127.0.0.1 with a self-signed certificate, and the server names clients sent (SNI)."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=localhost", "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    names: list[str | None] = []
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)

    def record_name(_sock: ssl.SSLObject, name: str | None, _context: ssl.SSLContext) -> None:
        names.append(name)

    context.sni_callback = record_name
    with serving_http(Handler, tls=context) as httpd:
        yield httpd.server_address[1], names


async def test_https_keeps_the_name_for_sni_and_certificate_checks(start_server, tls_port):
    port, names = tls_port
    server = await start_server()
    # The URL names 'localhost'; the tool connects to the address it checked, yet the TLS handshake asks
    # for 'localhost' and verifies the certificate (self-signed here, so it fails verification).
    response = await call(server, "http_check", url=f"https://localhost:{port}/ok", timeout_seconds=5)
    if names == []:
        pytest.skip("localhost does not reach 127.0.0.1 here")
    assert not response.success and response.error.code == "TLS_ERROR", response.error.message
    assert "CERTIFICATE_VERIFY_FAILED" in response.error.message or "certificate" in response.error.message
    assert names[0] == "localhost"


# --- dns_lookup ---------------------------------------------------------------------------------------------

async def test_dns_nameserver_is_checked(start_server):
    server = await start_server()
    message = await expect_denied(server, "dns_lookup", domain="example.com", nameserver=METADATA)
    assert METADATA in message and "169.254.0.0/16" in message


async def test_ping_and_traceroute_are_held_to_the_policy(start_server, monkeypatch):
    server = await start_server()
    for tool in ("shell_ping", "traceroute"):
        response = await call(server, tool, host="169.254.169.254")
        assert response.error.code == "EGRESS_DENIED", (tool, response.error)
        assert not response.HasField("exit_code")  # the program never ran
    monkeypatch.setenv("TOOLHOST_EGRESS_DENY", "127.0.0.0/8,::1/128")
    response = await call(server, "shell_ping", host="localhost", count=1)
    assert response.error.code == "EGRESS_DENIED" and "localhost" in response.error.message


async def test_ping_gets_the_checked_address_not_the_name(start_server):
    server = await start_server()
    response = await call(server, "shell_ping", host="localhost", count=1, timeout_seconds=1)
    assert response.success, response.error
    first_line = response.output.splitlines()[0]
    assert first_line.startswith(("PING 127.0.0.1 (127.0.0.1)", "PING ::1(::1)")), first_line


async def test_egress_hosts_must_name_declared_parameters(start_server, tmp_path):
    (tmp_path / "bad.yaml").write_text(
        "name: bad\ndescription: Names a parameter it lacks.\n"
        "runner: {type: process, argv: [ping, '{host}'], egress_hosts: [target]}\n"
        "parameters: [{name: host, type: string, required: true}]\n")
    server = await start_server(catalog_dirs=[tmp_path])
    report = await server.stub.Reload(tool_service_pb2.ReloadRequest())
    assert [e.reason for e in report.errors] == ["egress_hosts names undeclared parameters: target"]
