"""How a client reaches the server: TLS or plaintext, client certificates, and the bearer token.

A bearer token is as good as a password to whoever reads it, so it is only sent over TLS; over plaintext
only to this machine (loopback or a unix socket), and only when the caller says so with insecure_token_ok.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from typing import Union

import grpc

__all__ = ["ChannelSecurity", "PemSource", "channel_security", "is_local_target", "with_security_metadata"]

# PEM as bytes, or the path of a PEM file.
PemSource = Union[bytes, str, "os.PathLike[str]"]

AUTHORIZATION_METADATA_KEY = "authorization"


@dataclass(frozen=True)
class ChannelSecurity:
    """What the client's channel and calls need: credentials (None: plaintext), channel options, and
    metadata to send with every call."""

    credentials: grpc.ChannelCredentials | None
    options: tuple[tuple[str, str], ...] = ()
    metadata: tuple[tuple[str, str], ...] = ()


def channel_security(
    target: str,
    *,
    credentials: grpc.ChannelCredentials | None = None,
    tls: bool = False,
    root_certificates: PemSource | None = None,
    client_certificate: PemSource | None = None,
    client_key: PemSource | None = None,
    server_name_override: str | None = None,
    token: str | None = None,
    insecure_token_ok: bool = False,
    own_channel: bool = True,
) -> ChannelSecurity:
    """The security of a client of `target`; ValueError when the arguments do not fit together or would send
    a token where it could be read. `own_channel` is False when the caller passed its own channel."""
    tls_arguments = tls or root_certificates is not None or client_certificate is not None or client_key is not None
    if credentials is not None and tls_arguments:
        raise ValueError("give credentials= or the TLS arguments (tls, root_certificates, client_certificate, "
                         "client_key), not both")
    if (client_certificate is None) != (client_key is None):
        raise ValueError("client_certificate and client_key go together: give both or neither")
    secure = credentials is not None or tls_arguments
    if server_name_override and not secure:
        raise ValueError("server_name_override only applies to TLS: also pass tls=True or root_certificates=")
    if secure and credentials is None:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=_pem(root_certificates, "root_certificates"),
            private_key=_pem(client_key, "client_key"),
            certificate_chain=_pem(client_certificate, "client_certificate"))
    options = (("grpc.ssl_target_name_override", server_name_override),) if server_name_override else ()
    metadata: tuple[tuple[str, str], ...] = ()
    if token is not None:
        _check_token_transport(target, token, secure, insecure_token_ok, own_channel)
        metadata = ((AUTHORIZATION_METADATA_KEY, f"Bearer {token}"),)
    return ChannelSecurity(credentials if secure else None, options, metadata)


def with_security_metadata(
    metadata: tuple[tuple[str, str], ...], security: ChannelSecurity
) -> tuple[tuple[str, str], ...]:
    """`metadata` plus the token's; ValueError when both carry an authorization entry."""
    if security.metadata and any(key == AUTHORIZATION_METADATA_KEY for key, _ in metadata):
        raise ValueError("give token= or an authorization entry in metadata=, not both")
    return metadata + security.metadata


def _check_token_transport(target: str, token: str, secure: bool, insecure_token_ok: bool, own_channel: bool) -> None:
    if not token or any(c.isspace() for c in token):
        raise ValueError("token must be non-empty and hold no spaces or newlines (read a token file with "
                         ".read().strip())")
    if not own_channel:
        raise ValueError("with channel=, the client cannot tell whether the channel is encrypted: put the token "
                         "in the channel's call credentials (grpc.access_token_call_credentials) instead")
    if secure:
        return
    if not is_local_target(target):
        raise ValueError(f"refusing to send the token to {target} in plaintext, where anyone on the path can read "
                         "and reuse it: connect with TLS (tls=True or root_certificates=...)")
    if not insecure_token_ok:
        raise ValueError(f"{target} is on this machine, but the channel is plaintext: pass insecure_token_ok=True "
                         "to send the token over it anyway, or connect with TLS")


def is_local_target(target: str) -> bool:
    """Whether a gRPC target only reaches this machine: a unix socket, or a loopback host."""
    if target.startswith(("unix:", "unix-abstract:")):
        return True
    for scheme in ("dns:///", "dns:", "ipv4:", "ipv6:"):
        if target.startswith(scheme):
            target = target[len(scheme):]
            break
    host = target.rpartition(":")[0] if not target.endswith("]") else target
    host = (host or target).strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _pem(source: PemSource | None, name: str) -> bytes | None:
    if source is None or isinstance(source, bytes):
        return source
    try:
        with open(source, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise ValueError(f"cannot read {name} from {os.fspath(source)}: {exc.strerror or exc}") from None
