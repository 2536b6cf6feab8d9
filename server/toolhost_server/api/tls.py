"""TLS for the gRPC listener: the server certificate, key and optional client CA, read again when they change.

gRPC asks for the certificate configuration before each new TLS handshake; answering from the files' stat
stamps keeps that cheap, and a renewed certificate (cert-manager, a Kubernetes Secret update) is served to the
next connection without a restart. Connections already open keep the certificate they were made with.
"""

from __future__ import annotations

import logging
from pathlib import Path

import grpc

from ..auth.file_changes import FileChanges
from ..config import Config

logger = logging.getLogger("toolhost.tls")


class CertificateFiles:
    """The PEM files of the server's TLS identity (and client CA), and the configuration gRPC gets from them."""

    def __init__(self, cert_file: Path, key_file: Path, client_ca_file: Path | None) -> None:
        self._paths = (cert_file, key_file) + ((client_ca_file,) if client_ca_file is not None else ())
        self._changes = FileChanges(self._paths)
        self.initial = self._read()  # OSError or ValueError: the server cannot start without its certificate

    def _read(self) -> grpc.ServerCertificateConfiguration:
        contents = []
        for path in self._paths:
            data = path.read_bytes()
            if b"-----BEGIN " not in data or b"-----END " not in data:
                raise ValueError(f"{path} holds no PEM block (-----BEGIN ...); it must be PEM, not DER")
            contents.append(data)
        cert, key = contents[0], contents[1]
        client_ca = contents[2] if len(contents) > 2 else None
        return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=client_ca)

    def fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """The new configuration when a file changed since the last look, else None (keep the current one).

        Called by gRPC for every new connection; it must not raise. A file that cannot be read (half-written,
        or missing while being replaced) leaves the current certificate in use, and is tried again once it
        changes again.
        """
        if not self._changes.changed():
            return None
        self._changes.mark_seen()
        try:
            configuration = self._read()
        except (OSError, ValueError) as exc:
            logger.error("TLS files changed but cannot be used, keeping the current certificate: %s", exc)
            return None
        logger.info("TLS certificate reloaded from %s", self._paths[0])
        return configuration


def server_credentials(config: Config) -> grpc.ServerCredentials | None:
    """The credentials of the TCP listener, or None to serve plaintext; OSError naming the setting when the
    files cannot be used."""
    if not config.tls_cert_file:
        return None
    client_ca = Path(config.tls_client_ca_file) if config.tls_client_ca_file else None
    try:
        files = CertificateFiles(Path(config.tls_cert_file), Path(config.tls_key_file), client_ca)
    except OSError as exc:
        raise OSError(f"cannot read the TLS files (tls_cert_file, tls_key_file, tls_client_ca_file): "
                      f"{exc.filename}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise OSError(f"cannot use the TLS files: {exc}") from None
    # With a client CA, a client must present a certificate it signed; gRPC verifies it during the handshake.
    return grpc.dynamic_ssl_server_credentials(
        files.initial, files.fetch, require_client_authentication=client_ca is not None)
