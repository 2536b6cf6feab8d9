"""OpenTelemetry for toolhost: tracing set up from OTEL_* variables, call spans, redacted export.

    tracing = Tracing.from_environment(learning_redactor)     # TracingConfigError when OTEL_* ask the impossible
    tracing.tracer                                             # a no-op tracer when tracing is off
    current_trace_ids()                                        # ("4bf9...", "00f0..."), for log lines
    UntracedCall.from_headers(headers)                         # a call's trace id when tracing is off
    tracing.close()                                            # exports what is waiting

Modules: `tracing` (setup), `redacting_exporter`, `tool_spans` (the execute_tool span), `trace_context` (W3C
propagation and ids). The gRPC server span is made in `toolhost_server.api.rpc_observer` (only api/ speaks gRPC).
"""

from __future__ import annotations

from .redacting_exporter import RedactingSpanExporter, redact_span
from .trace_context import (
    UntracedCall,
    current_trace_ids,
    new_trace_id,
    outgoing_trace_headers,
    parent_context,
    trace_id_of,
)
from .tracing import Tracing, TracingConfigError

__all__ = [
    "RedactingSpanExporter",
    "Tracing",
    "TracingConfigError",
    "UntracedCall",
    "current_trace_ids",
    "new_trace_id",
    "outgoing_trace_headers",
    "parent_context",
    "redact_span",
    "trace_id_of",
]
