"""Running one PowerShell script on a Windows host over WinRM (pywinrm), bounded in time and output.

    endpoint = WinrmEndpoint("ws1.corp.example", ("10.20.0.7",), 5985, ssl=False)
    login = WinrmLogin("ntlm", "CORP\\\\svc-inventory", password)
    output = await run_powershell(endpoint, login, script, timeout_seconds=30, max_output_bytes=1 << 20)

What it refuses, before any connection (INSECURE_TRANSPORT): basic auth without TLS. NTLM over plain HTTP goes
only with message encryption; a certificate is always verified (the endpoint's CA file, else the system's
trust); nothing comes from the environment (proxies, CA bundle variables, .netrc). The TCP connections go to the
endpoint's addresses, checked by the caller against the egress policy, while the name stays the hostname's
(windows/pinned_session.py). With message encryption, every reply must be encrypted too and unwrap
(windows/sealed_replies.py): a reply in clear could come from anyone on the path.

A host must connect and start each answer within `answer_timeout_seconds` (a Receive: within the OperationTimeout
it may hold the request for, plus that), so a host that accepts TCP and says nothing fails CONNECTION_FAILED
long before the call's deadline.

The script runs as `powershell.exe -NoProfile -NonInteractive -EncodedCommand <base64 of UTF-16LE>` in a shell
opened with codepage 65001 (UTF-8) and no profile. pywinrm's own output loop retries the OperationTimeout fault
forever, so the Receive loop is ours, bounded by the deadline; and since one read can still drip past it, the
whole call runs in a daemon thread that is abandoned on the deadline, its sockets shut down.

Every failure is a WinrmFailure with a code and a message that says what to do; no message carries the password
or more than a few hundred characters of what the host sent.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ipaddress
import logging
import re
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

import requests
import winrm.exceptions
from requests.auth import HTTPBasicAuth
from requests_ntlm import HttpNtlmAuth
from winrm.protocol import Protocol

from ..daemon_threads import run_in_daemon_thread
from . import clixml
from .pinned_session import AnswerTimedOut, DeadlineReached, PinnedSession, ResponseTooLarge
from .sealed_replies import SealedRepliesEncryption, UnsealedReply

WinrmFailureCode = Literal["CONNECTION_FAILED", "TLS_ERROR", "AUTHENTICATION_FAILED", "PROTOCOL_ERROR", "TIMEOUT",
                           "INSECURE_TRANSPORT"]

# How long the host may hold one Receive before answering "no output yet" (WS-Man OperationTimeout), at most.
MAX_OPERATION_TIMEOUT_SECONDS: Final = 5
# How long a host may take to connect and to start answering a request, beyond the OperationTimeout for a Receive.
# A Windows host answers Create, Command, Signal and Delete within a second or two even when busy (a Receive with
# no output yet is held for the OperationTimeout, then answered with a fault), and the NTLM challenge at once;
# 10 s leaves a loaded host room while a silent one costs a fraction of a tool's timeout.
ANSWER_TIMEOUT_SECONDS: Final = 10.0
# The time kept at the end of a call for telling the host to stop the command and delete the shell.
CLEANUP_SECONDS: Final = 2.0
# The longest piece of a host's own words (a fault's reason) that a message quotes.
_QUOTED_CHARS: Final = 300
_HOSTNAME: Final = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?\.?$")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]+")
_SSL_REASON: Final = re.compile(r"\[SSL: [A-Z_]+\][^(')\"]*")

# pyspnego logs every NTLM token at DEBUG; an AUTHENTICATE token can be cracked offline for the password.
logging.getLogger("spnego").setLevel(max(logging.INFO, logging.getLogger("spnego").level))


@dataclass(frozen=True)
class WinrmEndpoint:
    """Where to connect: `addresses` (egress-checked, tried in order, never resolved again) under `hostname`."""

    hostname: str
    addresses: tuple[str, ...]
    port: int
    ssl: bool
    ca_file: str | None = None  # a PEM file of the CAs to trust; None: the system's trust store


@dataclass(frozen=True)
class WinrmLogin:
    """Who to log in as: "DOMAIN\\\\user" when a domain applies."""

    authentication: Literal["ntlm", "basic"]
    username: str
    password: str = field(repr=False)


@dataclass(frozen=True)
class PowershellOutput:
    """What the script wrote: `errors` is stderr as text (CLIXML error records decoded, progress dropped).

    `exit_code` is -1 when the output passed max_output_bytes and the command was stopped before it ended.
    """

    stdout: str
    errors: str
    exit_code: int
    truncated: bool


class WinrmFailure(Exception):
    """The script could not be run, or its result not received: `code` says which way, `message` what to do."""

    def __init__(self, code: WinrmFailureCode, message: str) -> None:
        super().__init__(message)
        self.code: WinrmFailureCode = code
        self.message = message


async def run_powershell(endpoint: WinrmEndpoint, login: WinrmLogin, script: str, *, timeout_seconds: float,
                         max_output_bytes: int,
                         answer_timeout_seconds: float = ANSWER_TIMEOUT_SECONDS) -> PowershellOutput:
    """Run `script` on the endpoint; returns within `timeout_seconds`, or raises WinrmFailure.

    A host that does not connect or start an answer within `answer_timeout_seconds` fails the call then.
    """
    _check_arguments(endpoint, timeout_seconds, max_output_bytes)
    if not answer_timeout_seconds > 0:
        raise ValueError("answer_timeout_seconds must be positive")
    _refuse_insecure_transport(endpoint, login)
    call = _WinrmCall(endpoint, login, script, time.monotonic() + timeout_seconds, max_output_bytes,
                      answer_timeout_seconds)
    finished = False
    try:
        async with asyncio.timeout(timeout_seconds) as scope:
            output = await run_in_daemon_thread(call.run, name=f"winrm {endpoint.hostname}")
        finished = True
        return output
    except TimeoutError:
        if not scope.expired():
            raise
        raise call.deadline_failure() from None
    except WinrmFailure:
        finished = True
        raise
    finally:
        if not finished:  # the deadline, or the caller gave up: the thread runs on, its sockets are shut
            call.abort()


def encoded_command(script: str) -> str:
    """The -EncodedCommand argument for `script`: base64 of its UTF-16LE bytes."""
    return base64.b64encode(script.encode("utf-16-le")).decode("ascii")


def _check_arguments(endpoint: WinrmEndpoint, timeout_seconds: float, max_output_bytes: int) -> None:
    if not _HOSTNAME.match(endpoint.hostname) and not _is_ip_literal(endpoint.hostname):
        raise ValueError(f"{endpoint.hostname!r} is not a host name: use letters, digits, '-', '_' and dots")
    if not endpoint.addresses:
        raise ValueError("a WinRM endpoint needs the addresses to connect to, checked against the egress policy")
    if not 0 < endpoint.port < 65536:
        raise ValueError(f"WinRM port {endpoint.port} is not a TCP port (1-65535)")
    if not timeout_seconds > 0:
        raise ValueError("timeout_seconds must be positive")
    if max_output_bytes < 1:
        raise ValueError("max_output_bytes must be positive")


def _refuse_insecure_transport(endpoint: WinrmEndpoint, login: WinrmLogin) -> None:
    if login.authentication == "basic" and not endpoint.ssl:
        raise WinrmFailure("INSECURE_TRANSPORT",
                           f"basic authentication to {endpoint.hostname} would send the password in clear over HTTP: "
                           "set the asset's WinRM profile to SSL (HTTPS, port 5986) or use an NTLM credential")
    if login.authentication not in ("basic", "ntlm"):
        raise WinrmFailure("INSECURE_TRANSPORT", f"WinRM authentication {login.authentication!r} is not supported: "
                                                 "use ntlm, or basic over HTTPS")


def _is_ip_literal(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


class _WinrmCall:
    """One run of a script, in a worker thread; `abort()` from the event loop abandons it."""

    def __init__(self, endpoint: WinrmEndpoint, login: WinrmLogin, script: str, deadline: float,
                 max_output_bytes: int, answer_timeout: float) -> None:
        self.endpoint = endpoint
        self.login = login
        self.script = script
        self.deadline = deadline
        self.max_output_bytes = max_output_bytes
        self.answer_timeout = answer_timeout
        self.operation_timeout = MAX_OPERATION_TIMEOUT_SECONDS
        self.session: PinnedSession | None = None
        self.answered = False  # whether the host answered any request: silence is CONNECTION_FAILED, not TIMEOUT
        self._aborted = False

    def abort(self) -> None:
        self._aborted = True
        if self.session is not None:
            self.session.abort()

    def deadline_failure(self) -> WinrmFailure:
        where = f"{self.endpoint.hostname} port {self.endpoint.port}"
        if not self.answered:
            return WinrmFailure("CONNECTION_FAILED", f"the WinRM host {where} did not answer in time: check that it "
                                                     "is up, that WinRM listens on that port, and the firewall")
        return WinrmFailure("TIMEOUT", f"the WinRM call to {where} did not finish in time: the command may need "
                                       "longer (raise the tool's timeout, or ask for less), or the host is slow")

    def run(self) -> PowershellOutput:
        try:
            protocol = self._protocol()
            shell_id = protocol.open_shell(codepage=65001, noprofile=True)
            try:
                command_id = protocol.run_command(shell_id, "powershell.exe", [
                    "-NoProfile", "-NonInteractive", "-EncodedCommand", encoded_command(self.script)])
                try:
                    return self._receive(protocol, shell_id, command_id)
                finally:
                    self._best_effort(lambda: protocol.cleanup_command(shell_id, command_id))
            finally:
                self._best_effort(lambda: protocol.close_shell(shell_id, close_session=False))
        except WinrmFailure:
            raise
        except Exception as error:  # anything a hostile or broken host provokes, translated in one place
            raise self._translate(error) from None
        finally:
            if self.session is not None:
                self.session.close()

    def _protocol(self) -> Protocol:
        endpoint, login = self.endpoint, self.login
        encrypt = login.authentication == "ntlm" and not endpoint.ssl
        remaining = max(1.0, self.deadline - time.monotonic())
        self.operation_timeout = max(1, min(MAX_OPERATION_TIMEOUT_SECONDS, int(remaining / 3)))
        host = f"[{endpoint.hostname}]" if ":" in endpoint.hostname else endpoint.hostname
        protocol = Protocol(
            f"{'https' if endpoint.ssl else 'http'}://{host}:{endpoint.port}/wsman",
            transport="ntlm" if login.authentication == "ntlm" else "ssl",
            username=login.username, password=login.password,
            ca_trust_path=endpoint.ca_file or None,  # type: ignore[arg-type]  # None: no environment CA bundle
            server_cert_validation="validate", proxy=None,
            message_encryption="always" if encrypt else "auto",
            # pywinrm wants its read timeout above the OperationTimeout; the session's answer_timeout replaces it.
            operation_timeout_sec=self.operation_timeout, read_timeout_sec=self.operation_timeout + 1)
        try:
            tls_context = ssl.create_default_context(cafile=endpoint.ca_file)
        except (OSError, ssl.SSLError) as error:
            raise WinrmFailure("TLS_ERROR", f"the CA file {endpoint.ca_file!r} could not be loaded ({error}): point "
                                            "the setting at a readable PEM file of CA certificates") from None
        session = PinnedSession(endpoint.addresses, tls_context=tls_context, deadline=self.deadline,
                                answer_timeout=self.answer_timeout)
        session.hooks["response"].append(self._answer_arrived)
        self.session = session
        if self._aborted:
            session.abort()
        # pywinrm builds its own session from the environment unless it already has one; it never gets to.
        transport = protocol.transport
        session.headers.update(transport.default_headers)
        session.auth = (HttpNtlmAuth(login.username, login.password, send_cbt=True)
                        if login.authentication == "ntlm" else HTTPBasicAuth(login.username, login.password))
        transport.session = session
        transport.build_session = lambda: session  # type: ignore[method-assign]
        if encrypt:
            transport.setup_encryption(session)
            # pywinrm's own encryption would take a reply in clear as the host's words.
            transport.encryption = SealedRepliesEncryption(session, "ntlm")
        return protocol

    def _answer_arrived(self, response: requests.Response, *args: object, **kwargs: object) -> None:
        self.answered = True

    def _receive(self, protocol: Protocol, shell_id: str, command_id: str) -> PowershellOutput:
        stdout, stderr = bytearray(), bytearray()
        truncated = False
        exit_code = -1
        receive_until = self.deadline - min(CLEANUP_SECONDS, (self.deadline - time.monotonic()) / 4)
        session = self.session
        assert session is not None  # _protocol made it
        while True:
            if time.monotonic() >= receive_until:
                raise self.deadline_failure()
            try:
                # The host holds a Receive until there is output or the OperationTimeout passes, then answers.
                session.answer_timeout = self.operation_timeout + self.answer_timeout
                out, err, code, done = protocol.get_command_output_raw(shell_id, command_id)
            except winrm.exceptions.WinRMOperationTimeoutError:
                continue  # no output within OperationTimeout: ask again, while the deadline allows
            finally:
                session.answer_timeout = self.answer_timeout
            stdout += out
            stderr += err
            if len(stdout) > self.max_output_bytes or len(stderr) > self.max_output_bytes:
                truncated = True
                del stdout[self.max_output_bytes:]
                del stderr[self.max_output_bytes:]
            if done:
                exit_code = code
            if done or truncated:
                break
        return PowershellOutput(stdout=stdout.decode("utf-8", "replace"),
                                errors=clixml.stderr_text(stderr.decode("utf-8", "replace")),
                                exit_code=exit_code, truncated=truncated)

    def _best_effort(self, request: Callable[[], None]) -> None:
        """Tell the host to stop or clean up, within a short budget; failing that, the host times it out."""
        if self._aborted or self.session is None:
            return
        self.session.limit_deadline(time.monotonic() + CLEANUP_SECONDS)
        # Any failure: the result is already decided, and the host reaps its shells on its own (IdleTimeout).
        with contextlib.suppress(Exception):
            request()

    def _translate(self, error: Exception) -> WinrmFailure:
        where = f"{self.endpoint.hostname} port {self.endpoint.port}"
        if isinstance(error, winrm.exceptions.InvalidCredentialsError):
            user = _quote(self.login.username)
            return WinrmFailure("AUTHENTICATION_FAILED",
                                f"the WinRM host {where} refused the login of user {user}: check the credential's "
                                "user name, domain and password, and that the account may use WinRM")
        if isinstance(error, requests.exceptions.SSLError):
            found = _SSL_REASON.search(str(error))
            reason = _quote(found.group(0).strip()) if found else "the handshake failed"
            return WinrmFailure("TLS_ERROR", f"TLS with {where} failed ({reason}): the host's certificate must name "
                                             "the host and be signed by a trusted CA (the asset's CA file, or the "
                                             "system's trust store)")
        if isinstance(error, AnswerTimedOut):
            if not self.answered:
                return WinrmFailure("CONNECTION_FAILED",
                                    f"the WinRM host {where} did not answer within {error.seconds:g} s: check that "
                                    "it is up, that WinRM listens on that port "
                                    f"({'HTTPS' if self.endpoint.ssl else 'HTTP'}), and the firewall")
            return WinrmFailure("TIMEOUT", f"the WinRM host {where} stopped answering (nothing for "
                                           f"{error.seconds:g} s): try again, or check the host's load")
        if isinstance(error, UnsealedReply):
            return WinrmFailure("PROTOCOL_ERROR",
                                f"the WinRM host {where} {_quote(str(error))}; nothing of that reply was used. Only "
                                "a reply the host encrypted counts: something on the network may be answering for "
                                "the host or altering its replies. Check the path to it, or use HTTPS (port 5986)")
        if isinstance(error, DeadlineReached | winrm.exceptions.WinRMOperationTimeoutError):
            return self.deadline_failure()
        if isinstance(error, requests.exceptions.Timeout):
            return self.deadline_failure() if not self.answered else WinrmFailure(
                "TIMEOUT", f"the WinRM host {where} stopped answering: try again, or check the host's load")
        if isinstance(error, requests.exceptions.ConnectionError):
            if self._aborted:
                return self.deadline_failure()
            return WinrmFailure("CONNECTION_FAILED",
                                f"could not connect to the WinRM host {where} at {', '.join(self.endpoint.addresses)}:"
                                " check that the host is up, that WinRM listens on that port "
                                f"({'HTTPS' if self.endpoint.ssl else 'HTTP'}), and the firewall")
        if isinstance(error, ResponseTooLarge):
            return WinrmFailure("PROTOCOL_ERROR", f"the WinRM host {where} sent an answer larger than WinRM allows: "
                                                  "check that the port is a WinRM listener")
        if isinstance(error, requests.exceptions.TooManyRedirects):
            return WinrmFailure("PROTOCOL_ERROR", f"the WinRM host {where} answered with a redirect, which WinRM never "
                                                  "does and which is not followed: check the asset's port and SSL")
        if isinstance(error, winrm.exceptions.WSManFaultError):
            code = f" (WS-Man fault {error.wsman_fault_code})" if error.wsman_fault_code is not None else ""
            return WinrmFailure("PROTOCOL_ERROR", f"the WinRM host {where} refused the request: "
                                                  f"{_quote(error.reason)}{code}")
        if isinstance(error, winrm.exceptions.WinRMTransportError):
            return WinrmFailure("PROTOCOL_ERROR", f"the WinRM host {where} answered HTTP {error.code}: check that "
                                                  "the port is a WinRM listener and the account may use it")
        # What is left: a reply that does not parse (ParseError), lacks an element pywinrm looks for
        # (StopIteration), or relates to another message (AssertionError); a host that is not WinRM, or hostile.
        return WinrmFailure("PROTOCOL_ERROR", f"the answer of {where} is not WinRM as expected "
                                              f"({type(error).__name__}): check that the port is a WinRM listener")


def _quote(text: str | None) -> str:
    """A host's words, safe to show: control characters collapsed, at most _QUOTED_CHARS characters."""
    flat = _CONTROL.sub(" ", text or "").strip()
    return flat if len(flat) <= _QUOTED_CHARS else flat[:_QUOTED_CHARS] + "…"

