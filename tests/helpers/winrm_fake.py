"""A WS-Management endpoint on 127.0.0.1 that answers pywinrm as a Windows host would, for the WinRM tests.

Enough of the WinRM shell protocol for pywinrm's Create, Command, Receive, Signal and Delete; basic auth (over TLS
with a throwaway CA, or over plain HTTP so that a test can show the client refuses it) or NTLM with MS-WSMV message
encryption (pyspnego's acceptor). It keeps what it received, decrypted, and the PowerShell scripts it was asked to
run, decoded from -EncodedCommand:

    with FakeWinrm(tls=True, authentication="basic", username="alice", password="pw",
                   responder=lambda script: ("hello", "", 0)) as fake:
        endpoint = WinrmEndpoint(fake.hostname, ("127.0.0.1",), fake.port, ssl=True, ca_file=fake.ca_file)
        ... run_powershell(endpoint, ...) ...
        assert fake.scripts == [script]

`responder(script)` is the remote PowerShell: it returns (stdout, stderr, exit code). Modes: "normal";
"operation_timeout", where every Receive answers the WS-Man OperationTimeout fault (2150858793), which pywinrm
would retry forever; "held_receive", where the first Receive of a command is held for the OperationTimeout the
request names and then answered with that fault, as a Windows host does while a command has no output yet;
"silent", which accepts TCP connections and never answers. Two play an on-path attacker
against NTLM message encryption (the requests must still come encrypted): "clear_replies" answers them in clear,
"tampered_replies" answers them encrypted with one byte of the sealed message changed.

NTLM: pyspnego's acceptor reads its user file from the NTLM_USER_FILE environment variable, at every handshake.
The fake writes the file and sets the variable while it runs (entered to exited) and restores the previous value
afterwards, so nothing leaks into later tests; two NTLM fakes must not run at once.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import ssl
import struct
import tempfile
import threading
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import spnego
import spnego.exceptions

from helpers.certificates import CertificateAuthority

Responder = Callable[[str], tuple[str, str, int]]
Mode = Literal["normal", "operation_timeout", "held_receive", "silent", "clear_replies", "tampered_replies"]

HOSTNAME = "winhost.test"
OPERATION_TIMEOUT_FAULT = 2150858793
# What one Receive answer carries of each stream at most, so that large outputs take several Receives as on Windows.
RECEIVE_CHUNK_BYTES = 64 * 1024

_NS = {
    "s": "http://www.w3.org/2003/05/soap-envelope",
    "a": "http://schemas.xmlsoap.org/ws/2004/08/addressing",
    "rsp": "http://schemas.microsoft.com/wbem/wsman/1/windows/shell",
    "w": "http://schemas.dmtf.org/wbem/wsman/1/wsman.xsd",
}
_SHELL = "http://schemas.microsoft.com/wbem/wsman/1/windows/shell"
_ENVELOPE = (
    '<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope" '
    'xmlns:a="http://schemas.xmlsoap.org/ws/2004/08/addressing" '
    'xmlns:w="http://schemas.dmtf.org/wbem/wsman/1/wsman.xsd" '
    'xmlns:x="http://schemas.xmlsoap.org/ws/2004/09/transfer" '
    'xmlns:f="http://schemas.microsoft.com/wbem/wsman/1/wsmanfault" '
    f'xmlns:rsp="{_SHELL}"><s:Header><a:Action>{{action}}</a:Action><a:MessageID>uuid:{{message_id}}</a:MessageID>'
    "<a:RelatesTo>{relates_to}</a:RelatesTo></s:Header><s:Body>{body}</s:Body></s:Envelope>"
)
_TIMEOUT_FAULT = (
    "<s:Fault><s:Code><s:Value>s:Receiver</s:Value><s:Subcode><s:Value>w:TimedOut</s:Value></s:Subcode></s:Code>"
    '<s:Reason><s:Text xml:lang="en-US">The WS-Management service cannot complete the operation within the time'
    " specified in OperationTimeout.</s:Text></s:Reason><s:Detail>"
    f'<f:WSManFault Code="{OPERATION_TIMEOUT_FAULT}" Machine="{HOSTNAME}"><f:Message>timed out</f:Message>'
    "</f:WSManFault></s:Detail></s:Fault>"
)
_ENCRYPTED_PROTOCOL = b"application/HTTP-SPNEGO-session-encrypted"
_BOUNDARY = b"--Encrypted Boundary"
_ENCRYPTED_CONTENT_TYPE = f'multipart/encrypted;protocol="{_ENCRYPTED_PROTOCOL.decode()}";boundary="Encrypted Boundary"'
_OPERATION_TIMEOUT = re.compile(r"^PT(\d+(?:\.\d+)?)S$")
_ENCODED_COMMAND = re.compile(r"-EncodedCommand\s+([A-Za-z0-9+/=]+)", re.IGNORECASE)


def _no_output(script: str) -> tuple[str, str, int]:
    return "", "", 0


@dataclass(frozen=True)
class ReceivedRequest:
    """One HTTP request as the fake received it."""

    method: str
    path: str
    headers: dict[str, str]
    sni: str | None  # the TLS server name the client sent; None over plain HTTP
    connection: int  # which TCP connection (1, 2, ... in accepting order)
    raw_body: bytes  # as it came over the wire
    body: str  # the SOAP text: raw_body decrypted when it was encrypted
    encrypted: bool
    action: str  # the WS-Man action's last word (Create, Command, Receive, Signal, Delete), "" when no SOAP


@dataclass
class _Command:
    stdout: bytes
    stderr: bytes
    exit_code: int
    held: bool = False  # whether a Receive for it was held (mode "held_receive")


class FakeWinrm:
    """The endpoint; a context manager that serves on `port` from entry to exit."""

    hostname = HOSTNAME

    def __init__(self, *, tls: bool, authentication: Literal["basic", "ntlm"], username: str, password: str,
                 domain: str = "", responder: Responder = _no_output, mode: Mode = "normal") -> None:
        self.tls = tls
        self.authentication = authentication
        self.username = username
        self.password = password
        self.domain = domain
        self.responder = responder
        self.mode = mode
        self.port = 0
        self.ca_file: str | None = None
        self.requests: list[ReceivedRequest] = []
        self.scripts: list[str] = []
        self.command_lines: list[str] = []
        self.connections = 0
        self._changed = threading.Condition()
        self._stopping = threading.Event()
        self._sni: dict[int, str | None] = {}
        self._commands: dict[str, _Command] = {}
        self._directory: Path | None = None
        self._previous_user_file: str | None = None
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> FakeWinrm:
        self._directory = Path(tempfile.mkdtemp(prefix="winrm-fake-"))
        tls_context = self._tls_context(self._directory) if self.tls else None
        if self.authentication == "ntlm":
            user_file = self._directory / "ntlm-users"
            user_file.write_text(f"{self.domain}:{self.username}:{self.password}\n")
            self._previous_user_file = os.environ.get("NTLM_USER_FILE")
            os.environ["NTLM_USER_FILE"] = str(user_file)
        fake = self

        class Handler(_Handler):
            owner = fake

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        httpd.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
        if tls_context is not None:
            httpd.socket = tls_context.wrap_socket(httpd.socket, server_side=True, do_handshake_on_connect=False)
        self._httpd = httpd
        self.port = int(httpd.server_address[1])
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="winrm-fake", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)
        if self.authentication == "ntlm":
            if self._previous_user_file is None:
                os.environ.pop("NTLM_USER_FILE", None)
            else:
                os.environ["NTLM_USER_FILE"] = self._previous_user_file
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)

    def actions(self) -> list[str]:
        """The WS-Man actions received so far, in order (authentication-only requests left out)."""
        with self._changed:
            return [request.action for request in self.requests if request.action]

    def wait_for(self, condition: Callable[[FakeWinrm], bool], what: str, seconds: float = 60.0) -> None:
        """Block until `condition(self)` holds after some request arrived; an AssertionError naming `what` if it
        has not after `seconds` (a hang guard, not a speed requirement)."""
        with self._changed:
            if not self._changed.wait_for(lambda: condition(self), seconds):
                raise AssertionError(f"the WinRM fake: {what}: still waiting after {seconds:g} s")

    def _tls_context(self, directory: Path) -> ssl.SSLContext:
        authority = CertificateAuthority(directory / "ca", "winrm-fake-ca")
        server = authority.issue_server("winhost", HOSTNAME, f"DNS:{HOSTNAME},IP:127.0.0.1")
        self.ca_file = str(authority.certificate)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(server.certificate, server.key)

        def remember_server_name(connection: Any, name: str | None, _context: ssl.SSLContext) -> None:
            self._sni[id(connection)] = name

        context.sni_callback = remember_server_name
        return context

    def _record(self, request: ReceivedRequest, script: str | None, command_line: str | None) -> None:
        with self._changed:
            self.requests.append(request)
            if command_line is not None:
                self.command_lines.append(command_line)
            if script is not None:
                self.scripts.append(script)
            self._changed.notify_all()

    def _accepted(self) -> int:
        with self._changed:
            self.connections += 1
            self._changed.notify_all()
            return self.connections


def _tampered(multipart: bytes) -> bytes:
    """`multipart` with the last byte of its sealed message flipped: the MIME framing and lengths stay right."""
    last = len(multipart) - len(_BOUNDARY + b"--\r\n") - 1
    return multipart[:last] + bytes([multipart[last] ^ 0x01]) + multipart[last + 1:]


class _Handler(BaseHTTPRequestHandler):
    """One TCP connection: keep-alive, so an NTLM handshake and the encrypted messages after it share it."""

    owner: FakeWinrm
    protocol_version = "HTTP/1.1"
    _ntlm: Any = None
    _connection_number = 0

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def handle(self) -> None:
        self._connection_number = self.owner._accepted()
        if self.owner.mode == "silent":
            self.owner._stopping.wait()
            return
        super().handle()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        raw_body = self.rfile.read(length)
        authorization = self.headers.get("Authorization", "")
        if self.owner.authentication == "basic":
            self._serve_basic(authorization, raw_body)
        else:
            self._serve_ntlm(authorization, raw_body)

    def _serve_basic(self, authorization: str, raw_body: bytes) -> None:
        owner = self.owner
        expected = "Basic " + base64.b64encode(f"{owner.username}:{owner.password}".encode()).decode()
        if authorization != expected:
            self._record(raw_body, raw_body.decode("utf-8", "replace"), encrypted=False)
            self._send(401, b"", [("WWW-Authenticate", 'Basic realm="WSMAN"')])
            return
        self._answer(raw_body, raw_body.decode("utf-8"), encrypted=False)

    def _serve_ntlm(self, authorization: str, raw_body: bytes) -> None:
        scheme, _, token = authorization.partition(" ")
        if scheme in ("Negotiate", "NTLM") and token:
            if self._ntlm is None or self._ntlm.complete:
                self._ntlm = spnego.server(protocol="ntlm")
            try:
                answer = self._ntlm.step(base64.b64decode(token))
            except spnego.exceptions.SpnegoError:
                self._ntlm = None
                self._record(raw_body, "", encrypted=False)
                self._send(401, b"", [("WWW-Authenticate", "Negotiate")])
                return
            if answer:
                self._record(raw_body, "", encrypted=False)
                self._send(401, b"", [("WWW-Authenticate", f"{scheme} {base64.b64encode(answer).decode()}")])
                return
        if self._ntlm is None or not self._ntlm.complete:
            self._record(raw_body, "", encrypted=False)
            self._send(401, b"", [("WWW-Authenticate", "Negotiate")])
            return
        if not raw_body:  # pywinrm's empty POST that authenticates the connection before encrypting
            self._record(raw_body, "", encrypted=False)
            self._send(200, b"")
            return
        if _ENCRYPTED_PROTOCOL.decode() not in self.headers.get("Content-Type", ""):
            self._record(raw_body, raw_body.decode("utf-8", "replace"), encrypted=False)
            self._send(400, b"the fake accepts only encrypted messages after NTLM")
            return
        self._answer(raw_body, self._decrypt(raw_body).decode("utf-8"), encrypted=True)

    def _decrypt(self, raw_body: bytes) -> bytes:
        parts = [part for part in raw_body.split(_BOUNDARY + b"\r\n") if part]
        payload = parts[1].removesuffix(_BOUNDARY + b"--\r\n")
        sealed = payload.removeprefix(b"\tContent-Type: application/octet-stream\r\n")
        signature_length = struct.unpack("<i", sealed[:4])[0]
        return bytes(self._ntlm.unwrap(sealed[4:4 + signature_length] + sealed[4 + signature_length:]).data)

    def _encrypt(self, message: bytes) -> bytes:
        wrapped = self._ntlm.wrap(message, encrypt=True).data
        signature, sealed = wrapped[:16], wrapped[16:]
        return (_BOUNDARY + b"\r\n\tContent-Type: " + _ENCRYPTED_PROTOCOL
                + b"\r\n\tOriginalContent: type=application/soap+xml;charset=UTF-8;Length="
                + str(len(message)).encode() + b"\r\n" + _BOUNDARY
                + b"\r\n\tContent-Type: application/octet-stream\r\n"
                + struct.pack("<i", len(signature)) + signature + sealed + _BOUNDARY + b"--\r\n")

    def _answer(self, raw_body: bytes, soap: str, *, encrypted: bool) -> None:
        root = ET.fromstring(soap)
        action = root.findtext("s:Header/a:Action", "", _NS)
        message_id = root.findtext("s:Header/a:MessageID", "", _NS)
        name = action.rsplit("/", 1)[-1]
        script: str | None = None
        command_line: str | None = None
        status = 200
        if name == "Create":
            body = ('<x:ResourceCreated><a:Address>https://winhost.test/wsman</a:Address><a:ReferenceParameters>'
                    '<w:SelectorSet><w:Selector Name="ShellId">11111111-2222-3333-4444-555555555555</w:Selector>'
                    "</w:SelectorSet></a:ReferenceParameters></x:ResourceCreated>")
        elif name == "Command":
            command_line = " ".join(filter(None, (root.findtext(".//rsp:Command", "", _NS),
                                                  root.findtext(".//rsp:Arguments", "", _NS))))
            body, script = self._start_command(command_line)
        elif name == "Receive":
            stream = root.find(".//rsp:DesiredStream", _NS)
            command_id = stream.get("CommandId", "") if stream is not None else ""
            if self.owner.mode == "operation_timeout" or self._hold_first_receive(root, command_id):
                status, body = 500, _TIMEOUT_FAULT
            else:
                body = self._receive(command_id)
        elif name == "Signal":
            body = "<rsp:SignalResponse/>"
        else:
            body = ""
        self._record(raw_body, soap, encrypted=encrypted, action=name, script=script, command_line=command_line)
        reply = _ENVELOPE.format(action=action + "Response", message_id=uuid.uuid4(), relates_to=message_id,
                                 body=body).encode()
        if encrypted and self.owner.mode != "clear_replies":
            sealed = self._encrypt(reply)
            if self.owner.mode == "tampered_replies":
                sealed = _tampered(sealed)
            self._send(status, sealed, [("Content-Type", _ENCRYPTED_CONTENT_TYPE)])
        else:
            self._send(status, reply, [("Content-Type", "application/soap+xml;charset=UTF-8")])

    def _start_command(self, command_line: str) -> tuple[str, str | None]:
        encoded = _ENCODED_COMMAND.search(command_line)
        script = base64.b64decode(encoded.group(1)).decode("utf-16-le") if encoded else None
        stdout, stderr, exit_code = self.owner.responder(script if script is not None else command_line)
        command_id = str(uuid.uuid4()).upper()
        with self.owner._changed:
            self.owner._commands[command_id] = _Command(stdout.encode("utf-8"), stderr.encode("utf-8"), exit_code)
        return f"<rsp:CommandResponse><rsp:CommandId>{command_id}</rsp:CommandId></rsp:CommandResponse>", script

    def _hold_first_receive(self, root: ET.Element, command_id: str) -> bool:
        """In mode "held_receive": hold the command's first Receive for the request's OperationTimeout (or until
        the fake stops), and say so."""
        if self.owner.mode != "held_receive":
            return False
        with self.owner._changed:
            command = self.owner._commands[command_id]
            if command.held:
                return False
            command.held = True
        timeout = _OPERATION_TIMEOUT.match(root.findtext("s:Header/w:OperationTimeout", "", _NS))
        self.owner._stopping.wait(float(timeout.group(1)) if timeout else 60.0)
        return True

    def _receive(self, command_id: str) -> str:
        with self.owner._changed:
            command = self.owner._commands[command_id]
            stdout, command.stdout = command.stdout[:RECEIVE_CHUNK_BYTES], command.stdout[RECEIVE_CHUNK_BYTES:]
            stderr, command.stderr = command.stderr[:RECEIVE_CHUNK_BYTES], command.stderr[RECEIVE_CHUNK_BYTES:]
            done = not command.stdout and not command.stderr
        streams = "".join(
            f'<rsp:Stream Name="{name}" CommandId="{command_id}">{base64.b64encode(data).decode()}</rsp:Stream>'
            for name, data in (("stdout", stdout), ("stderr", stderr)) if data)
        if not done:
            return (f"<rsp:ReceiveResponse>{streams}<rsp:CommandState CommandId=\"{command_id}\" "
                    f'State="{_SHELL}/CommandState/Running"/></rsp:ReceiveResponse>')
        return (f'<rsp:ReceiveResponse>{streams}<rsp:Stream Name="stdout" CommandId="{command_id}" End="true"/>'
                f'<rsp:Stream Name="stderr" CommandId="{command_id}" End="true"/>'
                f'<rsp:CommandState CommandId="{command_id}" State="{_SHELL}/CommandState/Done">'
                f"<rsp:ExitCode>{command.exit_code}</rsp:ExitCode></rsp:CommandState></rsp:ReceiveResponse>")

    def _record(self, raw_body: bytes, body: str, *, encrypted: bool, action: str = "", script: str | None = None,
                command_line: str | None = None) -> None:
        sni = self.owner._sni.get(id(self.connection)) if isinstance(self.connection, ssl.SSLSocket) else None
        self.owner._record(ReceivedRequest(self.command, self.path, dict(self.headers.items()), sni,
                                           self._connection_number, raw_body, body, encrypted, action),
                           script, command_line)

    def _send(self, status: int, body: bytes, headers: list[tuple[str, str]] | None = None) -> None:
        try:
            self.send_response(status)
            for name, value in headers or ():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (TimeoutError, ConnectionError, ssl.SSLError):
            self.close_connection = True
