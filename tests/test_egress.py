"""The egress policy of the network tools, called through a real toolhost server against servers on this machine.

Three tiers: always denied (unspecified, link-local, metadata, and what TOOLHOST_EGRESS_DENY adds), closed until
TOOLHOST_EGRESS_OPEN opens them (loopback, this host's addresses, private networks), and TOOLHOST_EGRESS_ALLOW.
The policy is read from the environment on every call, so an in-process server sees what monkeypatch sets.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest

from toolhost.v1 import tool_service_pb2, tool_service_pb2_grpc
from toolhost_server.tools.base import ToolRaisedFailure
from toolhost_server.tools.egress import ALLOW_ENV, DENY_ENV, OPEN_ENV, EgressPolicy

from helpers.addresses import non_loopback_address
from helpers.calls import call
from helpers.http_servers import serving_http
from helpers.make_run import make_run
from helpers.waiting import until

METADATA = "169.254.169.254"
LOOPBACK = "127.0.0.0/8,::1/128"
HOW_TO_OPEN_LOOPBACK = f"add 127.0.0.0/8 (or a smaller network) to {OPEN_ENV}"


@pytest.fixture(autouse=True)
def default_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts from the default policy, whatever the environment running the tests sets."""
    for variable in (OPEN_ENV, DENY_ENV, ALLOW_ENV):
        monkeypatch.delenv(variable, raising=False)


async def expect_denied(server: Any, name: str, **arguments: Any) -> str:
    """The message of a call the policy must refuse. EGRESS_DENIED is the policy's answer, not a connection's
    (which would be CONNECTION_FAILED, TIMEOUT, ...); the tests that count peers show that nothing is sent."""
    response = await call(server, name, **arguments)
    assert not response.success
    assert response.error.code == "EGRESS_DENIED", response.error.message
    assert not response.HasField("exit_code"), "a process tool's program never runs"
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
    """/ok, /to-metadata which redirects to the metadata service, and /redirect?to=URL."""

    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).paths.append(self.path)
        if self.path == "/to-metadata":
            self.send_response(302)
            self.send_header("Location", f"http://{METADATA}/latest/meta-data")
        elif self.path.startswith("/redirect?"):
            self.send_response(302)
            self.send_header("Location", parse_qs(urlsplit(self.path).query)["to"][0])
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

def refusal(policy: EgressPolicy, address: str) -> str:
    with pytest.raises(ToolRaisedFailure) as raised:
        policy.check(address)
    assert raised.value.code == "EGRESS_DENIED"
    return raised.value.message


def test_the_tiers():
    default = EgressPolicy()
    # Documentation and public addresses: not this host, not private.
    for allowed in ("198.51.100.7", "203.0.113.9", "8.8.8.8", "2001:db8::1"):
        default.check(allowed)
    assert f"add ::1/128 to {OPEN_ENV}" in refusal(default, "::1")
    closed = {"127.0.0.1": "127.0.0.0/8", "10.1.2.3": "10.0.0.0/8", "172.16.0.1": "172.16.0.0/12",
              "192.168.1.1": "192.168.0.0/16", "100.64.0.1": "100.64.0.0/10", "fd12::1": "fc00::/7",
              "224.0.0.1": "224.0.0.0/4", "ff02::1": "ff00::/8"}
    for address, network in closed.items():
        assert f"add {network} (or a smaller network) to {OPEN_ENV}" in refusal(default, address)
    for denied in (METADATA, "169.254.1.1", "fe80::1", "fe80::1%eth0", "fd00:ec2::254", "100.100.100.200",
                   f"::ffff:{METADATA}", "0.0.0.0", "::"):
        assert "always denied" in refusal(default, denied)

    # Opened networks pass, the rest of the closed tier stays closed.
    opened = EgressPolicy(open_networks=["10.0.0.0/8", "127.0.0.1/32"])
    for allowed in ("10.1.2.3", "127.0.0.1", "::ffff:10.1.2.3", "203.0.113.9"):
        opened.check(allowed)
    for still_closed in ("127.0.0.2", "::1", "192.168.1.1"):
        refusal(opened, still_closed)

    # Nothing opens the always-denied tier, not even the whole address space; the message says so.
    everything = EgressPolicy(open_networks=["0.0.0.0/0", "::/0", "169.254.0.0/16"])
    everything.check("127.0.0.1")
    assert f"{OPEN_ENV} lists 0.0.0.0/0, which cannot open it" in refusal(everything, METADATA)
    assert "always denied" in refusal(everything, "fe80::1") and "always denied" in refusal(everything, "0.0.0.0")

    # DENY adds to the denied tier: its networks cannot be opened, and the metadata service stays denied.
    denied = EgressPolicy(open_networks=["10.0.0.0/8"], deny_networks=["10.9.0.0/16"])
    denied.check("10.1.2.3")
    assert DENY_ENV in refusal(denied, "10.9.0.1")
    assert "always denied" in refusal(denied, METADATA)

    # A non-empty allow list admits only its networks, after the tiers.
    allowed_only = EgressPolicy(open_networks=["10.0.0.0/8", "127.0.0.0/8"], allow_networks=["10.0.0.0/8"])
    allowed_only.check("10.1.2.3")
    for outside in ("127.0.0.1", "203.0.113.9"):
        assert ALLOW_ENV in refusal(allowed_only, outside)
    assert "always denied" in refusal(EgressPolicy(allow_networks=["169.254.0.0/16"]), METADATA)


# --- the closed tier, through the tools ---------------------------------------------------------------------

async def test_loopback_is_closed_until_opened(start_server, listener, http_port, monkeypatch):
    port, peers = listener
    server = await start_server()
    message = await expect_denied(server, "tcp_port_check", host="127.0.0.1", port=port)
    assert "127.0.0.0/8 (loopback" in message and HOW_TO_OPEN_LOOPBACK in message
    assert HOW_TO_OPEN_LOOPBACK in await expect_denied(server, "http_check", url=f"http://127.0.0.1:{http_port}/ok")
    assert "add ::1/128 to" in await expect_denied(server, "http_check", url=f"http://[::1]:{http_port}/ok")
    await expect_denied(server, "dns_lookup", domain="example.com", nameserver="127.0.0.1")
    await expect_denied(server, "shell_ping", host="127.0.0.1", count=1)
    await expect_denied(server, "traceroute", host="127.0.0.1", max_hops=1)
    # Opened, the same calls reach the servers, which then saw one connection and one request each.
    monkeypatch.setenv(OPEN_ENV, LOOPBACK)
    response = await call(server, "tcp_port_check", host="127.0.0.1", port=port)
    assert response.success and json.loads(response.output)["open"] is True, response.error.message
    assert (await call(server, "http_check", url=f"http://127.0.0.1:{http_port}/ok")).success
    await until(lambda: bool(peers), "the allowed connection reaching the listener")
    assert peers == ["127.0.0.1"] and Handler.paths == ["/ok"]


async def test_names_resolving_to_loopback_are_refused(start_server, listener, http_port):
    port, peers = listener
    server = await start_server()
    assert "resolved from 'localhost'" in await expect_denied(server, "tcp_port_check", host="localhost", port=port)
    await expect_denied(server, "http_check", url=f"http://localhost:{http_port}/ok")
    assert "localhost" in await expect_denied(server, "shell_ping", host="localhost", count=1)
    assert peers == [] and Handler.paths == []


@pytest.fixture
def this_host() -> str:
    address = non_loopback_address()
    if address is None:
        pytest.skip("this machine has no address but loopback and link-local: no own address to refuse")
    return address


async def test_this_hosts_own_address_is_closed_until_opened(start_server, this_host, monkeypatch):
    peers: list[str] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peers.append(writer.get_extra_info("peername")[0])
        writer.close()

    listening = await asyncio.start_server(on_connect, this_host, 0)
    port = listening.sockets[0].getsockname()[1]
    own = f"{this_host}/{32 if ':' not in this_host else 128}"
    try:
        server = await start_server()
        message = await expect_denied(server, "tcp_port_check", host=this_host, port=port)
        # Even inside a private network, the message names this host and offers to open only its address.
        assert "an address of this host" in message and f"add {own} to {OPEN_ENV}" in message
        await expect_denied(server, "shell_ping", host=this_host, count=1)
        monkeypatch.setenv(OPEN_ENV, own)
        response = await call(server, "tcp_port_check", host=this_host, port=port)
        assert response.success and json.loads(response.output)["open"] is True, response.error.message
        await until(lambda: bool(peers), "the opened connection reaching the listener")
        assert peers == [this_host]
    finally:
        listening.close()
        await listening.wait_closed()


@pytest.mark.parametrize(("host", "network"), [
    ("10.20.30.40", "10.0.0.0/8"), ("172.16.5.4", "172.16.0.0/12"), ("192.168.1.1", "192.168.0.0/16"),
    ("100.64.1.1", "100.64.0.0/10"), ("fd12:3456::1", "fc00::/7")])
async def test_private_networks_are_closed_until_opened(start_server, host, network):
    server = await start_server()
    message = await expect_denied(server, "tcp_port_check", host=host, port=5432)
    assert f"add {network} (or a smaller network) to {OPEN_ENV}" in message
    url_host = f"[{host}]" if ":" in host else host
    await expect_denied(server, "http_check", url=f"http://{url_host}/")
    await expect_denied(server, "shell_ping", host=host, count=1)


# --- the denied tier ----------------------------------------------------------------------------------------

async def test_always_denied_cannot_be_opened(start_server, monkeypatch, caplog):
    # A distinct value, so that this test's parse (and its warning) is not one cached by an earlier test.
    monkeypatch.setenv(OPEN_ENV, "169.254.0.0/16, fe80::/10 ,0.0.0.0/0,::/0")
    server = await start_server()
    with caplog.at_level("WARNING", logger="toolhost.egress"):
        message = await expect_denied(server, "tcp_port_check", host=METADATA, port=80, timeout_seconds=5)
    assert "always denied: no setting opens it" in message
    assert f"{OPEN_ENV} lists 169.254.0.0/16, which cannot open it" in message
    warnings = [r.getMessage() for r in caplog.records if r.name == "toolhost.egress"]
    assert any("169.254.0.0/16" in w and "stay denied" in w for w in warnings), warnings
    # The metadata service over IPv4-mapped IPv6, over HTTP, as a nameserver, to ping and traceroute.
    await expect_denied(server, "tcp_port_check", host=f"::ffff:{METADATA}", port=80, timeout_seconds=5)
    await expect_denied(server, "http_check", url=f"http://{METADATA}/latest/meta-data", timeout_seconds=5)
    await expect_denied(server, "dns_lookup", domain="example.com", nameserver=METADATA)
    for tool in ("shell_ping", "traceroute"):
        await expect_denied(server, tool, host=METADATA)
    assert "always denied" in await expect_denied(server, "tcp_port_check", host="fe80::1", port=22)


async def test_deny_adds_to_the_denied_tier(start_server, listener, monkeypatch):
    port, peers = listener
    monkeypatch.setenv(OPEN_ENV, LOOPBACK)
    monkeypatch.setenv(DENY_ENV, "127.0.0.2/32")
    server = await start_server()
    assert (await call(server, "tcp_port_check", host="127.0.0.1", port=port)).success
    message = await expect_denied(server, "tcp_port_check", host="127.0.0.2", port=port)
    assert "127.0.0.2/32" in message and DENY_ENV in message  # though OPEN holds 127.0.0.0/8
    # A DENY value of its own does not take the metadata protection away.
    assert "169.254.0.0/16" in await expect_denied(server, "tcp_port_check", host=METADATA, port=80)
    await until(lambda: bool(peers), "the allowed connection reaching the listener")
    assert peers == ["127.0.0.1"]


async def test_allow_list_admits_only_its_networks(start_server, listener, monkeypatch):
    port, peers = listener
    monkeypatch.setenv(OPEN_ENV, LOOPBACK)
    monkeypatch.setenv(ALLOW_ENV, "10.0.0.0/8")
    server = await start_server()
    message = await expect_denied(server, "tcp_port_check", host="127.0.0.1", port=port)
    assert "127.0.0.1" in message and "10.0.0.0/8" in message and ALLOW_ENV in message
    # Allowed but not opened is still closed: the allow list only narrows.
    monkeypatch.setenv(ALLOW_ENV, "127.0.0.0/8")
    monkeypatch.delenv(OPEN_ENV)
    assert OPEN_ENV in await expect_denied(server, "tcp_port_check", host="127.0.0.1", port=port)
    assert peers == []


@pytest.mark.parametrize("variable", [OPEN_ENV, DENY_ENV, ALLOW_ENV])
async def test_misconfigured_policy_fails_the_call(start_server, listener, monkeypatch, variable):
    port, peers = listener
    monkeypatch.setenv(variable, "127.0.0.0/8,not-a-network")
    server = await start_server()
    response = await call(server, "tcp_port_check", host="127.0.0.1", port=port)
    assert not response.success and response.error.code == "EGRESS_MISCONFIGURED"
    assert variable in response.error.message and "'not-a-network'" in response.error.message
    assert peers == []


# --- http_check ---------------------------------------------------------------------------------------------

async def test_http_redirect_to_metadata_refused_before_it_is_followed(start_server, http_port, monkeypatch):
    monkeypatch.setenv(OPEN_ENV, LOOPBACK)
    server = await start_server()
    url = f"http://127.0.0.1:{http_port}/to-metadata"
    message = await expect_denied(server, "http_check", url=url, follow_redirects=True, timeout_seconds=5)
    assert f"redirect 1 to http://{METADATA}/latest/meta-data" in message and "169.254.0.0/16" in message
    assert Handler.paths == ["/to-metadata"]
    # Not following it, the redirect is only reported.
    response = await call(server, "http_check", url=url)
    assert response.success and json.loads(response.output)["status_code"] == 302


@pytest.mark.parametrize("location", ["http://127.0.0.2:{port}/ok", "http://[::1]:{port}/ok",
                                      "http://0x7f000002:{port}/ok", "http://[::ffff:127.0.0.2]:{port}/ok"])
async def test_http_redirect_to_a_closed_address_is_refused(start_server, http_port, monkeypatch, location):
    # Only 127.0.0.1 is opened: the first request gets through, the redirect to the rest of loopback does not.
    monkeypatch.setenv(OPEN_ENV, "127.0.0.1/32")
    server = await start_server()
    target = location.format(port=http_port)
    message = await expect_denied(server, "http_check", url=f"http://127.0.0.1:{http_port}/redirect?to={target}",
                                  follow_redirects=True)
    assert "failed at redirect 1" in message and OPEN_ENV in message
    assert Handler.paths == [f"/redirect?to={target}"]


async def test_http_connects_to_the_checked_address_with_the_name_as_host(start_server, http_port, monkeypatch):
    monkeypatch.setenv(OPEN_ENV, LOOPBACK)
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


async def test_https_keeps_the_name_for_sni_and_certificate_checks(start_server, tls_port, monkeypatch):
    port, names = tls_port
    monkeypatch.setenv(OPEN_ENV, LOOPBACK)
    server = await start_server()
    # The URL names 'localhost'; the tool connects to the address it checked, yet the TLS handshake asks
    # for 'localhost' and verifies the certificate (self-signed here, so it fails verification).
    response = await call(server, "http_check", url=f"https://localhost:{port}/ok", timeout_seconds=5)
    if names == []:
        pytest.skip("localhost does not reach 127.0.0.1 here")
    assert not response.success and response.error.code == "TLS_ERROR", response.error.message
    assert "CERTIFICATE_VERIFY_FAILED" in response.error.message or "certificate" in response.error.message
    assert names[0] == "localhost"


# --- process tools (egress_hosts) ---------------------------------------------------------------------------

async def test_ping_gets_the_checked_address_not_the_name(start_server, monkeypatch):
    monkeypatch.setenv(OPEN_ENV, LOOPBACK)
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


# --- this host, as the kernel sees it -----------------------------------------------------------------------

# Run in a network namespace of its own, where the test may add addresses and change settings: the policy's
# verdict on an address added to loopback (this host, though in no closed network) and on its neighbour.
_NAMESPACE_CHECK = """
import json, socket
from toolhost_server.tools.base import ToolRaisedFailure
from toolhost_server.tools.egress import EgressPolicy

def verdict(address):
    try:
        EgressPolicy().check(address)
    except ToolRaisedFailure as exc:
        return exc.message
    return "allowed"

def binds(family, address):
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.bind((address, 0))
        except OSError:
            return False
        return True

print(json.dumps({"own": [verdict("203.0.113.7"), verdict("2001:db8::7")],
                  "in_local_route": verdict("198.51.100.2"),
                  "other": [verdict("203.0.113.8"), verdict("2001:db8::8")],
                  "any_binds": binds(socket.AF_INET, "203.0.113.8") and binds(socket.AF_INET6, "2001:db8::8")}))
"""


@pytest.mark.parametrize("nonlocal_bind", [False, True], ids=["bind", "ip_nonlocal_bind"])
def test_this_host_is_what_the_kernel_delivers_locally(nonlocal_bind):
    """An address is this host's when the kernel would deliver a connection to it here. With ip_nonlocal_bind
    on, any address binds, so the policy asks the route instead."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs unshare and ip (util-linux, iproute2) for a network namespace of its own")
    # 198.51.100.0/24 on loopback makes the whole network local (a connection to .2 reaches this host), though
    # only .1 is assigned.
    setup = ["ip link set lo up", "ip addr add 203.0.113.7/32 dev lo", "ip addr add 2001:db8::7/128 dev lo nodad",
             "ip addr add 198.51.100.1/24 dev lo"]
    if nonlocal_bind:
        setup += ["sysctl -qw net.ipv4.ip_nonlocal_bind=1", "sysctl -qw net.ipv6.ip_nonlocal_bind=1"]
    script = " && ".join([*setup, 'exec "$0" -c "$1"'])
    namespace = subprocess.run(["unshare", "--net", "sh", "-ec", script, sys.executable, _NAMESPACE_CHECK],
                               capture_output=True, text=True, timeout=60)
    if namespace.returncode != 0 and "unshare failed" in namespace.stderr:
        pytest.skip(f"cannot create a network namespace here (needs root): {namespace.stderr.strip()}")
    assert namespace.returncode == 0, namespace.stderr
    found = json.loads(namespace.stdout)
    assert found["any_binds"] is nonlocal_bind, "the namespace's ip_nonlocal_bind is not what the test set"
    for message, own in zip(found["own"], ("203.0.113.7/32", "2001:db8::7/128"), strict=True):
        assert "an address of this host" in message and f"add {own} to {OPEN_ENV}" in message
    assert found["other"] == ["allowed", "allowed"]
    if not nonlocal_bind:  # the route check cannot see it: the limit this_host.py's docstring names
        assert "add 198.51.100.2/32 to" in found["in_local_route"]


# --- make run -----------------------------------------------------------------------------------------------


@pytest.mark.server
async def test_make_run_opens_loopback_for_the_readme_example(tmp_path):
    """`make run`'s command on free ports: the README's `toolhost call tcp_port_check host=127.0.0.1 port=...`
    answers instead of EGRESS_DENIED."""
    async with make_run(tmp_path) as server:
        stub = SimpleNamespace(stub=tool_service_pb2_grpc.ToolServiceStub(server.channel))
        response = await call(stub, "tcp_port_check", host="127.0.0.1", port=server.port, timeout=20)
    assert response.success, response.error.message
    assert json.loads(response.output)["open"] is True
