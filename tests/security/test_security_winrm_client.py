"""Attacks on the WinRM client: an environment that would reroute or re-trust its connections, and hosts that
answer like no Windows host would (garbage, a redirect, an endless answer, a fault full of control characters).
The client must send nothing where it was not told to, and fail with a bounded, clean message in time."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from toolhost_server.windows.winrm_client import WinrmEndpoint, WinrmFailure, WinrmLogin, run_powershell

from helpers.certificates import CertificateAuthority
from helpers.http_servers import serving_http
from helpers.waiting import within
from helpers.winrm_fake import FakeWinrm

PASSWORD = "canary-Pa55w0rd-c41d"
BASIC = WinrmLogin("basic", "alice", PASSWORD)


class _Recorder(BaseHTTPRequestHandler):
    """A would-be proxy: counts what reaches it and answers nothing useful."""

    seen: ClassVar[list[str]] = []

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _any(self) -> None:
        self.seen.append(f"{self.command} {self.path}")
        self.send_response(502)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = do_CONNECT = _any


@pytest.fixture
def proxy() -> Iterator[type[_Recorder]]:
    class Recorder(_Recorder):
        seen: ClassVar[list[str]] = []

    with serving_http(Recorder) as server:
        Recorder.port = server.server_address[1]  # type: ignore[attr-defined]
        yield Recorder


async def test_proxy_ca_bundle_and_netrc_variables_change_nothing(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, proxy: type[_Recorder]) -> None:
    proxy_url = f"http://127.0.0.1:{proxy.port}"  # type: ignore[attr-defined]
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, proxy_url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    netrc = tmp_path / "netrc"
    netrc.write_text("machine winhost.test login mallory password netrc-secret\n")
    monkeypatch.setenv("NETRC", str(netrc))
    with FakeWinrm(tls=True, authentication="basic", username="alice", password=PASSWORD,
                   responder=lambda script: ("direct", "", 0)) as fake:
        assert fake.ca_file is not None
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", fake.ca_file)
        monkeypatch.setenv("CURL_CA_BUNDLE", fake.ca_file)
        endpoint = WinrmEndpoint(fake.hostname, ("127.0.0.1",), fake.port, ssl=True, ca_file=fake.ca_file)
        output = await within(run_powershell(endpoint, BASIC, "x", timeout_seconds=30, max_output_bytes=100), "call")
        # The CA bundle variable would make the test CA trusted; without a CA file only the system's trust counts.
        system_trust = WinrmEndpoint(fake.hostname, ("127.0.0.1",), fake.port, ssl=True, ca_file=None)
        with pytest.raises(WinrmFailure) as caught:
            await within(run_powershell(system_trust, BASIC, "x", timeout_seconds=30, max_output_bytes=100), "call")
    assert output.stdout == "direct"
    assert caught.value.code == "TLS_ERROR"
    assert proxy.seen == []
    assert all("netrc-secret" not in str(request.headers) for request in fake.requests)


async def test_ntlm_over_http_ignores_a_proxy_variable(monkeypatch: pytest.MonkeyPatch,
                                                       proxy: type[_Recorder]) -> None:
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")  # type: ignore[attr-defined]
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy.port}")  # type: ignore[attr-defined]
    with FakeWinrm(tls=False, authentication="ntlm", username="alice", password=PASSWORD, domain="CORP",
                   responder=lambda script: ("direct", "", 0)) as fake:
        endpoint = WinrmEndpoint(fake.hostname, ("127.0.0.1",), fake.port, ssl=False)
        output = await within(run_powershell(endpoint, WinrmLogin("ntlm", "CORP\\alice", PASSWORD), "x",
                                             timeout_seconds=30, max_output_bytes=100), "call")
    assert output.stdout == "direct"
    assert proxy.seen == []


# Hostile hosts: each handler answers every POST its own way, over TLS with a certificate for winhost.test.
_stop = threading.Event()


class _Hostile(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    requests_seen = 0

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        type(self).requests_seen += 1
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.answer()

    def answer(self) -> None:
        raise NotImplementedError

    def reply(self, status: int, body: bytes, *headers: tuple[str, str]) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Garbage(_Hostile):
    def answer(self) -> None:
        self.reply(200, b"<html>not WinRM</html>", ("Content-Type", "text/html"))


class _Huge(_Hostile):
    def answer(self) -> None:
        self.reply(200, b"<a>" + b"x" * (4 * 1024 * 1024) + b"</a>")


class _Redirect(_Hostile):
    def answer(self) -> None:
        self.reply(302, b"", ("Location", "https://attacker.test/wsman"))


class _Fault(_Hostile):
    def answer(self) -> None:
        reason = "\u009b31mEVIL\n\t" * 5000
        body = ('<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope"><s:Body><s:Fault><s:Code><s:Value>'
                f"s:Receiver</s:Value></s:Code><s:Reason><s:Text>{reason}</s:Text></s:Reason></s:Fault></s:Body>"
                "</s:Envelope>")
        self.reply(500, body.encode(), ("Content-Type", "application/soap+xml;charset=UTF-8"))


class _Drip(_Hostile):
    """Headers at once, then a byte at a time, forever: no single read ever times out."""

    def answer(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(10**9))
        self.end_headers()
        try:
            while not _stop.wait(0.05):
                self.wfile.write(b" ")
                self.wfile.flush()
        except OSError:
            pass


@pytest.fixture
def tls_for_winhost(tmp_path: Path) -> tuple[ssl.SSLContext, str]:
    authority = CertificateAuthority(tmp_path / "ca")
    pair = authority.issue_server("winhost", "winhost.test", "DNS:winhost.test")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pair.certificate, pair.key)
    return context, str(authority.certificate)


async def _against(handler: type[_Hostile], tls: tuple[ssl.SSLContext, str], timeout: float = 30) -> WinrmFailure:
    context, ca_file = tls
    server: ThreadingHTTPServer
    with serving_http(handler, context) as server:
        endpoint = WinrmEndpoint("winhost.test", ("127.0.0.1",), server.server_address[1], ssl=True, ca_file=ca_file)
        try:
            with pytest.raises(WinrmFailure) as caught:
                await within(run_powershell(endpoint, BASIC, "x", timeout_seconds=timeout, max_output_bytes=100),
                             "the call")
        finally:
            _stop.set()
    _stop.clear()
    assert PASSWORD not in caught.value.message
    assert len(caught.value.message) < 700
    assert not any(ord(character) < 0x20 or 0x7f <= ord(character) <= 0x9f for character in caught.value.message)
    return caught.value


@pytest.mark.parametrize(("handler", "told"), [(_Garbage, "not WinRM"), (_Huge, "larger than WinRM allows"),
                                               (_Redirect, "redirect"), (_Fault, "refused the request")])
async def test_a_host_that_answers_no_winrm_is_a_protocol_error(handler: type[_Hostile], told: str,
                                                                tls_for_winhost: tuple[ssl.SSLContext, str]) -> None:
    handler.requests_seen = 0
    failure = await _against(handler, tls_for_winhost)
    assert failure.code == "PROTOCOL_ERROR"
    assert told in failure.message
    assert handler.requests_seen == 1  # nothing retried, no redirect followed


async def test_a_fault_reason_is_quoted_short_and_without_control_characters(
        tls_for_winhost: tuple[ssl.SSLContext, str]) -> None:
    failure = await _against(_Fault, tls_for_winhost)
    assert "EVIL" in failure.message
    assert "…" in failure.message  # 5,000 repetitions, cut short


async def test_a_host_that_drips_its_answer_is_given_up_on_at_the_deadline(
        tls_for_winhost: tuple[ssl.SSLContext, str]) -> None:
    failure = await _against(_Drip, tls_for_winhost, timeout=2.0)
    assert failure.code in ("TIMEOUT", "CONNECTION_FAILED")
