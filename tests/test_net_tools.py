"""The built-in network tools, called through a real toolhost server against real servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset
import grpc
import jsonschema_rs
import pytest
from google.protobuf import json_format

from toolhost.v1 import tool_service_pb2
from toolhost_server.catalog.builtins import discover_builtin_definitions
from toolhost_server.model import ToolSpec
from toolhost_server.tools.egress import ALLOW_ENV, DENY_ENV, OPEN_ENV

from helpers.calls import call
from helpers.http_servers import serving_http
from helpers.waiting import within

NETWORK_TOOLS = ("dns_lookup", "tcp_port_check", "http_check", "shell_ping", "traceroute")


@pytest.fixture(autouse=True)
def loopback_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    """The servers these tools talk to listen on loopback, which the egress policy keeps closed until an
    operator opens it (tests/test_egress.py). In-process servers read the policy from this environment."""
    monkeypatch.setenv(OPEN_ENV, "127.0.0.0/8,::1/128")
    monkeypatch.delenv(DENY_ENV, raising=False)
    monkeypatch.delenv(ALLOW_ENV, raising=False)


async def call_ok(server: Any, name: str, **arguments: Any) -> dict[str, Any]:
    """The structured result of a call that must succeed, read from its JSON text (which keeps integers)."""
    response = await call(server, name, **arguments)
    assert response.success, (response.error.code, response.error.message)
    result: dict[str, Any] = json.loads(response.output)
    assert result == json_format.MessageToDict(response.structured_output.struct_value)
    assert list(result) == sorted(result), "keys come out sorted"
    return result


async def expect_failure(server: Any, name: str, code: str, **arguments: Any) -> str:
    response = await call(server, name, **arguments)
    assert not response.success
    assert response.error.code == code, response.error.message
    return response.error.message


async def expect_invalid_argument(server: Any, name: str, **arguments: Any) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call(server, name, **arguments)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    return raised.value.details() or ""


# --- dns_lookup ---------------------------------------------------------------------------------------------

# name -> record type -> records in zone-file text; "SERVFAIL" or "SILENT" make the server misbehave.
ZONE: dict[str, dict[str, Any]] = {
    "www.example.test.": {"A": ["192.0.2.10", "192.0.2.2"]},
    "alias.example.test.": {"CNAME": ["www.example.test."]},
    "example.test.": {"MX": ["20 mx2.example.test.", "10 mx1.example.test."], "TXT": ['"v=spf1 -all"']},
    "10.2.0.192.in-addr.arpa.": {"PTR": ["www.example.test."]},
    "broken.example.test.": {"A": "SERVFAIL"},
    "slow.example.test.": {"A": "SILENT"},
}


class TinyDnsServer(asyncio.DatagramProtocol):
    """An authoritative UDP nameserver for ZONE, following one CNAME the way real servers do."""

    def __init__(self) -> None:
        self.transport: Any = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        query = dns.message.from_wire(data)
        question = query.question[0]
        name, rdtype = question.name.to_text(), dns.rdatatype.to_text(question.rdtype)
        response = dns.message.make_response(query)
        response.flags |= dns.flags.AA
        records = ZONE.get(name)
        if records is None:
            response.set_rcode(dns.rcode.NXDOMAIN)
        elif records.get(rdtype) == "SILENT":
            return
        elif records.get(rdtype) == "SERVFAIL":
            response.set_rcode(dns.rcode.SERVFAIL)
        else:
            if rdtype not in records and "CNAME" in records:
                target = records["CNAME"][0]
                response.answer.append(dns.rrset.from_text_list(name, 300, "IN", "CNAME", records["CNAME"]))
                name, records = target, ZONE[target]
            if rdtype in records:
                response.answer.append(dns.rrset.from_text_list(name, 300, "IN", rdtype, records[rdtype]))
        self.transport.sendto(response.to_wire(), addr)


@pytest.fixture
async def dns_port() -> AsyncIterator[int]:
    transport, _ = await asyncio.get_running_loop().create_datagram_endpoint(
        TinyDnsServer, local_addr=("127.0.0.1", 0))
    yield transport.get_extra_info("sockname")[1]
    transport.close()


async def test_dns_lookup_a_records_sorted_with_ttl(start_server, dns_port):
    server = await start_server()
    result = await call_ok(server, "dns_lookup", domain="www.example.test", nameserver="127.0.0.1",
                           nameserver_port=dns_port)
    assert result == {
        "canonical_name": "www.example.test.",
        "domain": "www.example.test",
        "nameserver": "127.0.0.1",
        "query_name": "www.example.test.",
        "record_type": "A",
        "records": ["192.0.2.2", "192.0.2.10"],  # numeric order, not the order the server sent
        "status": "NOERROR",
        "ttl": 300,
    }


async def test_dns_lookup_mx_txt_cname_and_ptr(start_server, dns_port):
    server = await start_server()
    where = {"nameserver": "127.0.0.1", "nameserver_port": dns_port}
    mx = await call_ok(server, "dns_lookup", domain="example.test", record_type="MX", **where)
    assert mx["records"] == ["10 mx1.example.test.", "20 mx2.example.test."]
    txt = await call_ok(server, "dns_lookup", domain="example.test", record_type="TXT", **where)
    assert txt["records"] == ['"v=spf1 -all"']
    alias = await call_ok(server, "dns_lookup", domain="alias.example.test", **where)
    assert alias["canonical_name"] == "www.example.test." and alias["records"] == ["192.0.2.2", "192.0.2.10"]
    ptr = await call_ok(server, "dns_lookup", domain="192.0.2.10", record_type="PTR", **where)
    assert ptr["query_name"] == "10.2.0.192.in-addr.arpa." and ptr["records"] == ["www.example.test."]
    # The name exists but has no records of that type: an empty answer, not an error.
    none = await call_ok(server, "dns_lookup", domain="example.test", record_type="AAAA", **where)
    assert none["status"] == "NOERROR" and none["records"] == [] and none["ttl"] is None


async def test_dns_lookup_nxdomain_is_an_answer(start_server, dns_port):
    server = await start_server()
    result = await call_ok(server, "dns_lookup", domain="nope.example.test", nameserver="127.0.0.1",
                           nameserver_port=dns_port)
    assert result["status"] == "NXDOMAIN" and result["records"] == [] and result["ttl"] is None


async def test_dns_lookup_servfail_and_silence_are_failures(start_server, dns_port):
    server = await start_server()
    where = {"nameserver": "127.0.0.1", "nameserver_port": dns_port}
    message = await expect_failure(server, "dns_lookup", "DNS_ERROR", domain="broken.example.test", **where)
    assert "SERVFAIL" in message
    # The nameserver never answers: the tool's own timeout ends the call, and says which one it was.
    message = await expect_failure(server, "dns_lookup", "TIMEOUT", domain="slow.example.test",
                                   timeout_seconds=0.3, **where)
    assert "0.3s" in message


async def test_dns_lookup_rejects_bad_arguments(start_server):
    server = await start_server()
    details = await expect_invalid_argument(server, "dns_lookup", domain="example.com", record_type="ANY")
    assert "/record_type" in details
    await expect_invalid_argument(server, "dns_lookup", domain="-x.example.com")
    await expect_invalid_argument(server, "dns_lookup", domain="example.com", nameserver="dns.google")
    message = await expect_failure(server, "dns_lookup", "INVALID_TARGET", domain="example.com",
                                   nameserver="1.2.3")
    assert "not an IP address" in message


# --- tcp_port_check -----------------------------------------------------------------------------------------

async def test_tcp_port_check_open_port(start_server):
    server = await start_server()
    accepted = asyncio.Event()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set()
        writer.close()

    listener = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        started = time.perf_counter()
        result = await call_ok(server, "tcp_port_check", host="127.0.0.1", port=port)
        call_ms = (time.perf_counter() - started) * 1000
        await within(accepted.wait(), "the check's connection reaching the listener")
    finally:
        listener.close()
        await listener.wait_closed()
    assert result["open"] is True and result["error"] is None
    assert result["host"] == "127.0.0.1" and result["address"] == "127.0.0.1" and result["port"] == port
    # The connect's own time, in milliseconds: part of the call's.
    assert 0 <= result["latency_ms"] <= call_ms


async def test_tcp_port_check_closed_port_is_a_successful_check(start_server):
    server = await start_server()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = await call_ok(server, "tcp_port_check", host="localhost", port=port, timeout_seconds=1)
    assert result == {"address": result["address"], "error": "connection refused", "host": "localhost",
                      "latency_ms": None, "open": False, "port": port}
    assert result["address"] in ("127.0.0.1", "::1")


async def test_tcp_port_check_rejects_bad_arguments(start_server):
    server = await start_server()
    assert "/port" in await expect_invalid_argument(server, "tcp_port_check", host="127.0.0.1", port=70000)
    await expect_invalid_argument(server, "tcp_port_check", host="127.0.0.1", port=80, timeout_seconds=31)
    await expect_invalid_argument(server, "tcp_port_check", host="-oProxyCommand=x", port=22)


# --- http_check ---------------------------------------------------------------------------------------------

class Handler(BaseHTTPRequestHandler):
    """/ok, /missing, /redirect, /big (a large body), /binary, /slow (answers once the test has ended)."""

    seen_headers: ClassVar[list[dict[str, str]]] = []
    release_slow: ClassVar[threading.Event] = threading.Event()

    def do_GET(self) -> None:
        type(self).seen_headers.append({k.lower(): v for k, v in self.headers.items()})
        if self.path == "/ok":
            self._reply(200, b"hello from the test server", "text/plain; charset=utf-8")
        elif self.path == "/missing":
            self._reply(404, b"<h1>not here</h1>", "text/html")
        elif self.path == "/redirect":
            self._reply(302, b"", "text/plain", location="/ok")
        elif self.path == "/big":
            self._reply(200, b"a" * 200_000, "text/plain")
        elif self.path == "/binary":
            self._reply(200, bytes(range(256)) * 4, "image/png")
        elif self.path == "/slow":
            type(self).release_slow.wait()
            self._reply(200, b"late", "text/plain")

    do_HEAD = do_GET

    def _reply(self, status: int, body: bytes, content_type: str, location: str = "") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if location:
            self.send_header("Location", location)
        self.end_headers()
        if self.command != "HEAD":
            # The check stops reading after a few KB and hangs up, as it should.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def http_base() -> Iterator[str]:
    Handler.seen_headers = []
    Handler.release_slow = threading.Event()
    with serving_http(Handler) as httpd:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
        Handler.release_slow.set()


async def test_http_check_200(start_server, http_base):
    server = await start_server()
    started = time.perf_counter()
    result = await call_ok(server, "http_check", url=f"{http_base}/ok")
    call_ms = (time.perf_counter() - started) * 1000
    assert result["status_code"] == 200 and result["ok"] is True and result["reason"] == "OK"
    assert result["body_preview"] == "hello from the test server" and result["body_truncated"] is False
    assert result["headers"]["content-type"] == "text/plain; charset=utf-8"
    assert result["headers"]["server"].startswith("BaseHTTP") and result["headers"]["location"] is None
    assert result["tls"] is False and result["method"] == "GET" and result["redirects"] == 0
    assert result["url"] == result["final_url"] == f"{http_base}/ok"
    assert 0 <= result["latency_ms"] <= call_ms  # the request's own time, in milliseconds: part of the call's
    # Nothing that identifies or authenticates anyone goes out.
    sent = Handler.seen_headers[-1]
    assert sent["user-agent"] == "toolhost-http-check/1.0"
    assert "authorization" not in sent and "cookie" not in sent


async def test_http_check_404_against_expected_status(start_server, http_base):
    server = await start_server()
    plain = await call_ok(server, "http_check", url=f"{http_base}/missing")
    assert plain["status_code"] == 404 and plain["ok"] is False and plain["body_preview"] == "<h1>not here</h1>"
    expected = await call_ok(server, "http_check", url=f"{http_base}/missing", expected_status=404)
    assert expected["ok"] is True
    wrong = await call_ok(server, "http_check", url=f"{http_base}/ok", expected_status=204)
    assert wrong["status_code"] == 200 and wrong["ok"] is False


async def test_http_check_reports_redirect_unless_asked_to_follow(start_server, http_base):
    server = await start_server()
    result = await call_ok(server, "http_check", url=f"{http_base}/redirect")
    assert result["status_code"] == 302 and result["headers"]["location"] == "/ok" and result["ok"] is True
    assert result["redirects"] == 0 and result["final_url"] == f"{http_base}/redirect"
    followed = await call_ok(server, "http_check", url=f"{http_base}/redirect", follow_redirects=True)
    assert followed["status_code"] == 200 and followed["redirects"] == 1
    assert followed["final_url"] == f"{http_base}/ok" and followed["body_preview"].startswith("hello")


async def test_http_check_caps_the_body(start_server, http_base):
    server = await start_server()
    result = await call_ok(server, "http_check", url=f"{http_base}/big")
    assert result["body_preview"] == "a" * 512 and result["body_truncated"] is True
    binary = await call_ok(server, "http_check", url=f"{http_base}/binary")
    assert binary["body_preview"] is None and binary["headers"]["content-type"] == "image/png"
    head = await call_ok(server, "http_check", url=f"{http_base}/big", method="HEAD")
    assert head["status_code"] == 200 and head["body_preview"] == "" and head["body_truncated"] is False


async def test_http_check_failures(start_server, http_base):
    server = await start_server()
    # /slow answers only after the test: the tool's own timeout ends the call, and says which one it was.
    message = await expect_failure(server, "http_check", "TIMEOUT", url=f"{http_base}/slow", timeout_seconds=0.3)
    assert "0.3s" in message
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    message = await expect_failure(server, "http_check", "CONNECTION_FAILED", url=f"http://127.0.0.1:{closed}/")
    assert "connection refused" in message
    # An https URL on a plain-HTTP port: the handshake gets an HTTP error page instead of a TLS reply.
    message = await expect_failure(server, "http_check", "TLS_ERROR", url=http_base.replace("http:", "https:"))
    assert "TLS handshake failed" in message


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/file", "file:///etc/passwd", "http://user:pw@127.0.0.1/",
                                 "127.0.0.1:8080/"])
async def test_http_check_refuses_other_urls(start_server, url):
    server = await start_server()
    details = await expect_invalid_argument(server, "http_check", url=url)
    assert "/url" in details


# --- shell_ping and traceroute (process runner) -------------------------------------------------------------

async def test_shell_ping_localhost(start_server):
    server = await start_server()
    response = await call(server, "shell_ping", host="127.0.0.1", count=1, timeout_seconds=1)
    assert response.success, (response.error.code, response.error.message, response.stderr)
    assert response.exit_code == 0
    assert "1 received" in response.output and "127.0.0.1" in response.output


async def test_shell_ping_refuses_option_like_host(start_server):
    server = await start_server()
    assert "/host" in await expect_invalid_argument(server, "shell_ping", host="-f")
    await expect_invalid_argument(server, "shell_ping", host="127.0.0.1", count=11)


async def test_traceroute_localhost(start_server):
    server = await start_server()
    response = await call(server, "traceroute", host="127.0.0.1", max_hops=2, wait_seconds=1)
    assert response.success, (response.error.code, response.error.message, response.stderr)
    assert "2 hops max" in response.output
    assert any(line.split()[:2] == ["1", "127.0.0.1"] for line in response.output.splitlines())


# --- what a model sees --------------------------------------------------------------------------------------

def test_packaged_network_definitions_parse():
    specs = {s.name: s for _, s in discover_builtin_definitions() if isinstance(s, ToolSpec)}
    for name in NETWORK_TOOLS:
        assert name in specs, f"{name} is not a valid built-in definition"
        assert specs[name].category == "network"
    assert specs["shell_ping"].runner["argv"][-2:] == ["--", "{host}"]
    assert specs["traceroute"].runner["argv"][-2:] == ["--", "{host}"]


@pytest.mark.parametrize("name", NETWORK_TOOLS)
async def test_network_tool_schema(start_server, name):
    server = await start_server()
    tool = (await server.stub.GetTool(tool_service_pb2.GetToolRequest(name=name))).tool
    assert tool.category == "network" and "network" in tool.tags
    assert tool.annotations.open_world and tool.annotations.read_only and not tool.annotations.destructive
    assert tool.timeout.seconds > 0
    schema = json_format.MessageToDict(tool.input_schema)
    assert schema["type"] == "object" and schema["additionalProperties"] is False and schema["required"]
    for prop in schema["properties"].values():
        assert prop["type"] and prop["description"]
    validator = jsonschema_rs.validator_for(schema)
    assert tool.examples
    for example in tool.examples:
        arguments = json_format.MessageToDict(example.arguments)
        assert validator.is_valid(arguments), (example.description, arguments)
        assert example.description


async def test_outputs_fit_their_output_schema(start_server, dns_port, http_base):
    server = await start_server()
    calls = [
        ("dns_lookup", {"domain": "www.example.test", "nameserver": "127.0.0.1", "nameserver_port": dns_port}),
        ("dns_lookup", {"domain": "nope.example.test", "nameserver": "127.0.0.1", "nameserver_port": dns_port}),
        ("tcp_port_check", {"host": "127.0.0.1", "port": int(http_base.rsplit(":", 1)[1])}),
        ("http_check", {"url": f"{http_base}/binary"}),
    ]
    for name, arguments in calls:
        tool = (await server.stub.GetTool(tool_service_pb2.GetToolRequest(name=name))).tool
        output_schema = json_format.MessageToDict(tool.output_schema)
        result = await call_ok(server, name, **arguments)
        jsonschema_rs.validator_for(output_schema).validate(result)
        assert set(result) == set(output_schema["required"])
