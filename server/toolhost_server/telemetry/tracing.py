"""Tracing of one server, set up from the standard OTEL_* variables: where spans go, and the tracer that makes them.

Each Toolhost owns its TracerProvider (tests run several servers in one process, and a provider cannot be
swapped once it is global). What is exported passes the server's redactor first (RedactingSpanExporter).

    OTEL_TRACES_EXPORTER          otlp | console | none (default: otlp when an endpoint is set, else none)
    OTEL_EXPORTER_OTLP_ENDPOINT   http://collector:4317 (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
    OTEL_EXPORTER_OTLP_PROTOCOL   grpc only (or OTEL_EXPORTER_OTLP_TRACES_PROTOCOL)
    OTEL_SERVICE_NAME             default "toolhost"
    OTEL_BSP_MAX_QUEUE_SIZE       spans waiting for export, at most (default 2048); more are dropped and counted
    OTEL_TRACES_SAMPLER(_ARG), OTEL_BSP_*, OTEL_EXPORTER_OTLP_HEADERS/TIMEOUT/CERTIFICATE...: read by the SDK

A collector that is down or never answers holds up only the export thread: ended spans wait in a queue of at most
OTEL_BSP_MAX_QUEUE_SIZE spans (ExportQueue), beyond which they are dropped and counted, so calls never wait for
it and the memory it costs stays bounded.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from opentelemetry import context, trace
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter, SpanExportResult

from .. import __version__
from ..sanitize import LearningRedactor
from .redacting_exporter import RedactingSpanExporter

logger = logging.getLogger("toolhost.telemetry")

DEFAULT_SERVICE_NAME: Final = "toolhost"
_EXPORTERS: Final = ("otlp", "console", "none")
_ENDPOINT_VARIABLES: Final = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_PROTOCOL_VARIABLES: Final = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
_QUEUE_SIZE_VARIABLE: Final = "OTEL_BSP_MAX_QUEUE_SIZE"
DEFAULT_MAX_QUEUE_SIZE: Final = 2048  # the SDK's and the specification's default
_DROP_LOG_INTERVAL_SECONDS: Final = 60.0


class TracingConfigError(Exception):
    """The OTEL_* variables ask for something this server cannot do; the message names the variable."""


@dataclass(frozen=True, slots=True)
class ExportQueueStats:
    """The spans an ExportQueue holds now, its bound, and how many it dropped so far, for metrics."""

    queued: int
    capacity: int
    dropped: int


class ExportQueue(SpanProcessor):
    """The SDK's BatchSpanProcessor, with its queue's bound kept and its drops counted here.

    The SDK's queue drops the oldest span when full and logs a warning for each: a collector that is down would
    fill the log at the rate of calls. Here a span that finds `max_queue_size` spans waiting is dropped before
    the queue, counted in `dropped`, and logged once a minute at most::

        queue = ExportQueue(exporter, max_queue_size=2048)
        provider.add_span_processor(queue)
        queue.stats()      # ExportQueueStats(queued=12, capacity=2048, dropped=0)

    What waits is counted as the spans handed to the batch processor less those it handed on to the exporter
    (each export call is counted as it starts), so the count is never below the batch processor's queue: that
    queue never overflows, and the memory held stays at most `max_queue_size` spans plus the batch in export.
    """

    def __init__(self, exporter: SpanExporter, max_queue_size: int = DEFAULT_MAX_QUEUE_SIZE) -> None:
        self._capacity = max_queue_size
        self._lock = threading.Lock()
        self._accepted = 0
        self._handed_on = 0
        self._dropped = 0
        self._last_drop_logged = -math.inf
        # The SDK reads OTEL_BSP_SCHEDULE_DELAY and OTEL_BSP_MAX_EXPORT_BATCH_SIZE itself.
        self._batches = BatchSpanProcessor(_HandOffCounter(exporter, self._handed_to_exporter),
                                           max_queue_size=max_queue_size)

    def stats(self) -> ExportQueueStats:
        with self._lock:
            return ExportQueueStats(self._accepted - self._handed_on, self._capacity, self._dropped)

    def on_start(self, span: Span, parent_context: context.Context | None = None) -> None:
        self._batches.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if not (span.context and span.context.trace_flags.sampled):
            return  # the batch processor ignores it too: it must not count as waiting
        with self._lock:
            full = self._accepted - self._handed_on >= self._capacity
            if full:
                self._dropped += 1
            else:
                self._accepted += 1
        if not full:
            self._batches.on_end(span)
            return
        now = time.monotonic()
        if now - self._last_drop_logged >= _DROP_LOG_INTERVAL_SECONDS:
            self._last_drop_logged = now
            logger.warning("%d spans dropped so far: more than %s=%d wait for export (counted in "
                           "toolhost_spans_dropped_total); check that the OTLP collector runs and answers",
                           self._dropped, _QUEUE_SIZE_VARIABLE, self._capacity)

    def _handed_to_exporter(self, count: int) -> None:
        with self._lock:
            self._handed_on += count

    def shutdown(self) -> None:
        self._batches.shutdown()  # type: ignore[no-untyped-call]  # the SDK leaves it unannotated

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._batches.force_flush(timeout_millis)


class _HandOffCounter(SpanExporter):
    """Tells `counted` how many spans each export takes out of the batch processor's queue, then exports them."""

    def __init__(self, exporter: SpanExporter, counted: Callable[[int], None]) -> None:
        self._exporter = exporter
        self._counted = counted

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self._counted(len(spans))
        return self._exporter.export(spans)

    def shutdown(self) -> None:
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._exporter.force_flush(timeout_millis)


class Tracing:
    """A server's tracer and, when tracing is on, the provider behind it. `close()` exports what is waiting.

    Off, `tracer` is OpenTelemetry's no-op tracer: its spans record nothing, cost little and carry no ids.
    """

    def __init__(self, provider: TracerProvider | None, exporter_name: str = "none",
                 export_queue: ExportQueue | None = None) -> None:
        self._provider = provider
        self.exporter_name = exporter_name
        self.export_queue = export_queue
        """Where ended spans wait for the exporter (None when tracing is off): its stats() are the metrics'."""
        self.tracer: trace.Tracer = (
            provider.get_tracer("toolhost_server", __version__) if provider is not None else trace.NoOpTracer())

    @property
    def enabled(self) -> bool:
        return self._provider is not None

    @classmethod
    def from_environment(cls, redactor: LearningRedactor) -> Tracing:
        """Tracing as the process's OTEL_* variables ask (the SDK reads them there too); TracingConfigError
        when they ask for an exporter or protocol that is not available."""
        environ = os.environ
        exporter_name = _exporter_name(environ)
        if exporter_name == "none" or _is_true(environ.get("OTEL_SDK_DISABLED", "")):
            return cls(None)
        exporter = _otlp_exporter(environ) if exporter_name == "otlp" else ConsoleSpanExporter()
        try:
            export_queue = ExportQueue(RedactingSpanExporter(exporter, redactor), _max_queue_size(environ))
        except ValueError as exc:  # the SDK's check of the OTEL_BSP_* numbers against each other
            raise TracingConfigError(f"the OTEL_BSP_* variables do not fit together ({exc}): set "
                                     "OTEL_BSP_MAX_EXPORT_BATCH_SIZE (default 512) no larger than "
                                     f"{_QUEUE_SIZE_VARIABLE}") from None
        # The SDK reads OTEL_TRACES_SAMPLER(_ARG) here.
        provider = TracerProvider(resource=_resource(), shutdown_on_exit=False)
        provider.add_span_processor(export_queue)
        return cls(provider, exporter_name, export_queue)

    def describe(self) -> str:
        """For the start-up log: where spans go."""
        if self._provider is None:
            return "tracing off (set OTEL_EXPORTER_OTLP_ENDPOINT, or OTEL_TRACES_EXPORTER=console)"
        if self.exporter_name == "console":
            return "tracing to the console (stdout)"
        endpoint = next((os.environ[v] for v in _ENDPOINT_VARIABLES if os.environ.get(v)), "localhost:4317")
        return f"tracing over OTLP/gRPC to {endpoint}"

    def flush(self, timeout_seconds: float = 5.0) -> bool:
        """Export the spans that ended so far; True when all were handed to the exporter in time."""
        if self._provider is None:
            return True
        return self._provider.force_flush(int(timeout_seconds * 1000))

    def close(self) -> None:
        """Export what is waiting and stop the export thread; spans started later record nothing."""
        if self._provider is not None:
            self._provider.shutdown()


def _exporter_name(environ: Mapping[str, str]) -> str:
    requested = [name.strip().lower() for name in environ.get("OTEL_TRACES_EXPORTER", "").split(",") if name.strip()]
    if not requested:
        # Unlike the SDK's default (always OTLP), nothing is exported unless somewhere to send it was given.
        return "otlp" if any(environ.get(v) for v in _ENDPOINT_VARIABLES) else "none"
    unknown = [name for name in requested if name not in _EXPORTERS]
    if unknown or len(requested) > 1:
        raise TracingConfigError(
            f"OTEL_TRACES_EXPORTER={environ['OTEL_TRACES_EXPORTER']!r}: toolhost exports spans to one of "
            f"{', '.join(_EXPORTERS)}")
    return requested[0]


def _max_queue_size(environ: Mapping[str, str]) -> int:
    text = environ.get(_QUEUE_SIZE_VARIABLE, "").strip()
    if not text:
        return DEFAULT_MAX_QUEUE_SIZE
    if not text.isdigit() or int(text) == 0:
        raise TracingConfigError(f"{_QUEUE_SIZE_VARIABLE}={text!r}: give the number of spans that may wait for "
                                 f"export, a positive integer (default {DEFAULT_MAX_QUEUE_SIZE})")
    return int(text)


def _otlp_exporter(environ: Mapping[str, str]) -> SpanExporter:
    for variable in _PROTOCOL_VARIABLES:
        protocol = environ.get(variable, "").strip()
        if not protocol:
            continue
        if protocol != "grpc":
            raise TracingConfigError(
                f"{variable}={protocol!r} is not supported: toolhost exports OTLP over gRPC only (the "
                "opentelemetry-exporter-otlp-proto-http package is not part of it); set it to grpc, or unset it, "
                "and point OTEL_EXPORTER_OTLP_ENDPOINT at the collector's gRPC port (usually 4317)")
        break  # the traces-specific variable wins over the general one
    # Imported here: it pulls in a gRPC client that a server without an OTLP endpoint never needs.
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    # It reads the endpoint (http:// means plaintext), headers, certificates, compression and timeout itself.
    return OTLPSpanExporter()


def _resource() -> Resource:
    """service.name from OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES, else "toolhost"; service.version ours."""
    resource = Resource.create({SERVICE_VERSION: __version__})
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    return resource


def _is_true(value: str) -> bool:
    return value.strip().lower() == "true"
