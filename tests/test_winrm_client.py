"""The WinRM client against a real WS-Management endpoint on 127.0.0.1 (helpers.winrm_fake): what pywinrm sends
(auth, Host, SNI, encryption, the encoded script), what comes back, and how each failure is told."""

from __future__ import annotations

import base64
import importlib.metadata
import inspect
import logging
import socket
import threading
from pathlib import Path

import pytest
import requests
import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from winrm.encryption import Encryption
from winrm.protocol import Protocol
from winrm.transport import Transport

from toolhost_server.windows import clixml
from toolhost_server.windows.pinned_session import PinnedSession
from toolhost_server.windows.winrm_client import (
    ANSWER_TIMEOUT_SECONDS,
    PowershellOutput,
    WinrmEndpoint,
    WinrmFailure,
    WinrmLogin,
    encoded_command,
    run_powershell,
)

from helpers.certificates import CertificateAuthority
from helpers.waiting import within
from helpers.winrm_fake import FakeWinrm

PASSWORD = "canary-Pa55w0rd-7f3e"
SCRIPT = "Get-ChildItem -LiteralPath 'C:\\it''s; $(evil) `n'\n'ünïcødé ✓'"
# A short deadline for the calls that must give up: the test shows they return, not how fast.
SHORT_TIMEOUT = 2.0


def _endpoint(fake: FakeWinrm, *, addresses: tuple[str, ...] = ("127.0.0.1",),
              ca_file: str | None = "") -> WinrmEndpoint:
    return WinrmEndpoint(fake.hostname, addresses, fake.port, ssl=fake.tls,
                         ca_file=fake.ca_file if ca_file == "" else ca_file)


async def _run(fake: FakeWinrm, login: WinrmLogin, *, script: str = SCRIPT, timeout: float = 30.0,
               max_output_bytes: int = 1 << 20, answer_timeout: float = ANSWER_TIMEOUT_SECONDS,
               **endpoint: object) -> PowershellOutput:
    return await within(run_powershell(_endpoint(fake, **endpoint), login, script,  # type: ignore[arg-type]
                                       timeout_seconds=timeout, max_output_bytes=max_output_bytes,
                                       answer_timeout_seconds=answer_timeout),
                        "run_powershell")


async def _failure(fake: FakeWinrm, login: WinrmLogin, **kwargs: object) -> WinrmFailure:
    with pytest.raises(WinrmFailure) as caught:
        await _run(fake, login, **kwargs)  # type: ignore[arg-type]
    assert PASSWORD not in caught.value.message
    return caught.value


BASIC = WinrmLogin("basic", "alice", PASSWORD)
NTLM = WinrmLogin("ntlm", "CORP\\alice", PASSWORD)


def _basic_fake(**kwargs: object) -> FakeWinrm:
    return FakeWinrm(tls=True, authentication="basic", username="alice", password=PASSWORD, **kwargs)  # type: ignore[arg-type]


def _ntlm_fake(**kwargs: object) -> FakeWinrm:
    return FakeWinrm(tls=False, authentication="ntlm", username="alice", password=PASSWORD, domain="CORP",
                     **kwargs)  # type: ignore[arg-type]


async def test_basic_over_tls_names_the_host_and_connects_to_the_checked_address() -> None:
    with _basic_fake(responder=lambda script: ("listed ✓", "", 0)) as fake:
        output = await _run(fake, BASIC)
    assert output == PowershellOutput(stdout="listed ✓", errors="", exit_code=0, truncated=False)
    assert fake.actions() == ["Create", "Command", "Receive", "Signal", "Delete"]
    basic = "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    for request in fake.requests:
        # winhost.test resolves nowhere: the TCP connection went to 127.0.0.1 while every name stayed the host's.
        assert request.sni == "winhost.test"
        assert request.headers["Host"] == f"winhost.test:{fake.port}"
        assert request.headers["Authorization"] == basic
        assert (request.method, request.path) == ("POST", "/wsman")
    command_line = f"powershell.exe -NoProfile -NonInteractive -EncodedCommand {encoded_command(SCRIPT)}"
    assert fake.command_lines == [command_line]
    assert fake.scripts == [SCRIPT]
    create = fake.requests[0].body
    assert '<w:Option Name="WINRS_CODEPAGE">65001</w:Option>' in create
    assert '<w:Option Name="WINRS_NOPROFILE">TRUE</w:Option>' in create


async def test_ntlm_over_http_encrypts_every_message_and_never_sends_the_password() -> None:
    with _ntlm_fake(responder=lambda script: ("C:\\ ✓", "", 0)) as fake:
        output = await _run(fake, NTLM)
    assert output.stdout == "C:\\ ✓"
    assert fake.scripts == [SCRIPT]
    assert fake.actions() == ["Create", "Command", "Receive", "Signal", "Delete"]
    soap = [request for request in fake.requests if request.action]
    assert soap and all(request.encrypted for request in soap)
    for request in fake.requests:
        wire = request.raw_body + repr(request.headers).encode()
        assert b"Envelope" not in wire and b"powershell" not in wire
        assert PASSWORD.encode() not in wire and PASSWORD.encode("utf-16-le") not in wire
        assert request.headers["Host"] == f"winhost.test:{fake.port}"


async def test_basic_over_http_is_refused_before_any_connection() -> None:
    with FakeWinrm(tls=False, authentication="basic", username="alice", password=PASSWORD) as fake:
        failure = await _failure(fake, BASIC)
    assert failure.code == "INSECURE_TRANSPORT"
    assert "SSL" in failure.message
    assert fake.connections == 0


async def test_a_certificate_from_another_ca_is_a_tls_error_and_no_password_is_sent(tmp_path: Path) -> None:
    other = CertificateAuthority(tmp_path / "other", "other-ca")
    with _basic_fake() as fake:
        failure = await _failure(fake, BASIC, ca_file=str(other.certificate))
        without_ca_file = await _failure(fake, BASIC, ca_file=None)  # the system's trust knows no test CA
    assert failure.code == without_ca_file.code == "TLS_ERROR"
    assert "CERTIFICATE_VERIFY_FAILED" in failure.message
    assert fake.requests == []


async def test_an_unreadable_ca_file_is_a_tls_error(tmp_path: Path) -> None:
    with _basic_fake() as fake:
        failure = await _failure(fake, BASIC, ca_file=str(tmp_path / "missing.pem"))
    assert failure.code == "TLS_ERROR"
    assert "missing.pem" in failure.message
    assert fake.connections == 0


@pytest.mark.parametrize("authentication", ["basic", "ntlm"])
async def test_a_wrong_password_is_an_authentication_failure(authentication: str) -> None:
    fake = _basic_fake() if authentication == "basic" else _ntlm_fake()
    login = WinrmLogin(BASIC.authentication if authentication == "basic" else "ntlm",
                       BASIC.username if authentication == "basic" else NTLM.username, "not-the-password")
    with fake:
        failure = await _failure(fake, login)
    assert failure.code == "AUTHENTICATION_FAILED"
    assert login.username in failure.message
    assert fake.scripts == []


async def test_operation_timeouts_are_retried_only_until_the_deadline() -> None:
    with _basic_fake(mode="operation_timeout") as fake:
        failure = await _failure(fake, BASIC, timeout=4.0)
        actions = fake.actions()
    assert failure.code == "TIMEOUT"
    assert actions.count("Receive") >= 1
    # The command is stopped and its shell deleted, within the time kept for that.
    assert actions[-2:] == ["Signal", "Delete"]


@pytest.mark.parametrize("make_fake", [_basic_fake, _ntlm_fake], ids=["tls", "http"])
async def test_a_host_that_never_answers_fails_within_the_deadline(make_fake: type[FakeWinrm]) -> None:
    with make_fake(mode="silent") as fake:
        failure = await _failure(fake, BASIC if fake.tls else NTLM, timeout=SHORT_TIMEOUT)
        assert fake.connections >= 1
    assert failure.code == "CONNECTION_FAILED"
    assert "did not answer" in failure.message
    # The abandoned worker is a daemon thread: it cannot keep a stopping server alive.
    workers = [thread for thread in threading.enumerate() if thread.name == "winrm winhost.test"]
    assert all(thread.daemon for thread in workers)


@pytest.mark.parametrize("make_fake", [_basic_fake, _ntlm_fake], ids=["tls", "http"])
async def test_a_receive_the_host_holds_for_the_operation_timeout_is_waited_for(make_fake: type[FakeWinrm]) -> None:
    # A 12 s call asks for a 3 s OperationTimeout: the host holds the first Receive that long, twice the answer
    # timeout, as a Windows host does while the command has no output yet. That is no silence to give up on.
    with make_fake(mode="held_receive", responder=lambda script: ("late but there", "", 0)) as fake:
        output = await _run(fake, BASIC if fake.tls else NTLM, timeout=12.0, answer_timeout=1.5)
        held = next(request.body for request in fake.requests if request.action == "Receive")
    assert output.stdout == "late but there"
    assert "<w:OperationTimeout>PT3S</w:OperationTimeout>" in held
    assert fake.actions() == ["Create", "Command", "Receive", "Receive", "Signal", "Delete"]


async def test_a_closed_port_is_a_connection_failure() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = WinrmEndpoint("winhost.test", ("127.0.0.1",), port, ssl=False)
    with pytest.raises(WinrmFailure) as caught:
        await within(run_powershell(endpoint, NTLM, SCRIPT, timeout_seconds=30, max_output_bytes=100), "the call")
    assert caught.value.code == "CONNECTION_FAILED"
    assert f"winhost.test port {port} at 127.0.0.1" in caught.value.message


async def test_the_next_address_is_tried_when_the_first_refuses() -> None:
    # The fake listens on 127.0.0.1 only: 127.0.0.2 (loopback too) refuses its port.
    with _basic_fake(responder=lambda script: ("second", "", 0)) as fake:
        output = await _run(fake, BASIC, addresses=("127.0.0.2", "127.0.0.1"))
    assert output.stdout == "second"
    assert {request.sni for request in fake.requests} == {"winhost.test"}


CLIXML_STDERR = (
    "#< CLIXML\r\n"
    '<Objs Version="1.1.0.1" xmlns="http://schemas.microsoft.com/powershell/2004/04">'
    '<Obj S="progress" RefId="0"><TN RefId="0"><T>System.Management.Automation.PSCustomObject</T>'
    '<T>System.Object</T></TN><MS><I64 N="SourceId">1</I64><PR N="Record"><AV>Preparing modules for first use.</AV>'
    '<AI>0</AI><Nil /><PI>-1</PI><PC>-1</PC><T>Completed</T><SR>-1</SR><SD> </SD></PR></MS></Obj>'
    "<S S=\"Error\">Get-ChildItem : Cannot find path 'C:\\nope' because it does not exist._x000D__x000A_</S>"
    '<S S="Error">    + FullyQualifiedErrorId : PathNotFound_x000D__x000A_</S>'
    '<S S="warning">disk almost full</S>'
    "</Objs>"
)


async def test_clixml_errors_are_kept_as_text_and_progress_is_dropped() -> None:
    with _basic_fake(responder=lambda script: ("", CLIXML_STDERR, 1)) as fake:
        output = await _run(fake, BASIC)
    assert output.exit_code == 1
    assert output.errors == ("Get-ChildItem : Cannot find path 'C:\\nope' because it does not exist.\r\n"
                             "    + FullyQualifiedErrorId : PathNotFound\r\n"
                             "WARNING: disk almost full")
    assert "Preparing modules" not in output.errors


def test_clixml_decoding() -> None:
    plain = 'plain text, kept <S S="Error">as is</S>'
    assert clixml.stderr_text(plain) == plain
    # A UTF-16 surrogate pair written as two escapes is one character; _x005F_ is an underscore.
    escaped = '#< CLIXML\r\n<Objs><S S="Error">_xD83D__xDE00_ a_x005F_b &lt;tag&gt;</S></Objs>'
    assert clixml.stderr_text(escaped) == "\U0001f600 a_b <tag>"
    # Cut short by the output cap: the strings that arrived whole are still found.
    truncated = CLIXML_STDERR[: CLIXML_STDERR.index("<S S=\"warning\">") + 10]
    assert clixml.stderr_text(truncated).startswith("Get-ChildItem : Cannot find path")
    # Entity declarations never reach a parser (no expansion); strings are still found.
    bomb = ('#< CLIXML\r\n<Objs><!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;">]>'
            '<S S="Error">&b;&b;</S></Objs>')
    assert clixml.stderr_text(bomb) == "&b;&b;"


async def test_output_past_the_cap_is_truncated_and_the_command_stopped() -> None:
    big = "é" * 200_000  # 400,000 bytes of UTF-8, over several Receives
    with _basic_fake(responder=lambda script: (big, "", 0)) as fake:
        output = await _run(fake, BASIC, max_output_bytes=100_001)
    assert output.truncated
    assert output.exit_code == -1
    # The cap fell inside a two-byte character: 50,000 whole ones and a replacement character.
    assert output.stdout == "é" * 50_000 + "\ufffd"
    assert fake.actions()[-2:] == ["Signal", "Delete"]


async def test_output_at_the_cap_is_whole() -> None:
    with _basic_fake(responder=lambda script: ("x" * 1000, "", 0)) as fake:
        output = await _run(fake, BASIC, max_output_bytes=1000)
    assert output == PowershellOutput(stdout="x" * 1000, errors="", exit_code=0, truncated=False)


async def test_the_password_is_in_no_log_record_even_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with _basic_fake() as fake:
        await _run(fake, BASIC)
    with _ntlm_fake() as fake:
        await _run(fake, NTLM)
    with _basic_fake() as fake:
        await _failure(fake, WinrmLogin("basic", "alice", PASSWORD + "-wrong"))
    text = caplog.text
    assert "/wsman" in text  # urllib3 did log its requests
    assert PASSWORD not in text
    assert base64.b64encode(f"alice:{PASSWORD}".encode()).decode() not in text
    assert "NTLM step" not in text  # pyspnego's tokens: an AUTHENTICATE token can be cracked for the password


def test_the_password_is_not_in_the_login_repr() -> None:
    assert PASSWORD not in repr(BASIC)


async def test_arguments_are_checked_before_any_connection() -> None:
    with _basic_fake() as fake:
        for bad in (WinrmEndpoint("evil@winhost.test", ("127.0.0.1",), fake.port, ssl=True),
                    WinrmEndpoint("winhost.test/x", ("127.0.0.1",), fake.port, ssl=True),
                    WinrmEndpoint("winhost.test", (), fake.port, ssl=True),
                    WinrmEndpoint("winhost.test", ("127.0.0.1",), 0, ssl=True)):
            with pytest.raises(ValueError):
                await run_powershell(bad, BASIC, SCRIPT, timeout_seconds=5, max_output_bytes=10)
    assert fake.connections == 0


def test_the_library_internals_this_client_relies_on_are_still_there() -> None:
    """pywinrm and urllib3 internals: if this fails after an upgrade, re-check pinned_session.py and
    winrm_client.py against the new versions before moving the pins in pyproject.toml."""
    assert importlib.metadata.version("pywinrm").startswith("0.5."), "pywinrm moved: re-check winrm_client.py"
    assert urllib3.__version__.startswith("2."), "urllib3 moved: re-check pinned_session.py"
    transport = Protocol("https://winhost.test:5986/wsman", transport="ssl", username="u", password="p",
                         ca_trust_path=None, proxy=None).transport  # type: ignore[arg-type]
    assert isinstance(transport, Transport)
    assert transport.session is None  # build_session returns a session already set, as we set ours
    assert "Content-Type" in transport.default_headers
    assert callable(transport.setup_encryption) and callable(transport.build_session)
    assert "close_session" in inspect.signature(Protocol.close_shell).parameters
    assert {"codepage", "noprofile"} <= set(inspect.signature(Protocol.open_shell).parameters)
    assert callable(Protocol.get_command_output_raw)
    # sealed_replies.py: the parent decides by this text whether a reply is decrypted or passed through.
    assert Encryption(requests.Session(), "ntlm").protocol_string == b"application/HTTP-SPNEGO-session-encrypted"
    assert "response" in inspect.signature(Encryption.parse_encrypted_response).parameters
    assert "encryption" in vars(transport)
    for connection in (HTTPConnection, HTTPSConnection):
        assert callable(connection._new_conn)
        assert "sock" in vars(connection("winhost.test"))
    response = requests.Response()
    assert response._content is False and response._content_consumed is False
    assert hasattr(urllib3.PoolManager(), "pool_classes_by_scheme")


def test_a_pinned_session_takes_nothing_from_the_environment() -> None:
    import ssl
    import time

    session = PinnedSession(("127.0.0.1",), tls_context=ssl.create_default_context(), deadline=time.monotonic() + 5)
    assert session.trust_env is False
    assert session.proxies == {}
    assert session.max_redirects == 0
