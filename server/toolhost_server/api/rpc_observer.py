"""Each RPC observed (health checks and reflection aside): its SERVER span and its Prometheus metrics.

The span, when tracing is on, is a child of the caller's `traceparent`, named
`toolhost.v1.ToolService/CallTool`, with rpc.system, rpc.service, rpc.method and rpc.grpc.status_code; status
ERROR for the codes that are the server's fault (OpenTelemetry's gRPC conventions), with the code's name as its
description. The metrics (requests by method and code, duration by method) are always recorded.

The handlers are wrapped once, as the services are registered (`ObservedRegistration`), not by a
grpc.aio.ServerInterceptor: an interceptor runs for every call and builds a new method handler each time, which
cost a noticeable part of a CallTool(echo) on this server.

Why not opentelemetry-instrumentation-grpc's `aio_server_interceptor`: run against this server it reported
rpc.grpc.status_code 0 and status UNSET for every refused call (its context wrapper does not see
`abort_with_status`, which every error here goes through), and recorded each refusal twice as an exception
event whose stack trace quotes the domain error, such as `/text: 12345 is not of type "string"`: an argument
value, which spans must not hold. It also names spans with a leading slash and adds the deprecated net.peer.*
attributes. The observer here reads the final code from the context, and records no exception.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import aclosing, nullcontext
from typing import Any, Final

import grpc
from google.protobuf.message import DecodeError
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from ..errors import InvalidRequestError
from ..telemetry import parent_context
from ..telemetry.metrics import ToolhostMetrics
from ..telemetry.trace_context import TRACE_CONTEXT_KEYS
from .status import status_of

_UNTRACED_SERVICES: Final = frozenset({
    "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection", "grpc.reflection.v1.ServerReflection"})
_SERVER_FAULTS: Final = frozenset({
    grpc.StatusCode.UNKNOWN, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNIMPLEMENTED,
    grpc.StatusCode.INTERNAL, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DATA_LOSS})


class RpcObserver:
    """Wraps a method's handler so that its whole run, streamed responses included, is one span (when `tracer`
    is given) and one observation in `metrics`."""

    def __init__(self, tracer: trace.Tracer | None, metrics: ToolhostMetrics) -> None:
        self._tracer = tracer
        self._metrics = metrics

    def wrap(self, service: str, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        if service in _UNTRACED_SERVICES:
            return handler
        rpc = _Rpc(self._tracer, self._metrics, service, method)
        if handler.response_streaming:
            behavior = handler.stream_stream if handler.request_streaming else handler.unary_stream
            factory = grpc.stream_stream_rpc_method_handler if handler.request_streaming else \
                grpc.unary_stream_rpc_method_handler
            wrapped: Any = _streaming(behavior, rpc)
        else:
            behavior = handler.stream_unary if handler.request_streaming else handler.unary_unary
            factory = grpc.stream_unary_rpc_method_handler if handler.request_streaming else \
                grpc.unary_unary_rpc_method_handler
            wrapped = _unary(behavior, rpc)
        deserializer = handler.request_deserializer if handler.request_streaming \
            else _marking_undecodable(handler.request_deserializer, method)
        return factory(wrapped, request_deserializer=deserializer,
                       response_serializer=_passing_bytes(handler.response_serializer))


class _Undecodable:
    """Stands for a request that is not a valid message (nested deeper than protobuf's limit of 100, or
    malformed): grpc would answer INTERNAL for a deserializer's exception, but it is the caller's mistake, so
    the wrapped handler answers INVALID_ARGUMENT instead."""

    __slots__ = ("status",)

    def __init__(self, error: DecodeError, method: str) -> None:
        self.status = status_of(InvalidRequestError(
            f"the request is not a valid message: {error}. Messages may nest at most 100 levels (a JSON value in "
            "a Struct takes two per level); send deep arguments as arguments_json"), method)


def _marking_undecodable(deserialize: Callable[[bytes], Any] | None, method: str) -> Callable[[bytes], Any] | None:
    if deserialize is None:
        return None

    def deserialize_or_mark(data: bytes) -> Any:
        try:
            return deserialize(data)
        except DecodeError as exc:
            return _Undecodable(exc, method)
    return deserialize_or_mark


def _passing_bytes(serialize: Callable[[Any], bytes] | None) -> Callable[[Any], bytes] | None:
    """The response serializer, except that a handler may return its response already serialized (ListTools
    sends pages it keeps serialized: parsing them into a message only for grpc to serialize it again cost
    most of a large page's time)."""
    if serialize is None:
        return None

    def serialize_unless_bytes(response: Any) -> bytes:
        return response if isinstance(response, bytes) else serialize(response)
    return serialize_unless_bytes


class ObservedRegistration:
    """Stands in for the server in a generated `add_XServicer_to_server(servicer, server)`: registers each
    method's handler wrapped by `observer`.

        ObservedRegistration(server, observer).add(add_ToolServiceServicer_to_server, ToolService(toolhost))

    The generated function hands over the handlers twice: as a generic handler (opaque, ignored here) and as
    the map of registered method handlers, which is wrapped and registered both ways.
    """

    def __init__(self, server: grpc.aio.Server, observer: RpcObserver) -> None:
        self._server = server
        self._observer = observer
        self._registered = False

    def add(self, add_to_server: Callable[[Any, Any], None], servicer: Any) -> None:
        self._registered = False
        add_to_server(servicer, self)
        if not self._registered:
            raise RuntimeError(f"{add_to_server.__name__} registered no method handlers: the generated code no "
                               "longer calls add_registered_method_handlers; update ObservedRegistration")

    def add_generic_rpc_handlers(self, generic_handlers: Any) -> None:
        pass  # the same handlers come again, by name, in add_registered_method_handlers

    def add_registered_method_handlers(self, service: str, handlers: Mapping[str, grpc.RpcMethodHandler]) -> None:
        wrapped = {name: self._observer.wrap(service, name, handler) for name, handler in handlers.items()}
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, wrapped),))
        self._server.add_registered_method_handlers(service, wrapped)
        self._registered = True


class _Rpc:
    """One method's name, attributes and where its observations go; starts the span of each call, under the
    caller's trace context when it sent one."""

    def __init__(self, tracer: trace.Tracer | None, metrics: ToolhostMetrics, service: str, method: str) -> None:
        self.tracer = tracer
        self.metrics = metrics
        self.name = f"{service}/{method}"
        self._attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": method}

    def start_span(self, context: grpc.aio.ServicerContext, tracer: trace.Tracer) -> trace.Span:
        metadata = context.invocation_metadata() or ()
        headers = {key: str(value) for key, value in metadata if key in TRACE_CONTEXT_KEYS}
        return tracer.start_span(self.name, context=parent_context(headers), kind=SpanKind.SERVER,
                                 attributes=self._attributes, record_exception=False, set_status_on_exception=False)


def _unary(behavior: Callable[..., Awaitable[Any]], rpc: _Rpc) -> Callable[..., Awaitable[Any]]:
    tracer = rpc.tracer
    if tracer is None:
        async def measured(request: Any, context: grpc.aio.ServicerContext) -> Any:
            started = time.perf_counter()
            error: BaseException | None = None
            try:
                if type(request) is _Undecodable:
                    await context.abort_with_status(request.status)
                return await behavior(request, context)
            except BaseException as exc:
                error = exc
                raise
            finally:
                _end(trace.INVALID_SPAN, context, error, rpc, started)
        return measured

    async def traced(request: Any, context: grpc.aio.ServicerContext) -> Any:
        started = time.perf_counter()
        span = rpc.start_span(context, tracer)
        # Made current by hand, not with start_as_current_span: its generator-based context manager cost as
        # much as starting the span, on every call.
        token = otel_context.attach(trace.set_span_in_context(span))
        error: BaseException | None = None
        try:
            if type(request) is _Undecodable:
                await context.abort_with_status(request.status)
            return await behavior(request, context)
        except BaseException as exc:
            error = exc
            raise
        finally:
            _end(span, context, error, rpc, started)
            span.end()
            otel_context.detach(token)
    return traced


def _streaming(
    behavior: Callable[..., AsyncGenerator[Any, None]], rpc: _Rpc,
) -> Callable[..., AsyncIterator[Any]]:
    tracer = rpc.tracer

    async def traced(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        started = time.perf_counter()
        # grpc drives the generator from one task, so the span is made current and detached in that task.
        # No exception recorded on the span: its message can quote an argument value (the module docstring).
        span_context = trace.use_span(rpc.start_span(context, tracer), end_on_exit=True, record_exception=False,
                                      set_status_on_exception=False) if tracer is not None \
            else nullcontext(trace.INVALID_SPAN)
        with span_context as span:
            error: BaseException | None = None
            try:
                if type(request) is _Undecodable:
                    await context.abort_with_status(request.status)
                async with aclosing(behavior(request, context)) as responses:
                    async for response in responses:
                        yield response
            except BaseException as exc:
                error = exc
                raise
            finally:
                _end(span, context, error, rpc, started)
    return traced


def _end(span: trace.Span, context: grpc.aio.ServicerContext, error: BaseException | None, rpc: _Rpc,
         started: float) -> None:
    """Record the RPC's final code: the one the handler set or aborted with, else what gRPC will send."""
    code = context.code()
    if code is None:
        if error is None:
            code = grpc.StatusCode.OK
        elif isinstance(error, asyncio.CancelledError):
            code = grpc.StatusCode.CANCELLED
        else:
            code = grpc.StatusCode.UNKNOWN  # what grpc answers for an exception a handler let escape
    rpc.metrics.observe_rpc(rpc.name, code.name, time.perf_counter() - started)
    if not span.is_recording():
        return
    span.set_attribute("rpc.grpc.status_code", code.value[0])
    if code in _SERVER_FAULTS:
        span.set_status(Status(StatusCode.ERROR, code.name))
