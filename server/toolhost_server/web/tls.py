"""TLS for the HTTP listener: the gRPC listener's certificate, key and client CA (tls_files), read again when
they change.

asyncio wraps every connection of a listener in the one ssl.SSLContext it was started with. That context's SNI
callback runs early in every handshake (also when the client sends no server name, as for an IP address) and
hands the connection the newest context built from the files: a renewed certificate is served to the next
connection without a restart.
"""

from __future__ import annotations

import ssl

from ..config import Config
from ..tls_files import ReloadingTls, TlsFiles, load_tls


def _server_context(files: TlsFiles) -> ssl.SSLContext:
    pem = files.read()  # the same checks, and messages, as gRPC's
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # The ssl module loads a certificate and key from files only. A file replaced since read() makes a
    # mismatched pair, an SSLError, and the next change is tried again.
    context.load_cert_chain(files.certificate_chain, files.private_key)
    if pem.client_ca is not None:
        context.load_verify_locations(cadata=pem.client_ca.decode("latin-1"))  # str: PEM; bytes would be DER
        context.verify_mode = ssl.CERT_REQUIRED
    return context


class ReloadingServerContext:
    """`context` is what the listener serves with; each handshake switches to the newest certificate."""

    def __init__(self, tls: ReloadingTls[ssl.SSLContext]) -> None:
        self._tls = tls
        self.client_certificates_required = tls.files.client_ca is not None
        self.context = tls.current
        self.context.sni_callback = self._use_newest

    def _use_newest(self, connection: ssl.SSLObject, server_name: str | None, context: ssl.SSLContext) -> None:
        self._tls.refresh()
        # The verify mode stays the listening context's (the settings cannot change without a restart); the
        # certificate, key and client CA store are the newest context's.
        if self._tls.current is not connection.context:
            connection.context = self._tls.current


def http_server_context(config: Config) -> ReloadingServerContext | None:
    """The HTTP listener's TLS, or None to serve plaintext; OSError naming the settings when the files cannot
    be used."""
    tls = load_tls(config, _server_context, "HTTP")
    return ReloadingServerContext(tls) if tls is not None else None
