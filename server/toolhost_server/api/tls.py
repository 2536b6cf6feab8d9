"""TLS for the gRPC listener: the server certificate, key and optional client CA (tls_files), read again when
they change.

gRPC asks for the certificate configuration before each new TLS handshake; ReloadingTls answers from the files'
stat stamps, so a renewed certificate is served to the next connection without a restart.
"""

from __future__ import annotations

import grpc

from ..config import Config
from ..tls_files import TlsFiles, load_tls


def _certificate_configuration(files: TlsFiles) -> grpc.ServerCertificateConfiguration:
    pem = files.read()
    return grpc.ssl_server_certificate_configuration([(pem.private_key, pem.certificate_chain)],
                                                      root_certificates=pem.client_ca)


def server_credentials(config: Config) -> grpc.ServerCredentials | None:
    """The credentials of the TCP listener, or None to serve plaintext; OSError naming the setting when the
    files cannot be used."""
    tls = load_tls(config, _certificate_configuration, "gRPC")
    if tls is None:
        return None
    # With a client CA, a client must present a certificate it signed; gRPC verifies it during the handshake.
    return grpc.dynamic_ssl_server_credentials(
        tls.current, tls.refresh, require_client_authentication=tls.files.client_ca is not None)
