"""Who is calling: the identity every request is authenticated as, and the rights it brings."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .permissions import FULL_RIGHTS, Permissions


class AuthMethod(enum.Enum):
    """How the caller proved who it is."""

    ANONYMOUS = "anonymous"  # the server has no authentication configured
    TOKEN = "token"  # a bearer token listed in the auth file
    MTLS = "mtls"  # a client certificate from the configured CA
    TRUSTED_UNIX_SOCKET = "trusted_unix_socket"  # the unix socket marked trusted (sidecar mode)


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated caller. `permissions` are fixed when it is authenticated, so an edit of the auth file
    applies from the next request on, never halfway through one."""

    name: str
    roles: frozenset[str]
    method: AuthMethod
    permissions: Permissions

    @property
    def visibility(self) -> tuple[str, ...]:
        """What decides which tools the caller sees, for binding page tokens: its roles, or "*" for all."""
        return ("*",) if self.permissions.unrestricted else tuple(sorted(self.roles))


# Every caller of a server without authentication (local development on loopback), and the default of
# surfaces that do not authenticate.
ANONYMOUS = Caller("anonymous", frozenset(), AuthMethod.ANONYMOUS, FULL_RIGHTS)
# Whoever can open the trusted unix socket: its file permissions are the authentication.
TRUSTED_SOCKET_CALLER = Caller("trusted-unix-socket", frozenset(), AuthMethod.TRUSTED_UNIX_SOCKET, FULL_RIGHTS)
