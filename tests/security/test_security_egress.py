"""Security review findings 4 and 10 (issue 16): a caller of the network tools cannot reach the server's own
services, by default and by no spelling of an address.

10: loopback, this host's other addresses and the private networks are closed until an operator opens them
(TOOLHOST_EGRESS_OPEN); the refusal names the setting and the network to open.
4: the unspecified address (0.0.0.0, "0", "0x0", ::) reaches this host and is always denied, opened loopback or
not; an IPv6 address that embeds an IPv4 one is judged by the IPv4 address it reaches.
Further spellings (octal and short IPv4, case, trailing dots, zero-padded and scoped IPv6, brackets, userinfo, a
percent-encoded host, the machine's own name) reach nothing: a socket listening on every address of this host
is left with an empty backlog, and a spelling the resolver here takes to this host is refused by the tool.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread
from typing import Any, ClassVar

import dns.resolver
import grpc
import pytest

from toolhost.v1 import tool_service_pb2
from toolhost_server.tools.egress import ALLOW_ENV, DENY_ENV, OPEN_ENV

from helpers.addresses import non_loopback_address

# Each reaches this host's loopback. The target port is the server's own gRPC port, so a connection the policy
# let through would succeed: what the review did to scan the server's own ports.
LOOPBACK_SPELLINGS = ["127.0.0.1", "localhost", "127.1", "2130706433", "0x7f000001", "::1", "::ffff:127.0.0.1",
                      "::127.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::"]
UNSPECIFIED_SPELLINGS = ["0.0.0.0", "0", "0x0", "::", "::ffff:0.0.0.0", "64:ff9b::", "2002::"]
URL_HOSTS = ["127.0.0.1", "localhost", "[::1]", "0x7f000001", "2130706433", "0", "0.0.0.0", "[::]",
             "[::ffff:127.0.0.1]", "[::ffff:0.0.0.0]", "[64:ff9b::7f00:1]", "[2002:7f00:1::]"]
LOOPBACK_OPEN = "127.0.0.0/8,::1/128"


@pytest.fixture(autouse=True)
def default_policy(monkeypatch):
    for variable in (OPEN_ENV, DENY_ENV, ALLOW_ENV):
        monkeypatch.delenv(variable, raising=False)


@pytest.fixture
async def server(start_server):
    return await start_server()


async def call(server, name: str, **arguments: object) -> tool_service_pb2.CallToolResponse:
    return await server.stub.CallTool(tool_service_pb2.CallToolRequest(name=name, arguments_json=json.dumps(arguments)))


def assert_refused(response: tool_service_pb2.CallToolResponse, what: object) -> None:
    assert not response.success and response.error.code == "EGRESS_DENIED", (what, response)
    assert not response.HasField("exit_code"), (what, "the program ran")


# --- by default ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("host", LOOPBACK_SPELLINGS + UNSPECIFIED_SPELLINGS)
async def test_tcp_port_check_cannot_reach_the_servers_own_port(server, host):
    response = await call(server, "tcp_port_check", host=host, port=server.port)
    assert_refused(response, host)


@pytest.mark.parametrize("host", URL_HOSTS)
async def test_http_check_cannot_reach_loopback(server, host):
    response = await call(server, "http_check", url=f"http://{host}:{server.port}/")
    assert_refused(response, host)


@pytest.mark.parametrize("nameserver", ["127.0.0.1", "::1", "::ffff:127.0.0.1", "0.0.0.0", "::", "::ffff:0.0.0.0",
                                        "64:ff9b::7f00:1"])
async def test_dns_lookup_cannot_use_a_loopback_nameserver(server, nameserver):
    response = await call(server, "dns_lookup", domain="example.com", nameserver=nameserver)
    assert_refused(response, nameserver)


@pytest.mark.parametrize("tool", ["shell_ping", "traceroute"])
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "0x7f000001", "::ffff:127.0.0.1", "0", "::"])
async def test_process_tools_cannot_reach_loopback(server, tool, host):
    response = await call(server, tool, host=host)
    assert_refused(response, host)


async def test_the_refusal_names_the_setting_and_the_network_to_open(server):
    response = await call(server, "tcp_port_check", host="0x7f000001", port=server.port)
    assert f"add 127.0.0.0/8 (or a smaller network) to {OPEN_ENV}" in response.error.message
    response = await call(server, "http_check", url=f"http://[2002:7f00:1::]:{server.port}/")
    assert "(which reaches 127.0.0.1)" in response.error.message and OPEN_ENV in response.error.message
    response = await call(server, "tcp_port_check", host="0.0.0.0", port=server.port)
    assert "0.0.0.0/8" in response.error.message and "always denied" in response.error.message


# --- redirects ----------------------------------------------------------------------------------------------

class Redirect(BaseHTTPRequestHandler):
    """Redirects every request to `location`."""

    location: ClassVar[str] = ""
    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).paths.append(self.path)
        self.send_response(302)
        self.send_header("Location", type(self).location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def redirector() -> Iterator[tuple[str, int]]:
    """An HTTP server on this host's own non-loopback IPv4 address, and that address."""
    address = non_loopback_address()
    if address is None or ":" in address:
        pytest.skip("this machine has no non-loopback IPv4 address to serve the first hop from")
    Redirect.paths = []
    httpd = ThreadingHTTPServer((address, 0), Redirect)
    httpd.daemon_threads = True
    thread = Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield address, httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


@pytest.mark.parametrize("host", URL_HOSTS)
async def test_a_redirect_cannot_reach_loopback(start_server, redirector, monkeypatch, host):
    # The operator opened the first hop, an address of this host, and nothing else.
    address, port = redirector
    monkeypatch.setenv(OPEN_ENV, f"{address}/32")
    server = await start_server()
    Redirect.location = f"http://{host}:{server.port}/"
    response = await call(server, "http_check", url=f"http://{address}:{port}/start", follow_redirects=True)
    assert_refused(response, host)
    assert "failed at redirect 1" in response.error.message
    assert Redirect.paths == ["/start"]


# --- with loopback opened -----------------------------------------------------------------------------------

@pytest.mark.parametrize("host", UNSPECIFIED_SPELLINGS)
async def test_opened_loopback_does_not_open_the_unspecified_address(start_server, monkeypatch, host):
    monkeypatch.setenv(OPEN_ENV, LOOPBACK_OPEN)
    server = await start_server()
    response = await call(server, "tcp_port_check", host=host, port=server.port)
    assert_refused(response, host)
    assert "always denied" in response.error.message


@pytest.mark.parametrize("host", ["127.0.0.1", "0x7f000001", "2130706433", "::ffff:127.0.0.1"])
async def test_opened_loopback_is_reached_by_its_spellings(start_server, monkeypatch, host):
    # The finding is about the policy, not the tools: an operator who opens loopback gets it, however written.
    monkeypatch.setenv(OPEN_ENV, LOOPBACK_OPEN)
    server = await start_server()
    response = await call(server, "tcp_port_check", host=host, port=server.port)
    assert response.success, (host, response.error)
    assert json.loads(response.output)["open"] is True


# --- the server's own resolvers, on a port the caller picks -------------------------------------------------

@pytest.fixture
def loopback_resolver(tmp_path, monkeypatch) -> Iterator[socket.socket]:
    """The server's resolv.conf names 127.0.0.1 (as systemd-resolved's 127.0.0.53 or Docker's 127.0.0.11 do);
    a UDP socket on a loopback port stands for a service there that is no DNS server."""
    conf = tmp_path / "resolv.conf"
    conf.write_text("nameserver 127.0.0.1\n")
    read = dns.resolver.BaseResolver.read_resolv_conf
    monkeypatch.setattr(dns.resolver.BaseResolver, "read_resolv_conf", lambda self, f: read(self, str(conf)))
    service = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    service.bind(("127.0.0.1", 0))
    service.setblocking(False)
    try:
        yield service
    finally:
        service.close()


async def test_dns_lookup_cannot_send_the_servers_resolver_queries_to_another_port(server, loopback_resolver):
    # The operator chose the resolver and its port 53; another port makes the caller pick the destination: a
    # loopback (or private) service the policy keeps closed, probed with a datagram.
    port = loopback_resolver.getsockname()[1]
    response = await call(server, "dns_lookup", domain="example.com", nameserver_port=port, timeout_seconds=1)
    assert_refused(response, port)
    assert OPEN_ENV in response.error.message
    with pytest.raises(BlockingIOError):
        loopback_resolver.recv(512)  # nothing reached the service
    # On port 53 the operator's resolver is used as configured, whatever its address.
    response = await call(server, "dns_lookup", domain="example.com", timeout_seconds=1)
    assert response.error.code != "EGRESS_DENIED", response.error


# The metadata services sit in networks an operator may well open (ULA for an IPv6 asset network); they stay
# denied whatever is opened.
@pytest.mark.parametrize("host", ["169.254.169.254", "fd00:ec2::254", "fd00:ec2::23", "fd20:ce::254", "fd00:42::42",
                                  "100.100.100.200", "192.0.0.192", "::ffff:169.254.169.254"])
async def test_metadata_services_stay_denied_whatever_is_opened(start_server, monkeypatch, host):
    monkeypatch.setenv(OPEN_ENV, "10.0.0.0/8,100.64.0.0/10,192.0.0.0/24,fc00::/7")
    server = await start_server()
    response = await call(server, "tcp_port_check", host=host, port=80, timeout_seconds=1)
    assert_refused(response, host)
    assert "always denied" in response.error.message, response.error.message


# --- more spellings of this host ----------------------------------------------------------------------------

# Octal, short and zero-padded forms, another loopback address, case, trailing dots (the root of the DNS tree),
# spelled-out and scoped IPv6, brackets where a host belongs without them, and the machine's own name.
MORE_SPELLINGS = ["0177.0.0.1", "0177.1", "017700000001", "0x7f.0.0.1", "0x7f.1", "127.000.000.001",
                  "127.127.127.127", "LOCALHOST", "localhost.", "127.0.0.1.", "0:0:0:0:0:0:0:1", "::0:1",
                  "::ffff:7f00:1", "::1%lo", "[::1]", socket.gethostname()]
# The same in URLs, with userinfo and a percent-encoded host.
MORE_URL_HOSTS = ["0177.0.0.1", "0177.1", "0x7f.1", "127.000.000.001", "127.127.127.127", "LOCALHOST", "localhost.",
                  "127.0.0.1.", "[0:0:0:0:0:0:0:1]", "[::ffff:7f00:1]", "[::1%25lo]", "user:pass@127.0.0.1",
                  "%31%32%37.0.0.1", socket.gethostname()]


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP socket listening on every address of this host, IPv6 and IPv4, that never accepts: a connection
    that any spelling reached waits in its backlog."""
    try:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(("::", 0))
    except OSError:  # no IPv6 here: IPv4 alone
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("0.0.0.0", 0))
    sock.listen(8)
    sock.setblocking(False)
    with sock:
        yield sock


def assert_nothing_reached(listener: socket.socket, host: str) -> None:
    with pytest.raises(BlockingIOError):
        accepted, _ = listener.accept()
        accepted.close()
        pytest.fail(f"{host!r} reached this host's listening port")


def resolves_to_this_host(host: str) -> bool:
    """Whether this machine's resolver takes `host` to a loopback address or one of its own (so the policy must
    refuse it rather than fail to resolve it)."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return False
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(a.startswith("127.") or a in ("::1", "::ffff:127.0.0.1")
                                   or a == non_loopback_address() for a in addresses)


# A call the API refuses (the tool's schema does not admit the spelling) never ran; one that ran must not have
# connected, and where the resolver here takes the host to this machine the tool refused it: the egress policy,
# or the URL parser for a host it will not read (INVALID_TARGET).
REFUSED_HERE = ("EGRESS_DENIED", "INVALID_TARGET")


async def call_or_refusal(server, name: str, **arguments: object) -> tool_service_pb2.CallToolResponse | None:
    """The response, or None when the API refused the arguments (INVALID_ARGUMENT: the tool did not run)."""
    try:
        return await call(server, name, **arguments)
    except grpc.aio.AioRpcError as refusal:
        assert refusal.code() == grpc.StatusCode.INVALID_ARGUMENT, refusal
        return None


@pytest.mark.parametrize("host", MORE_SPELLINGS)
async def test_tcp_port_check_reaches_no_other_spelling_of_this_host(server, listener, host):
    response = await call_or_refusal(server, "tcp_port_check", host=host, port=listener.getsockname()[1],
                                     timeout_seconds=2)
    if response is not None:
        assert not (response.success and json.loads(response.output)["open"]), (host, response)
        if resolves_to_this_host(host):
            assert response.error.code in REFUSED_HERE, (host, response)
    assert_nothing_reached(listener, host)


@pytest.mark.parametrize("host", MORE_URL_HOSTS)
async def test_http_check_reaches_no_other_spelling_of_this_host(server, listener, host):
    url = f"http://{host}:{listener.getsockname()[1]}/"
    response = await call_or_refusal(server, "http_check", url=url, timeout_seconds=2)
    if response is not None:
        assert not response.success, (url, response)
        if resolves_to_this_host(host.rpartition("@")[2].strip("[]")):
            assert response.error.code in REFUSED_HERE, (url, response)
    assert_nothing_reached(listener, url)
