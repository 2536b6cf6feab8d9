"""The one place where domain errors become gRPC status (AIP-193: code, ErrorInfo, BadRequest, RetryInfo).

The store's errors (store.errors.StoreError) are no domain errors, but a request may meet one: they leave as
UNAVAILABLE, reason STORE_UNAVAILABLE (or STORE_OUTCOME_UNKNOWN when a commit's fate is unknown), with an incident
id to quote; where the store is (a path, a URL) stays in the server's log.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

import grpc
from google.protobuf import any_pb2
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

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

logger = logging.getLogger("toolhost.api")

ERROR_DOMAIN = "toolhost"

_CODES: dict[type[ToolhostError], grpc.StatusCode] = {
    ToolNotFoundError: grpc.StatusCode.NOT_FOUND,
    InvalidArgumentsError: grpc.StatusCode.INVALID_ARGUMENT,
    InvalidRequestError: grpc.StatusCode.INVALID_ARGUMENT,
    InvalidPageTokenError: grpc.StatusCode.INVALID_ARGUMENT,
    HopLimitExceededError: grpc.StatusCode.FAILED_PRECONDITION,
    OverCapacityError: grpc.StatusCode.RESOURCE_EXHAUSTED,
    CallerDeadlineExceeded: grpc.StatusCode.DEADLINE_EXCEEDED,
    ShuttingDownError: grpc.StatusCode.UNAVAILABLE,
    UnauthenticatedError: grpc.StatusCode.UNAUTHENTICATED,
    PermissionDeniedError: grpc.StatusCode.PERMISSION_DENIED,
    AlreadyExistsError: grpc.StatusCode.ALREADY_EXISTS,
    ResourceNotFoundError: grpc.StatusCode.NOT_FOUND,
    FailedPreconditionError: grpc.StatusCode.FAILED_PRECONDITION,
}


def _pack(message: Message) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


def status_of(exc: BaseException, method: str) -> grpc.Status:
    """The status to send for an exception raised while serving `method`."""
    if isinstance(exc, ToolhostError):
        # The nearest listed class: a subclass (UnsafePathError) is reported as its base is.
        code = next((_CODES[k] for k in type(exc).__mro__ if k in _CODES), grpc.StatusCode.INTERNAL)
        message, reason = exc.message, exc.reason
        metadata = {"method": method}
        if isinstance(exc, ToolNotFoundError):
            # The close names, comma-separated (no tool name holds a comma), so that a client can offer them in
            # its own words, as the CLI does.
            metadata["tool"] = exc.name
            metadata["suggestions"] = ",".join(exc.suggestions)
        details = [_pack(error_details_pb2.ErrorInfo(reason=reason, domain=ERROR_DOMAIN, metadata=metadata))]
        if isinstance(exc, (InvalidArgumentsError, InvalidFieldsError)):
            violations = [
                error_details_pb2.BadRequest.FieldViolation(field=v.pointer, description=v.reason)
                for v in exc.violations
            ]
            details.append(_pack(error_details_pb2.BadRequest(field_violations=violations)))
        if isinstance(exc, OverCapacityError):
            delay = Duration()
            delay.FromTimedelta(timedelta(seconds=exc.retry_after_seconds))
            details.append(_pack(error_details_pb2.RetryInfo(retry_delay=delay)))
    elif isinstance(exc, StoreError):
        code, message, reason, metadata = grpc.StatusCode.UNAVAILABLE, *_store_failure(exc, method)
        details = [_pack(error_details_pb2.ErrorInfo(reason=reason, domain=ERROR_DOMAIN, metadata=metadata))]
    else:
        # Internal errors keep their detail in the log; the caller gets an id to quote.
        incident = uuid.uuid4().hex[:12]
        logger.error("internal error in %s (incident %s)", method, incident, exc_info=exc)
        code = grpc.StatusCode.INTERNAL
        message = f"internal error (incident {incident}); the server log has the detail"
        details = [_pack(error_details_pb2.ErrorInfo(reason="INTERNAL", domain=ERROR_DOMAIN,
                                                     metadata={"method": method, "incident": incident}))]
    status = status_pb2.Status(code=getattr(code_pb2, code.name), message=message, details=details)
    return rpc_status.to_status(status)


def _store_failure(exc: StoreError, method: str) -> tuple[str, str, dict[str, str]]:
    """The message, reason and ErrorInfo metadata of a store that failed a request; the store's own message (which
    names the database) is logged under an incident id."""
    incident = uuid.uuid4().hex[:12]
    logger.warning("the store failed %s (incident %s): %s", method, incident, exc)
    metadata = {"method": method, "incident": incident}
    if isinstance(exc, StoreCommitUnknownError):
        return (f"the connection to the server's database broke while the change was committed, so whether it was "
                f"kept is unknown: read it back before retrying (incident {incident}; the server log has the "
                f"detail)"), "STORE_OUTCOME_UNKNOWN", metadata
    return (f"the server's database cannot be used now; retry later (incident {incident}; the server log has the "
            f"detail)"), "STORE_UNAVAILABLE", metadata


Request = TypeVar("Request")
Response = TypeVar("Response")
Servicer = TypeVar("Servicer")


def translate_errors(
    handler: Callable[[Servicer, Request, grpc.aio.ServicerContext], Awaitable[Response]],
) -> Callable[[Servicer, Request, grpc.aio.ServicerContext], Awaitable[Response]]:
    """Wrap a unary handler so that every exception it raises leaves as the status `status_of` gives."""
    method = handler.__name__

    @functools.wraps(handler)
    async def wrapper(self: Servicer, request: Request, context: grpc.aio.ServicerContext) -> Response:
        try:
            return await handler(self, request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            await context.abort_with_status(status_of(exc, method))
            raise AssertionError("abort_with_status returned") from exc  # it always raises

    return wrapper
