"""An OTLP/gRPC trace receiver on 127.0.0.1, standing in for a collector: it keeps every export request as it
came and every span decoded, so a test can wait for spans and read exactly what the server exported.

    async with otlp_receiver() as (receiver, endpoint):   # endpoint: for OTEL_EXPORTER_OTLP_ENDPOINT
        ... a server exports to endpoint ...
        spans = await receiver.trace(trace_id, 2)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Status

from helpers.waiting import HANG_GUARD_SECONDS, within


@dataclass
class ExportedSpan:
    """One span as the receiver got it, ids in hex and attributes decoded."""

    service: str
    name: str
    kind: int
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    status_code: int = Status.STATUS_CODE_UNSET
    status_message: str = ""


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, which) if which else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


class SpanReceiver(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP trace receiver: keeps every span it is sent, and the requests as they came."""

    def __init__(self) -> None:
        self.spans: list[ExportedSpan] = []
        self.raw: list[bytes] = []
        # Set by every export, so that a waiter looks at the spans again only when new ones came.
        self._exported = asyncio.Event()

    async def Export(self, request: trace_service_pb2.ExportTraceServiceRequest, context: Any) -> Any:
        self.raw.append(request.SerializeToString())
        for resource_spans in request.resource_spans:
            service = _attributes(resource_spans.resource.attributes).get("service.name", "")
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append(ExportedSpan(
                        service, span.name, span.kind, span.trace_id.hex(), span.span_id.hex(),
                        span.parent_span_id.hex(), _attributes(span.attributes),
                        [(event.name, _attributes(event.attributes)) for event in span.events],
                        span.status.code, span.status.message))
        self._exported.set()
        return trace_service_pb2.ExportTraceServiceResponse()

    @property
    def requests(self) -> list[trace_service_pb2.ExportTraceServiceRequest]:
        """Every export request received, decoded again from the bytes that came."""
        return [trace_service_pb2.ExportTraceServiceRequest.FromString(raw) for raw in self.raw]

    async def wait_for(self, matches: Callable[[list[ExportedSpan]], bool],
                       timeout: float = HANG_GUARD_SECONDS) -> list[ExportedSpan]:
        """The spans, once an export made `matches` true (checked after each export, not on a clock)."""
        async def exported_enough() -> None:
            while True:
                self._exported.clear()  # before the check: an export after it sets the event again
                if matches(self.spans):
                    return
                await self._exported.wait()

        await within(exported_enough(), "the spans the test waits for", timeout)
        return self.spans

    async def trace(self, trace_id: str, count: int) -> list[ExportedSpan]:
        """The spans of one trace, once `count` of them have arrived."""
        spans = await self.wait_for(lambda spans: len([s for s in spans if s.trace_id == trace_id]) >= count)
        return [s for s in spans if s.trace_id == trace_id]


@asynccontextmanager
async def otlp_receiver() -> AsyncIterator[tuple[SpanReceiver, str]]:
    """A SpanReceiver served on a free port of 127.0.0.1, and its endpoint URL (`http://`: plaintext)."""
    receiver = SpanReceiver()
    server = grpc.aio.server()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(receiver, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield receiver, f"http://127.0.0.1:{port}"
    finally:
        await server.stop(0)
