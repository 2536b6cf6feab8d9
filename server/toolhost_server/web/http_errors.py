"""The one place where what a REST request raised becomes an HTTP status and a JSON body.

    {"success": false, "error": "TOOL_NOT_FOUND", "error_message": "no tool named 'ecoh'; did you mean 'echo'? ...",
     "suggestions": ["echo"]}

`error` is the ErrorReason name gRPC's ErrorInfo carries (api/status.py); statuses follow google.rpc.Code's
HTTP mapping: a caller's mistake 400 (with `violations`, each field a JSON pointer into the request body, or a
query parameter's name), unknown tool 404, 401 with a Bearer challenge, 403, over capacity 429 with Retry-After,
draining (with Retry-After) or a database that cannot be used now 503, anything else 500 with an incident id (the
detail stays in the server log, as the store's address does). The guard's own refusals (403 Host/Origin, 413,
415) come before any of this, in its own shape.
"""

from __future__ import annotations

import logging
import math
import uuid
from dataclasses import dataclass, field
from typing import Any

from starlette.types import Scope

from ..errors import (
    AlreadyExistsError,
    CallerDeadlineExceeded,
    FailedPreconditionError,
    HopLimitExceededError,
    InvalidArgumentsError,
    InvalidFieldsError,
    InvalidPageTokenError,
    InvalidRequestError,
    OverCapacityError,
    PermissionDeniedError,
    ResourceNotFoundError,
    ShuttingDownError,
    ToolhostError,
    ToolNotFoundError,
    UnauthenticatedError,
)
from ..store.errors import StoreCommitUnknownError, StoreError
from .http_auth import authorization_of, challenge

logger = logging.getLogger("toolhost.http")

# What a 503 while draining says to wait: this server will not take the call again, another replica will now.
DRAINING_RETRY_AFTER_SECONDS = 1

_STATUSES: dict[type[ToolhostError], int] = {
    InvalidArgumentsError: 400,
    InvalidRequestError: 400,
    InvalidPageTokenError: 400,
    HopLimitExceededError: 400,
    FailedPreconditionError: 400,
    UnauthenticatedError: 401,
    PermissionDeniedError: 403,
    ToolNotFoundError: 404,
    ResourceNotFoundError: 404,
    AlreadyExistsError: 409,
    OverCapacityError: 429,
    ShuttingDownError: 503,
    CallerDeadlineExceeded: 504,
}


@dataclass(frozen=True, slots=True)
class HttpError:
    """A refusal as it goes on the wire: status, JSON body and headers."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def http_error_of(exc: BaseException, scope: Scope, where: str, body_pointer: str = "") -> HttpError:
    """The answer to `exc`, raised while serving `where` (a route, for the log) the request of `scope`.
    `body_pointer` is where the tool's arguments sit in the request body ("/params"): prefixed to the JSON
    pointers of argument violations, so that each names a field of what the client sent."""
    if isinstance(exc, ToolhostError):
        return _refusal(exc, scope, body_pointer)
    incident = uuid.uuid4().hex[:12]
    if isinstance(exc, StoreError):
        logger.warning("the store failed %s (incident %s): %s", where, incident, exc)
        if isinstance(exc, StoreCommitUnknownError):
            return _body(503, "STORE_OUTCOME_UNKNOWN", "the connection to the server's database broke while the "
                         "change was committed, so whether it was kept is unknown: read it back before retrying "
                         f"(incident {incident}; the server log has the detail)")
        return _body(503, "STORE_UNAVAILABLE", f"the server's database cannot be used now; retry later (incident "
                     f"{incident}; the server log has the detail)")
    logger.error("internal error in %s (incident %s)", where, incident, exc_info=exc)
    return _body(500, "INTERNAL", f"internal error (incident {incident}); the server log has the detail")


def _refusal(exc: ToolhostError, scope: Scope, body_pointer: str) -> HttpError:
    # The nearest listed class: a subclass (UnsafePathError) is answered as its base is.
    status = next((_STATUSES[k] for k in type(exc).__mro__ if k in _STATUSES), 500)
    message = exc.message
    if isinstance(exc, UnauthenticatedError) and authorization_of(scope) is None:
        # The authenticator speaks of gRPC metadata; an HTTP client is told the header.
        message = "this server requires authentication: send the header 'Authorization: Bearer <token>' with a " \
                  "token from the server's auth file"
    error = _body(status, exc.reason, message)
    if isinstance(exc, InvalidArgumentsError):
        error.body["violations"] = [{"field": body_pointer + v.pointer, "reason": v.reason} for v in exc.violations]
    elif isinstance(exc, InvalidFieldsError):
        error.body["violations"] = [{"field": v.pointer, "reason": v.reason} for v in exc.violations]
    elif isinstance(exc, ToolNotFoundError):
        # Only names the caller may see (ToolNotFoundError's contract): a hidden tool's 404 is an unknown one's.
        error.body["suggestions"] = list(exc.suggestions)
    elif isinstance(exc, UnauthenticatedError):
        error.headers["WWW-Authenticate"] = challenge(scope)
    elif isinstance(exc, OverCapacityError):
        error.headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after_seconds)))
    elif isinstance(exc, ShuttingDownError):
        # A client or balancer that honours it retries soon, on a replica that is not draining (RFC 9110 15.6.4).
        error.headers["Retry-After"] = str(DRAINING_RETRY_AFTER_SECONDS)
    return error


def _body(status: int, error: str, message: str) -> HttpError:
    return HttpError(status, {"success": False, "error": error, "error_message": message})
