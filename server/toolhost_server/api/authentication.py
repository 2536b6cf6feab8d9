"""Reads who is calling from a gRPC request (its connection's TLS identity, its socket and its metadata) and
asks the core's Authenticator which Caller that is."""

from __future__ import annotations

import grpc

from ..auth import Authenticator, Caller, PeerIdentity

AUTHORIZATION_METADATA_KEY = "authorization"


def authenticate(authenticator: Authenticator, context: grpc.aio.ServicerContext, trusted_socket: bool) -> Caller:
    """The caller of the request `context` belongs to, or UnauthenticatedError. `trusted_socket`: whether the
    server's unix socket is marked trusted."""
    if not authenticator.required and not trusted_socket:
        # Nothing the request shows could change the answer: skip reading it (the common local case).
        return authenticator.authenticate(PeerIdentity())
    return authenticator.authenticate(peer_identity(context, trusted_socket))


def peer_identity(context: grpc.aio.ServicerContext, trusted_socket: bool) -> PeerIdentity:
    auth_context = context.auth_context() or {}
    authorization = None
    for key, value in context.invocation_metadata() or ():
        if key == AUTHORIZATION_METADATA_KEY:
            authorization = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    # The server listens on one unix socket at most, so any unix peer came through it. gRPC names the peer
    # "unix:" followed by the client's own (usually empty) address.
    over_unix_socket = str(context.peer() or "").startswith("unix:")
    common_names = _texts(auth_context.get("x509_common_name"))
    # With a client CA configured the handshake refuses unverified certificates, so a certificate seen here is
    # one the CA signed.
    verified = _texts(auth_context.get("transport_security_type")) == ("ssl",) and bool(
        auth_context.get("x509_pem_cert"))
    return PeerIdentity(
        authorization=authorization,
        certificate_verified=verified,
        common_name=common_names[0] if common_names and verified else "",
        subject_alternative_names=_texts(auth_context.get("x509_subject_alternative_name")) if verified else (),
        trusted_socket=trusted_socket and over_unix_socket,
    )


def _texts(values: object) -> tuple[str, ...]:
    if not isinstance(values, (list, tuple)):
        return ()
    return tuple(v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in values)
