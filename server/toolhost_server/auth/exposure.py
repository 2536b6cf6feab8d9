"""The start-up check that keeps a server from being reachable by others without authentication.

"Authentication configured" means: TLS (tls_cert_file and tls_key_file) and a way to tell callers apart,
an auth_file (bearer tokens, certificate entries) or a tls_client_ca_file (client certificates). A server on a
loopback address needs neither; on any other address it needs both, or an explicit `insecure` (a proxy or
service mesh in front terminates TLS and authenticates).

The HTTP listener (http_address) follows the same rule, with its own ways to tell scrapers apart: /metrics
names every tool, hidden ones too, so beyond loopback it needs TLS and a metrics_token_file or a
tls_client_ca_file; and /mcp and the REST API (/ai/tools) call tools, so it needs an auth_file or a
tls_client_ca_file as gRPC does.
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
    """UnsafeExposureError when the TLS and authentication settings are incomplete or unsafe for the gRPC or the
    HTTP address."""
    tls = bool(config.tls_cert_file)
    if tls != bool(config.tls_key_file):
        raise UnsafeExposureError("tls_cert_file and tls_key_file go together: set both (--tls-cert-file, "
                                  "--tls-key-file) or neither")
    if config.tls_client_ca_file and not tls:
        raise UnsafeExposureError("tls_client_ca_file verifies client certificates during the TLS handshake, so "
                                  "it needs tls_cert_file and tls_key_file too")
    if config.trusted_unix_socket and not config.unix_socket:
        raise UnsafeExposureError("trusted_unix_socket marks the unix socket trusted, but unix_socket is not set")
    _check_grpc_exposure(config, tls)
    _check_http_exposure(config, tls)


def _check_grpc_exposure(config: Config, tls: bool) -> None:
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


def _check_http_exposure(config: Config, tls: bool) -> None:
    address = config.http_address
    if not address or config.insecure or is_loopback_host(address.rpartition(":")[0]):
        return
    if not tls:
        what = "the metrics token in plaintext" if config.metrics_token_file else "/metrics in plaintext"
        raise UnsafeExposureError(
            f"refusing to serve {what} on http_address {address}, which is not a loopback address (/metrics "
            "names every tool, hidden ones too, with their calls and outcomes): set tls_cert_file and "
            "tls_key_file (TOOLHOST_TLS_CERT_FILE, TOOLHOST_TLS_KEY_FILE) and metrics_token_file "
            "(TOOLHOST_METRICS_TOKEN_FILE) or tls_client_ca_file; or bind http_address to 127.0.0.1 (empty turns "
            "HTTP off); or pass --insecure (TOOLHOST_INSECURE=true) when a proxy in front does TLS and "
            "authentication")
    if not (config.metrics_token_file or config.tls_client_ca_file):
        raise UnsafeExposureError(
            f"refusing to serve /metrics on http_address {address} to anyone who reaches it (it names every tool, "
            "hidden ones too): set metrics_token_file (TOOLHOST_METRICS_TOKEN_FILE, a bearer token for the "
            "scraper) or tls_client_ca_file (TOOLHOST_TLS_CLIENT_CA_FILE, client certificates); or bind "
            "http_address to 127.0.0.1; or pass --insecure (TOOLHOST_INSECURE=true) when a proxy in front "
            "authenticates")
    if not (config.auth_file or config.tls_client_ca_file):
        # The browser guard's Host check stops web pages, not other clients: they send any Host they like.
        raise UnsafeExposureError(
            f"refusing to serve /mcp and /ai/tools on http_address {address} without authentication: anyone "
            "reaching it could list and call the tools; set auth_file (TOOLHOST_AUTH_FILE, bearer tokens) or "
            "tls_client_ca_file (TOOLHOST_TLS_CLIENT_CA_FILE, client certificates); or bind http_address to "
            "127.0.0.1; or pass --insecure (TOOLHOST_INSECURE=true) when a proxy in front authenticates")


def shell_refusal(config: Config) -> str:
    """Why `bash` must not be served on this server, or "": it runs any command as the process user, so a server
    that anyone on the network may call without authentication (a non-loopback gRPC or HTTP address with
    --insecure) never offers it, whatever its workspaces allow."""
    if config.auth_file or config.tls_client_ca_file:
        return ""
    # /mcp calls tools as gRPC does: either listener beyond loopback exposes the shell.
    exposed = [address for address in (config.grpc_address, config.http_address)
               if address and not is_loopback_host(address.rpartition(":")[0])]
    if not exposed:
        return ""
    return (f"the server has no authentication (auth_file or tls_client_ca_file) and listens on "
            f"{exposed[0]}, which is not a loopback address")
