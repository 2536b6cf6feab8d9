"""Who sent an HTTP request: the bearer token of its `Authorization` header, for every authenticated HTTP
surface alike (/mcp, the REST API), and the 401 challenge that tells a client what to send.

uvicorn hands an app neither the TLS connection nor its peer certificate, so a client certificate's names cannot
be read here. With a client CA and no auth file the CA is the whole access list and every TLS connection passed
it in the handshake: such a request is admitted as the certificate's holder. With an auth file, HTTP callers send
a token.

    caller = HttpAuthentication.of(toolhost).caller(scope)   # UnauthenticatedError: answer 401 with challenge()
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.types import Scope

from ..app import Toolhost
from ..auth import Authenticator, Caller, PeerIdentity

REALM = 'Bearer realm="toolhost"'


@dataclass(frozen=True, slots=True)
class HttpAuthentication:
    """Turns a request's headers into a Caller with the server's authenticator."""

    authenticator: Authenticator
    handshake_is_identity: bool

    @classmethod
    def of(cls, toolhost: Toolhost) -> HttpAuthentication:
        config = toolhost.config
        # The listener itself, not the request's scheme, says a handshake verified a certificate: with a
        # certificate and a client CA it is TLS that requires client certificates (web.tls), on every connection.
        listener_verifies = bool(config.tls_cert_file and config.tls_client_ca_file)
        return cls(toolhost.authenticator, listener_verifies and not config.auth_file)

    def caller(self, scope: Scope) -> Caller:
        """The authenticated caller of the request in `scope`; UnauthenticatedError when it shows none."""
        return self.authenticator.authenticate(
            PeerIdentity(authorization=authorization_of(scope), certificate_verified=self.handshake_is_identity))


def authorization_of(scope: Scope) -> str | None:
    """The first `Authorization` header's value, None without one."""
    for name, value in scope["headers"]:
        if name == b"authorization":
            return str(value.decode("latin-1"))
    return None


def challenge(scope: Scope) -> str:
    """The `WWW-Authenticate` value of a 401: `invalid_token` when the request sent a token (RFC 6750)."""
    return f'{REALM}, error="invalid_token"' if authorization_of(scope) is not None else REALM
