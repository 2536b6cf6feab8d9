"""A requests session that connects only to addresses checked beforehand, for pywinrm.

The URL keeps the host's name, so the Host header, the TLS server name (SNI), the certificate's hostname check
and the NTLM target name are all the real name; only the TCP connect goes to the egress-checked addresses, tried
in order and never resolved again. Nothing comes from the environment: no proxy, no .netrc, no CA bundle variable
(`trust_env` off), and the TLS trust is the context given here alone. Each request is bounded by the caller's
deadline and, when given, by an answer timeout (connect, first byte, and every pause within the answer), so that
a host that accepts TCP and says nothing is given up on long before the deadline. Redirects are not followed, an
answer is read up to a byte limit, and `abort()` wakes a thread blocked on a socket, so a call can be abandoned
on its deadline.

urllib3 internals: the connection classes' `_new_conn` (overridden) and `sock`, and requests' `Response._content`
(set after the bounded read). pyproject pins urllib3 <3 and tests/test_winrm_client.py fails if they change.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, ClassVar, Final

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError, ReadTimeoutError
from urllib3.util import connection as urllib3_connection

# The largest answer read from the host. WinRM's MaxEnvelopeSize (pywinrm asks for 153,600 bytes) bounds a real
# answer; message encryption adds a few hundred bytes.
MAX_RESPONSE_BYTES: Final = 1024 * 1024


class DeadlineReached(requests.exceptions.Timeout):
    """The call's deadline passed before or while a request was made."""


class AnswerTimedOut(requests.exceptions.Timeout):
    """The host did not connect, start answering, or go on answering within the session's answer timeout."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no answer within {seconds:g} s")
        self.seconds = seconds


class ResponseTooLarge(requests.exceptions.RequestException):
    """The host sent more than MAX_RESPONSE_BYTES in one answer."""


class SessionAborted(requests.exceptions.ConnectionError):
    """The session was aborted (its call gave up on it); it makes no more connections."""


class _Pin:
    """The addresses, the deadline and the open connections one session shares with its connection classes."""

    def __init__(self, addresses: Sequence[str], deadline: float) -> None:
        if not addresses:
            raise ValueError("a pinned session needs at least one address")
        self.addresses = tuple(addresses)
        self.deadline = deadline
        self._lock = threading.Lock()
        self._connections: list[HTTPConnection] = []
        self._aborted = False

    def remaining(self) -> float:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise DeadlineReached("the WinRM call's deadline passed")
        return remaining

    def check_open(self) -> None:
        if self._aborted:
            raise SessionAborted("the WinRM session was aborted")

    def connect(self, connection: HTTPConnection) -> socket.socket:
        """A socket to the first address that accepts, for `connection` (which keeps the URL's host name)."""
        failure: Exception | None = None
        for address in self.addresses:
            self.check_open()
            timeout = self.remaining()
            if isinstance(connection.timeout, int | float):
                timeout = min(timeout, connection.timeout)
            try:
                sock = urllib3_connection.create_connection(
                    (address, connection.port), timeout,
                    source_address=connection.source_address, socket_options=connection.socket_options)
            except TimeoutError as error:
                failure = ConnectTimeoutError(connection, f"connecting to {address} port {connection.port} timed "
                                                          f"out (connect timeout={timeout:.1f} s)")
                failure.__cause__ = error
                continue
            except OSError as error:
                failure = NewConnectionError(connection, f"connecting to {address} port {connection.port} "
                                                         f"failed: {error}")
                continue
            sys.audit("http.client.connect", connection, address, connection.port)
            with self._lock:
                self._connections.append(connection)
                aborted = self._aborted
            if aborted:  # abort() ran while we connected: it could not see this socket
                sock.close()
                self.check_open()
            return sock
        assert failure is not None
        raise failure

    def abort(self) -> None:
        """Refuse new connections and shut down the open ones, waking any thread blocked reading them."""
        with self._lock:
            self._aborted = True
            connections = list(self._connections)
        for connection in connections:
            sock = connection.sock
            if sock is not None:
                # The plain socket method: SSLSocket.shutdown would also drop its TLS object under a reader.
                # OSError: its owner closed it already.
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _PinnedHTTPConnection(HTTPConnection):
    pin: ClassVar[_Pin]

    def _new_conn(self) -> socket.socket:
        return self.pin.connect(self)


class _PinnedHTTPSConnection(HTTPSConnection):
    pin: ClassVar[_Pin]

    def _new_conn(self) -> socket.socket:
        return self.pin.connect(self)


class _PinnedAdapter(HTTPAdapter):
    """Pools whose connections go to the pin's addresses, with TLS trust from `tls_context` only; never a proxy."""

    def __init__(self, pin: _Pin, tls_context: ssl.SSLContext) -> None:
        self._pin = pin
        self._tls_context = tls_context
        super().__init__(pool_connections=1, pool_maxsize=1, max_retries=0)

    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: Any) -> None:
        super().init_poolmanager(connections, maxsize, block, ssl_context=self._tls_context, **pool_kwargs)
        attributes = {"pin": self._pin}
        http_connection = type("PinnedHTTPConnection", (_PinnedHTTPConnection,), attributes)
        https_connection = type("PinnedHTTPSConnection", (_PinnedHTTPSConnection,), attributes)
        self.poolmanager.pool_classes_by_scheme = {
            "http": type("PinnedHTTPConnectionPool", (HTTPConnectionPool,), {"ConnectionCls": http_connection}),
            "https": type("PinnedHTTPSConnectionPool", (HTTPSConnectionPool,), {"ConnectionCls": https_connection}),
        }

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        # requests would add its own CA bundle to the context's trust; the context alone decides here.
        conn.cert_reqs = "CERT_REQUIRED"
        conn.ca_certs = None
        conn.ca_cert_dir = None

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        raise requests.exceptions.InvalidProxyURL("a pinned session never uses a proxy")


class PinnedSession(requests.Session):
    """A session for one call: connections to `addresses` only, TLS verified by `tls_context`, all before
    `deadline` (a time.monotonic() value).

        session = PinnedSession(("10.0.0.7",), tls_context=ssl.create_default_context(), deadline=now + 30)
        session.post("https://winhost.corp.example:5986/wsman", ...)   # TCP to 10.0.0.7, SNI winhost.corp.example
    """

    def __init__(self, addresses: Sequence[str], *, tls_context: ssl.SSLContext, deadline: float,
                 max_response_bytes: int = MAX_RESPONSE_BYTES, answer_timeout: float | None = None) -> None:
        super().__init__()
        # Seconds the host may take to connect, to start answering, and between two pieces of an answer. When set,
        # it replaces the timeout a request is sent with: the caller knows which request the host may hold longer
        # (WinRM's Receive) and raises it for that one. None: the request's own timeout.
        self.answer_timeout = answer_timeout
        self.trust_env = False
        self.proxies = {}
        self.verify = True  # the adapter's TLS context holds the trust; True only says "verify"
        self.max_redirects = 0
        # A compressed answer could expand past the byte limit before it is counted.
        self.headers["Accept-Encoding"] = "identity"
        self._pin = _Pin(addresses, deadline)
        self._max_response_bytes = max_response_bytes
        adapter = _PinnedAdapter(self._pin, tls_context)
        self.mount("https://", adapter)
        self.mount("http://", adapter)

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        self._pin.check_open()
        wanted = self.answer_timeout if self.answer_timeout is not None else kwargs.get("timeout")
        remaining = self._pin.remaining()
        timeout = min(wanted, remaining) if isinstance(wanted, int | float) else remaining
        kwargs["timeout"] = timeout
        kwargs["allow_redirects"] = False
        kwargs["stream"] = True
        kwargs["proxies"] = {}
        try:
            response = super().send(request, **kwargs)
            _read_bounded(response, self._max_response_bytes)
        except requests.exceptions.Timeout as error:
            # Told apart from the deadline, which belongs to the whole call: the host went quiet on this request.
            if self.answer_timeout is None or timeout >= remaining or isinstance(error, DeadlineReached):
                raise
            raise AnswerTimedOut(timeout) from error
        return response

    def limit_deadline(self, deadline: float) -> None:
        """Bring the deadline forward to `deadline` (never later than it was)."""
        self._pin.deadline = min(self._pin.deadline, deadline)

    def abort(self) -> None:
        """Give up on this session from another thread: no new connection, open ones shut down."""
        self._pin.abort()
        self.close()


def _read_bounded(response: requests.Response, limit: int) -> None:
    """Read the answer now, failing past `limit` bytes, so nothing later reads an unbounded body."""
    if response._content_consumed:  # requests_ntlm read a 401 challenge's (empty) body itself
        return
    chunks: list[bytes] = []
    size = 0
    try:
        for chunk in response.iter_content(64 * 1024):
            size += len(chunk)
            if size > limit:
                raise ResponseTooLarge(f"the WinRM host sent more than {limit} bytes in one answer")
            chunks.append(chunk)
    except requests.exceptions.ConnectionError as error:
        # requests reports a read that timed out within the body as a connection error; it is a timeout.
        if error.args and isinstance(error.args[0], ReadTimeoutError):
            raise requests.exceptions.ReadTimeout(*error.args, response=response) from error
        raise
    finally:
        response.close()
    response._content = b"".join(chunks)
