"""Tracing of one server, set up from the standard OTEL_* variables: where spans go, and the tracer that makes them.

Each Toolhost owns its TracerProvider (tests run several servers in one process, and a provider cannot be
swapped once it is global). What is exported passes the server's redactor first (RedactingSpanExporter).

    OTEL_TRACES_EXPORTER          otlp | console | none (default: otlp when an endpoint is set, else none)
    OTEL_EXPORTER_OTLP_ENDPOINT   http://collector:4317 (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
    OTEL_EXPORTER_OTLP_PROTOCOL   grpc only (or OTEL_EXPORTER_OTLP_TRACES_PROTOCOL)
    OTEL_SERVICE_NAME             default "toolhost"
    OTEL_TRACES_SAMPLER(_ARG), OTEL_BSP_*, OTEL_EXPORTER_OTLP_HEADERS/TIMEOUT/CERTIFICATE...: read by the SDK
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Final

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from .. import __version__
from ..sanitize import LearningRedactor
from .redacting_exporter import RedactingSpanExporter

logger = logging.getLogger("toolhost.telemetry")

DEFAULT_SERVICE_NAME: Final = "toolhost"
_EXPORTERS: Final = ("otlp", "console", "none")
_ENDPOINT_VARIABLES: Final = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_PROTOCOL_VARIABLES: Final = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")


class TracingConfigError(Exception):
    """The OTEL_* variables ask for something this server cannot do; the message names the variable."""


class Tracing:
    """A server's tracer and, when tracing is on, the provider behind it. `close()` exports what is waiting.

    Off, `tracer` is OpenTelemetry's no-op tracer: its spans record nothing, cost little and carry no ids.
    """

    def __init__(self, provider: TracerProvider | None, exporter_name: str = "none") -> None:
        self._provider = provider
        self.exporter_name = exporter_name
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
        # The SDK reads OTEL_TRACES_SAMPLER(_ARG) here, and OTEL_BSP_* in the batch processor.
        provider = TracerProvider(resource=_resource(), shutdown_on_exit=False)
        provider.add_span_processor(BatchSpanProcessor(RedactingSpanExporter(exporter, redactor)))
        return cls(provider, exporter_name)

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
