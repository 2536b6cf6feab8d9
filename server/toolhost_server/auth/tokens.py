"""Bearer tokens: how they are hashed for the auth file, and how one is read from an authorization header.

The auth file holds unsalted SHA-256 hashes. That is safe only because tokens are long and random (at least
MIN_TOKEN_LENGTH characters, such as `secrets.token_urlsafe(32)`): nobody can guess one from its hash, and a
dictionary of likely tokens does not exist. A salted slow hash would protect short passwords, which toolhost
does not accept.
"""

from __future__ import annotations

import hashlib

from ..errors import UnauthenticatedError

MIN_TOKEN_LENGTH = 32
_SCHEME = "bearer"


def hash_token(token: str) -> str:
    """The SHA-256 hex digest of `token`, as the auth file stores it."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def token_problem(token: str) -> str | None:
    """Why `token` cannot be a toolhost token, or None when it can."""
    if len(token) < MIN_TOKEN_LENGTH:
        return (f"a token must be at least {MIN_TOKEN_LENGTH} characters of random text (it is {len(token)}); "
                "make one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'")
    if any(c.isspace() for c in token) or not token.isprintable():
        return "a token must not contain spaces or control characters"
    return None


def bearer_token(authorization: str) -> str:
    """The token of an `authorization: Bearer <token>` header; UnauthenticatedError for anything else."""
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != _SCHEME or not token:
        raise UnauthenticatedError("the authorization metadata must be 'Bearer <token>'")
    if token_problem(token) is not None:
        # Short or malformed: it cannot be one of ours, whatever the auth file holds.
        raise UnauthenticatedError("the bearer token is not valid for this server")
    return token
