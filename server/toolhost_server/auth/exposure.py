"""The start-up check that keeps a server from being reachable by others without authentication.

"Authentication configured" means: TLS (tls_cert_file and tls_key_file) and a way to tell callers apart,
an auth_file (bearer tokens, certificate entries) or a tls_client_ca_file (client certificates). A server on a
loopback address needs neither; on any other address it needs both, or an explicit `insecure` (a proxy or
service mesh in front terminates TLS and authenticates).
"""

from __future__ import annotations

import ipaddress

from ..config import Config


class UnsafeExposureError(Exception):
    """The settings would expose the server, or a token, to the network unprotected; the message says which
    settings fix it."""


def is_loopback_host(host: str) -> bool:
    """Whether `host` (of a host:port address, IPv6 possibly in brackets) only reaches this machine."""
    host = host.strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name may resolve to anything


def check_exposure(config: Config) -> None:
    """UnsafeExposureError when the TLS and authentication settings are incomplete or unsafe for the address."""
    tls = bool(config.tls_cert_file)
    if tls != bool(config.tls_key_file):
        raise UnsafeExposureError("tls_cert_file and tls_key_file go together: set both (--tls-cert-file, "
                                  "--tls-key-file) or neither")
    if config.tls_client_ca_file and not tls:
        raise UnsafeExposureError("tls_client_ca_file verifies client certificates during the TLS handshake, so "
                                  "it needs tls_cert_file and tls_key_file too")
    if config.trusted_unix_socket and not config.unix_socket:
        raise UnsafeExposureError("trusted_unix_socket marks the unix socket trusted, but unix_socket is not set")
    address = config.grpc_address
    if config.insecure or is_loopback_host(address.rpartition(":")[0]):
        return
    if not tls:
        what = "bearer tokens in plaintext" if config.auth_file else "plaintext without authentication"
        raise UnsafeExposureError(
            f"refusing to serve {what} on {address}, which is not a loopback address: set tls_cert_file and "
            "tls_key_file (TOOLHOST_TLS_CERT_FILE, TOOLHOST_TLS_KEY_FILE) and auth_file or tls_client_ca_file; "
            "or bind 127.0.0.1; or pass --insecure (TOOLHOST_INSECURE=true) when a proxy in front does TLS and "
            "authentication")
    if not (config.auth_file or config.tls_client_ca_file):
        raise UnsafeExposureError(
            f"refusing to serve on {address} without authentication: anyone reaching it could list, call and "
            "reload; set auth_file (TOOLHOST_AUTH_FILE, bearer tokens) or tls_client_ca_file "
            "(TOOLHOST_TLS_CLIENT_CA_FILE, client certificates), or pass --insecure (TOOLHOST_INSECURE=true) "
            "when a proxy in front authenticates")
