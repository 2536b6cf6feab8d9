"""Authentication: who a request comes from, given what its connection and metadata show.

The surfaces extract a PeerIdentity (api/ reads it from gRPC's auth context and metadata); the rules live here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..config import Config
from ..errors import UnauthenticatedError
from .auth_file import AuthTable
from .caller import ANONYMOUS, TRUSTED_SOCKET_CALLER, AuthMethod, Caller
from .permissions import FULL_RIGHTS
from .reloading_auth_file import ReloadingAuthFile
from .tokens import bearer_token


@dataclass(frozen=True, slots=True)
class PeerIdentity:
    """What a request shows about its sender.

    `authorization` is the raw `authorization` metadata value (None when absent). The certificate fields are
    set only for a client certificate the TLS handshake verified against the configured client CA.
    """

    authorization: str | None = None
    certificate_verified: bool = False
    common_name: str = ""
    subject_alternative_names: tuple[str, ...] = ()
    trusted_socket: bool = False


class Authenticator:
    """Turns a PeerIdentity into a Caller, or UnauthenticatedError.

    In order: the trusted unix socket is admin; with no authentication configured every caller is anonymous
    with full rights; a bearer token, when sent, decides the roles (so agents sharing a certificate can still
    be told apart); otherwise a verified client certificate does: through the auth file's `certificates`, or,
    without an auth file, with full rights (the client CA is then the whole access list).
    """

    def __init__(self, auth_file: ReloadingAuthFile | None = None, client_ca: bool = False) -> None:
        self._auth_file = auth_file
        self._client_ca = client_ca

    @classmethod
    def from_config(cls, config: Config) -> Authenticator:
        """The authenticator `config` asks for; AuthFileError when its auth file is unusable."""
        auth_file = ReloadingAuthFile(Path(config.auth_file)) if config.auth_file else None
        return cls(auth_file, client_ca=bool(config.tls_client_ca_file))

    @property
    def required(self) -> bool:
        """Whether callers must authenticate (an auth file or a client CA is configured)."""
        return self._auth_file is not None or self._client_ca

    def rights_table(self) -> AuthTable | None:
        """The auth file as now read (None without one): what the component inspector counts."""
        return self._auth_file.current() if self._auth_file is not None else None

    def authenticate(self, peer: PeerIdentity) -> Caller:
        if peer.trusted_socket:
            return TRUSTED_SOCKET_CALLER
        if not self.required:
            return ANONYMOUS
        table = self._auth_file.current() if self._auth_file is not None else None
        if peer.authorization is not None:
            token = bearer_token(peer.authorization)
            caller = table.caller_for_token(token) if table is not None else None
            if caller is None:
                raise UnauthenticatedError("the bearer token is not valid for this server")
            return caller
        if peer.certificate_verified:
            if table is None:
                return Caller(peer.common_name or "client-certificate", frozenset(), AuthMethod.MTLS, FULL_RIGHTS)
            caller = table.caller_for_certificate(peer.common_name, peer.subject_alternative_names)
            if caller is None:
                raise UnauthenticatedError(
                    f"the client certificate (common name {peer.common_name!r}) is not listed under certificates "
                    "in the server's auth file; send a bearer token or ask the operator to add it")
            return caller
        raise UnauthenticatedError("this server requires authentication: send the metadata "
                                   "'authorization: Bearer <token>' over TLS, or a client certificate")
