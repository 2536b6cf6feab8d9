"""Attacks on the WinRM client: an environment that would reroute or re-trust its connections, hosts that
answer like no Windows host would (garbage, a redirect, an endless answer, a fault full of control characters,
silence), and someone on the path of NTLM over HTTP answering for the host (in clear, or altered).
The client must send nothing where it was not told to, believe only what the host sealed, and fail with a
bounded, clean message in time."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
import requests

from toolhost_server.windows.sealed_replies import SealedRepliesEncryption, UnsealedReply
from toolhost_server.windows.winrm_client import WinrmEndpoint, WinrmFailure, WinrmLogin, run_powershell

from helpers.certificates import CertificateAuthority
from helpers.http_servers import serving_http
from helpers.waiting import within
from helpers.winrm_fake import FakeWinrm

PASSWORD = "canary-Pa55w0rd-c41d"
BASIC = WinrmLogin("basic", "alice", PASSWORD)
NTLM = WinrmLogin("ntlm", "CORP\\alice", PASSWORD)
# A call's deadline far beyond any answer timeout a test sets: a failure before the hang guard came from the
# answer timeout, and the message names which bound it was.
FAR_DEADLINE = 600.0


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


class _Stall(_Hostile):
    """Headers at once, then silence: the answer never goes on."""

    def answer(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.end_headers()
        self.wfile.flush()
        _stop.wait()


@pytest.fixture
def tls_for_winhost(tmp_path: Path) -> tuple[ssl.SSLContext, str]:
    authority = CertificateAuthority(tmp_path / "ca")
    pair = authority.issue_server("winhost", "winhost.test", "DNS:winhost.test")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pair.certificate, pair.key)
    return context, str(authority.certificate)


async def _against(handler: type[_Hostile], tls: tuple[ssl.SSLContext, str], timeout: float = 30,
                   answer_timeout: float = 10.0) -> WinrmFailure:
    context, ca_file = tls
    server: ThreadingHTTPServer
    with serving_http(handler, context) as server:
        endpoint = WinrmEndpoint("winhost.test", ("127.0.0.1",), server.server_address[1], ssl=True, ca_file=ca_file)
        try:
            with pytest.raises(WinrmFailure) as caught:
                await within(run_powershell(endpoint, BASIC, "x", timeout_seconds=timeout, max_output_bytes=100,
                                            answer_timeout_seconds=answer_timeout), "the call")
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


async def test_a_host_that_stops_mid_answer_times_out_at_the_answer_timeout(
        tls_for_winhost: tuple[ssl.SSLContext, str]) -> None:
    failure = await _against(_Stall, tls_for_winhost, timeout=FAR_DEADLINE, answer_timeout=0.5)
    assert failure.code == "TIMEOUT"
    assert "stopped answering (nothing for 0.5 s)" in failure.message


@pytest.mark.parametrize("tls", [True, False], ids=["tls", "http"])
async def test_a_silent_host_is_given_up_on_at_the_answer_timeout_not_the_deadline(tls: bool) -> None:
    with FakeWinrm(tls=tls, authentication="basic" if tls else "ntlm", username="alice", password=PASSWORD,
                   domain="" if tls else "CORP", mode="silent") as fake:
        endpoint = WinrmEndpoint(fake.hostname, ("127.0.0.1",), fake.port, ssl=tls, ca_file=fake.ca_file)
        with pytest.raises(WinrmFailure) as caught:
            await within(run_powershell(endpoint, BASIC if tls else NTLM, "x", timeout_seconds=FAR_DEADLINE,
                                        max_output_bytes=100, answer_timeout_seconds=0.5), "the call")
        assert fake.connections >= 1
    assert caught.value.code == "CONNECTION_FAILED"
    assert "did not answer within 0.5 s" in caught.value.message


FORGED = "FORGED-BY-MITM.txt"


@pytest.mark.parametrize(("mode", "told"), [("clear_replies", "answered an encrypted request in clear"),
                                            ("tampered_replies", "sent an encrypted answer that does not unwrap")])
async def test_ntlm_over_http_believes_only_replies_the_host_sealed(mode: str, told: str) -> None:
    # The fake plays the path: it still demands encrypted requests, then answers them its way; had the client
    # believed it, the forged output would be the call's result.
    with FakeWinrm(tls=False, authentication="ntlm", username="alice", password=PASSWORD, domain="CORP",
                   mode=mode, responder=lambda script: (FORGED, "", 0)) as fake:  # type: ignore[arg-type]
        endpoint = WinrmEndpoint(fake.hostname, ("127.0.0.1",), fake.port, ssl=False)
        with pytest.raises(WinrmFailure) as caught:
            await within(run_powershell(endpoint, NTLM, "x", timeout_seconds=30, max_output_bytes=100), "the call")
    assert caught.value.code == "PROTOCOL_ERROR"
    assert told in caught.value.message
    assert FORGED not in caught.value.message
    soap = [request for request in fake.requests if request.action]
    assert [request.action for request in soap] == ["Create"]  # nothing more after the first reply refused
    assert all(request.encrypted for request in soap)


def _reply(content_type: str | None, body: bytes, status: int = 200) -> requests.Response:
    response = requests.Response()
    response.status_code = status
    if content_type is not None:
        response.headers["Content-Type"] = content_type
    response._content = body
    response.request = requests.Request("POST", "http://winhost.test:5985/wsman").prepare()
    return response


SOAP = b"<s:Envelope><s:Body>forged</s:Body></s:Envelope>"


@pytest.mark.parametrize("content_type", [
    None,
    "application/soap+xml;charset=UTF-8",
    # pywinrm decrypts only on the exact quoted protocol and passes anything else through as it came.
    "multipart/encrypted;protocol=application/HTTP-SPNEGO-session-encrypted",
    'multipart/encrypted;protocol="application/http-spnego-session-encrypted"',
    'multipart/encrypted;protocol="application/HTTP-CredSSP-session-encrypted"',
    'text/xml;protocol="application/HTTP-SPNEGO-session-encrypted"',
])
def test_a_reply_not_marked_as_sealed_is_refused_whatever_it_claims(content_type: str | None) -> None:
    encryption = SealedRepliesEncryption(requests.Session(), "ntlm")
    with pytest.raises(UnsealedReply, match="in clear"):
        encryption.parse_encrypted_response(_reply(content_type, SOAP, status=500))


def test_a_reply_marked_as_sealed_must_unwrap_to_a_message() -> None:
    encryption = SealedRepliesEncryption(requests.Session(), "ntlm")
    sealed_type = ('multipart/encrypted;protocol="application/HTTP-SPNEGO-session-encrypted";'
                   'boundary="Encrypted Boundary"')
    with pytest.raises(UnsealedReply, match="no encrypted part"):
        encryption.parse_encrypted_response(_reply(sealed_type, b""))
    with pytest.raises(UnsealedReply, match="does not unwrap"):
        encryption.parse_encrypted_response(_reply(sealed_type, SOAP))


def test_a_hostile_content_type_is_shown_short_and_printable() -> None:
    encryption = SealedRepliesEncryption(requests.Session(), "ntlm")
    with pytest.raises(UnsealedReply) as caught:
        encryption.parse_encrypted_response(_reply("text/html\x1b[31m\u009b" + "A" * 5000, SOAP))
    message = str(caught.value)
    assert len(message) < 200
    assert all(0x20 <= ord(character) < 0x7f for character in message)
