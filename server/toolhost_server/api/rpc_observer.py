"""Each RPC observed (health checks and reflection aside): its SERVER span and its Prometheus metrics.

The span, when tracing is on, is a child of the caller's `traceparent`, named
`toolhost.v1.ToolService/CallTool`, with rpc.system, rpc.service, rpc.method and rpc.grpc.status_code; status
ERROR for the codes that are the server's fault (OpenTelemetry's gRPC conventions), with the code's name as its
description. The metrics (requests by method and code, duration by method) are always recorded.

Why not opentelemetry-instrumentation-grpc's `aio_server_interceptor`: run against this server it reported
rpc.grpc.status_code 0 and status UNSET for every refused call (its context wrapper does not see
`abort_with_status`, which every error here goes through), and recorded each refusal twice as an exception
event whose stack trace quotes the domain error, such as `/text: 12345 is not of type "string"`: an argument
value, which spans must not hold. It also names spans with a leading slash and adds the deprecated net.peer.*
attributes. This interceptor reads the final code from the context, and records no exception.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing, nullcontext
from typing import Any, Final

import grpc
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from ..telemetry import parent_context
from ..telemetry.metrics import ToolhostMetrics
from ..telemetry.trace_context import TRACE_CONTEXT_KEYS

_UNTRACED_SERVICES: Final = frozenset({
    "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection", "grpc.reflection.v1.ServerReflection"})
_SERVER_FAULTS: Final = frozenset({
    grpc.StatusCode.UNKNOWN, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNIMPLEMENTED,
    grpc.StatusCode.INTERNAL, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DATA_LOSS})


class RpcObserver(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Wraps each observed method's handler so that its whole run, streamed responses included, is one span
    (when `tracer` is given) and one observation in `metrics`."""

    def __init__(self, tracer: trace.Tracer | None, metrics: ToolhostMetrics) -> None:
        self._tracer = tracer
        self._metrics = metrics

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        full_method = str(handler_call_details.method).lstrip("/")
        service, _, method = full_method.partition("/")
        if handler is None or service in _UNTRACED_SERVICES:
            return handler
        metadata = handler_call_details.invocation_metadata or ()
        headers = {key: str(value) for key, value in metadata if key in TRACE_CONTEXT_KEYS}
        span_of = _SpanStarter(self._tracer, self._metrics, full_method, service, method, headers)
        if handler.response_streaming:
            behavior = handler.stream_stream if handler.request_streaming else handler.unary_stream
            factory = grpc.stream_stream_rpc_method_handler if handler.request_streaming else \
                grpc.unary_stream_rpc_method_handler
            wrapped: Any = _streaming(behavior, span_of)
        else:
            behavior = handler.stream_unary if handler.request_streaming else handler.unary_unary
            factory = grpc.stream_unary_rpc_method_handler if handler.request_streaming else \
                grpc.unary_unary_rpc_method_handler
            wrapped = _unary(behavior, span_of)
        return factory(wrapped, request_deserializer=handler.request_deserializer,
                       response_serializer=handler.response_serializer)


class _SpanStarter:
    """Starts the span of one RPC as the current span, under the caller's trace context when it sent one."""

    def __init__(self, tracer: trace.Tracer | None, metrics: ToolhostMetrics, name: str, service: str, method: str,
                 headers: dict[str, str]) -> None:
        self._tracer = tracer
        self.metrics = metrics
        self.name = name
        self._attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": method}
        self._headers = headers
        self.started = time.perf_counter()

    def __call__(self) -> Any:
        self.started = time.perf_counter()
        if self._tracer is None:
            return nullcontext(trace.INVALID_SPAN)
        return self._tracer.start_as_current_span(
            self.name, context=parent_context(self._headers), kind=SpanKind.SERVER, attributes=self._attributes,
            record_exception=False, set_status_on_exception=False)


def _unary(behavior: Callable[..., Awaitable[Any]], span_of: _SpanStarter) -> Callable[..., Awaitable[Any]]:
    async def traced(request: Any, context: grpc.aio.ServicerContext) -> Any:
        with span_of() as span:
            error: BaseException | None = None
            try:
                return await behavior(request, context)
            except BaseException as exc:
                error = exc
                raise
            finally:
                _end(span, context, error, span_of)
    return traced


def _streaming(
    behavior: Callable[..., AsyncGenerator[Any, None]], span_of: _SpanStarter,
) -> Callable[..., AsyncIterator[Any]]:
    async def traced(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        # grpc drives the generator from one task, so the span is made current and detached in that task.
        with span_of() as span:
            error: BaseException | None = None
            try:
                async with aclosing(behavior(request, context)) as responses:
                    async for response in responses:
                        yield response
            except BaseException as exc:
                error = exc
                raise
            finally:
                _end(span, context, error, span_of)
    return traced


def _end(span: trace.Span, context: grpc.aio.ServicerContext, error: BaseException | None,
         rpc: _SpanStarter) -> None:
    """Record the RPC's final code: the one the handler set or aborted with, else what gRPC will send."""
    code = context.code()
    if code is None:
        if error is None:
            code = grpc.StatusCode.OK
        elif isinstance(error, asyncio.CancelledError):
            code = grpc.StatusCode.CANCELLED
        else:
            code = grpc.StatusCode.UNKNOWN  # what grpc answers for an exception a handler let escape
    rpc.metrics.observe_rpc(rpc.name, code.name, time.perf_counter() - rpc.started)
    if not span.is_recording():
        return
    span.set_attribute("rpc.grpc.status_code", code.value[0])
    if code in _SERVER_FAULTS:
        span.set_status(Status(StatusCode.ERROR, code.name))
