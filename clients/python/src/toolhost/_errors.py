"""The exceptions the client raises: every gRPC error from toolhost becomes one of these, in one place.

    ToolhostError                    any gRPC error (.code .message .reason .metadata .field_violations ...)
     ├── InvalidArgumentError        INVALID_ARGUMENT: bad arguments (see .field_violations) or bad request
     ├── NotFoundError               NOT_FOUND: no tool by that name; the message suggests close names
     ├── DeadlineExceededError       DEADLINE_EXCEEDED: the call's deadline (the client's timeout) passed
     ├── ResourceExhaustedError      RESOURCE_EXHAUSTED: the server is at capacity; retry after .retry_delay
     ├── UnavailableError            UNAVAILABLE: the server cannot be reached, is shutting down, or its
     │                               database is down (.reason STORE_UNAVAILABLE)
     ├── PermissionDeniedError       PERMISSION_DENIED
     ├── UnauthenticatedError        UNAUTHENTICATED
     ├── FailedPreconditionError     FAILED_PRECONDITION: for example a forwarding loop between toolhosts
     ├── AlreadyExistsError          ALREADY_EXISTS: a user tool's slug is taken
     └── InternalError               INTERNAL: the server's log has the detail (the message names an incident)

Any other status code (CANCELLED, UNIMPLEMENTED, ...) raises the base ToolhostError.

A tool that ran and failed is not an exception: `ToolResult.success` is False and `ToolResult.error` says why.

`.reason` is the ErrorInfo reason the server sent, one of the ErrorReason values (for example
`ErrorReason.TOOL_NOT_FOUND`), or None when the error did not come from toolhost (a local deadline, a refused
connection).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

__all__ = [
    "AlreadyExistsError",
    "DeadlineExceededError",
    "ErrorReason",
    "FailedPreconditionError",
    "FieldViolation",
    "InternalError",
    "InvalidArgumentError",
    "NotFoundError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "ToolhostError",
    "UnauthenticatedError",
    "UnavailableError",
    "error_from_rpc",
]

ERROR_DOMAIN = "toolhost"


class ErrorReason(str, enum.Enum):  # noqa: UP042 - StrEnum needs Python 3.11; the client supports 3.10
    """The `reason` values toolhost puts in google.rpc.ErrorInfo: the names of toolhost.v1.ErrorReason
    without the "ERROR_REASON_" prefix. Members compare equal to the plain strings."""

    TOOL_NOT_FOUND = "TOOL_NOT_FOUND"
    INVALID_ARGUMENTS = "INVALID_ARGUMENTS"
    INVALID_REQUEST = "INVALID_REQUEST"
    INVALID_PAGE_TOKEN = "INVALID_PAGE_TOKEN"
    OVER_CAPACITY = "OVER_CAPACITY"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    HOP_LIMIT_EXCEEDED = "HOP_LIMIT_EXCEEDED"
    SHUTTING_DOWN = "SHUTTING_DOWN"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    INTERNAL = "INTERNAL"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    RESOURCE_NOT_FOUND = "RESOURCE_NOT_FOUND"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    STORE_UNAVAILABLE = "STORE_UNAVAILABLE"
    STORE_OUTCOME_UNKNOWN = "STORE_OUTCOME_UNKNOWN"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class FieldViolation:
    """One problem with a request: `field` is a JSON pointer into the arguments (for example "/name")."""

    field: str
    description: str


class ToolhostError(Exception):
    """A gRPC error from toolhost (or from the connection to it), decoded."""

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        *,
        reason: str | None = None,
        metadata: Mapping[str, str] | None = None,
        field_violations: Sequence[FieldViolation] = (),
        retry_delay: float | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason
        self.metadata: dict[str, str] = dict(metadata or {})
        self.field_violations: list[FieldViolation] = list(field_violations)
        self.retry_delay = retry_delay

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}(code={self.code.name}, reason={self.reason!r}, message={self.message!r})"


class InvalidArgumentError(ToolhostError):
    """INVALID_ARGUMENT: the arguments do not fit the tool's schema, or the request is malformed."""


class NotFoundError(ToolhostError):
    """NOT_FOUND: no tool has the requested name (reason TOOL_NOT_FOUND), or no user tool, version or conflict
    is what the request names (RESOURCE_NOT_FOUND)."""


class DeadlineExceededError(ToolhostError):
    """DEADLINE_EXCEEDED: the call's deadline passed before the tool finished."""


class ResourceExhaustedError(ToolhostError):
    """RESOURCE_EXHAUSTED: the server is over capacity; `retry_delay` says when to try again."""


class UnavailableError(ToolhostError):
    """UNAVAILABLE: the server cannot be reached, it is shutting down (reason SHUTTING_DOWN), or its database
    cannot be used now (STORE_UNAVAILABLE: retry later; STORE_OUTCOME_UNKNOWN: read back before retrying)."""


class PermissionDeniedError(ToolhostError):
    """PERMISSION_DENIED: the caller may not do this."""


class UnauthenticatedError(ToolhostError):
    """UNAUTHENTICATED: the caller did not prove who it is."""


class FailedPreconditionError(ToolhostError):
    """FAILED_PRECONDITION: for example a call forwarded between toolhosts in a loop, or enabling a user tool
    that is incompatible with an enabled one."""


class AlreadyExistsError(ToolhostError):
    """ALREADY_EXISTS: what the request would create exists already (a user tool's slug is another tool's)."""


class InternalError(ToolhostError):
    """INTERNAL: the server failed in a way the caller cannot fix."""


_ERRORS_BY_CODE: dict[grpc.StatusCode, type[ToolhostError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExistsError,
    grpc.StatusCode.INTERNAL: InternalError,
}


def error_from_rpc(error: grpc.RpcError) -> ToolhostError:
    """The typed exception for a gRPC error from a sync or grpc.aio call, its rich status decoded."""
    # An RpcError raised by a call is also a grpc.Call; guard anyway, since RpcError itself promises nothing.
    code_of = getattr(error, "code", None)
    details_of = getattr(error, "details", None)
    code: grpc.StatusCode = code_of() if callable(code_of) else grpc.StatusCode.UNKNOWN
    message = (details_of() if callable(details_of) else None) or str(error)
    reason: str | None = None
    metadata: dict[str, str] = {}
    violations: list[FieldViolation] = []
    retry_delay: float | None = None
    try:
        status = rpc_status.from_call(error)
    except (ValueError, AttributeError, TypeError):
        # Details that disagree with the code, or an error that is not a call: keep code and message.
        status = None
    for detail in status.details if status is not None else ():
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            if reason is None:
                reason = info.reason
                metadata = dict(info.metadata)
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad_request = error_details_pb2.BadRequest()
            detail.Unpack(bad_request)
            violations.extend(FieldViolation(v.field, v.description) for v in bad_request.field_violations)
        elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            detail.Unpack(retry)
            retry_delay = retry.retry_delay.ToTimedelta().total_seconds()
    cls = _ERRORS_BY_CODE.get(code, ToolhostError)
    return cls(code, message, reason=reason, metadata=metadata, field_violations=violations,
               retry_delay=retry_delay)
