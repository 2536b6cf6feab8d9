"""toolhost.v1.LogService over grpc.aio: the log inspector's queries and follows (the core checks the rights)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing

import grpc

from toolhost.v1 import log_service_pb2, log_service_pb2_grpc

from ..app import Toolhost
from ..auth import Caller
from ..auth.rights import Right
from .authentication import authenticate
from .log_messages import log_filter, log_record_message, query_logs_response
from .rights import requires
from .status import status_of, translate_errors

LOG_SERVICE_NAME = log_service_pb2.DESCRIPTOR.services_by_name["LogService"].full_name


class LogService(log_service_pb2_grpc.LogServiceServicer):
    def __init__(self, toolhost: Toolhost) -> None:
        self._toolhost = toolhost

    def _caller(self, context: grpc.aio.ServicerContext) -> Caller:
        return authenticate(self._toolhost.authenticator, context, self._toolhost.config.trusted_unix_socket)

    @requires(Right.ADMIN)
    @translate_errors
    async def QueryLogs(
        self, request: log_service_pb2.QueryLogsRequest, context: grpc.aio.ServicerContext
    ) -> log_service_pb2.QueryLogsResponse:
        page = await self._toolhost.query_logs(
            self._caller(context), log_filter(request.filter), request.page_size, request.page_token)
        return query_logs_response(page)

    @requires(Right.ADMIN)
    async def TailLogs(
        self, request: log_service_pb2.TailLogsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[log_service_pb2.TailLogsResponse]:
        # When the client cancels, grpc cancels this generator, and closing the follower stops its polling.
        try:
            follower = self._toolhost.follow_logs(self._caller(context), log_filter(request.filter), request.backlog)
            async with aclosing(follower) as records:
                async for record in records:
                    yield log_service_pb2.TailLogsResponse(record=log_record_message(record))
        except Exception as exc:
            await context.abort_with_status(status_of(exc, "TailLogs"))
