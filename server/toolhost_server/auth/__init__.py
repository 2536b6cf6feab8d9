"""Authentication and authorization: who a caller is (tokens, client certificates, the trusted unix socket)
and which tools it may see and call. Plain Python; api/ reads the peer's credentials from gRPC."""

from .auth_file import AuthFileError, AuthTable, read_auth_file
from .authenticator import Authenticator, PeerIdentity
from .caller import ANONYMOUS, TRUSTED_SOCKET_CALLER, AuthMethod, Caller
from .exposure import UnsafeExposureError, check_exposure, is_loopback_host, shell_refusal
from .permissions import FULL_RIGHTS, Permissions, ToolSet
from .policy import (
    authorize_call,
    find_visible,
    is_admin,
    may_call,
    may_see,
    require_admin,
    require_right,
    visible_names,
)
from .tokens import MIN_TOKEN_LENGTH, hash_token, token_problem
from .visible_changes import generation_seen, view_of

__all__ = [
    "ANONYMOUS",
    "FULL_RIGHTS",
    "MIN_TOKEN_LENGTH",
    "TRUSTED_SOCKET_CALLER",
    "AuthFileError",
    "AuthMethod",
    "AuthTable",
    "Authenticator",
    "Caller",
    "PeerIdentity",
    "Permissions",
    "ToolSet",
    "UnsafeExposureError",
    "authorize_call",
    "check_exposure",
    "find_visible",
    "generation_seen",
    "hash_token",
    "is_admin",
    "is_loopback_host",
    "may_call",
    "may_see",
    "read_auth_file",
    "require_admin",
    "require_right",
    "shell_refusal",
    "token_problem",
    "view_of",
    "visible_names",
]
