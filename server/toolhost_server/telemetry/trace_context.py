"""W3C trace context in and out of a toolhost, and the ids of the current span.

Only `traceparent` and `tracestate` cross a toolhost (no baggage: the remote runner never forwards what a
caller sent beyond what tracing needs).
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import format_span_id, format_trace_id
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

TRACE_CONTEXT_KEYS = ("traceparent", "tracestate")
_PROPAGATOR = TraceContextTextMapPropagator()


def current_trace_ids() -> tuple[str, str]:
    """(trace id, span id) of the current span as lowercase hex, or ("", "") when there is none (tracing off)."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return "", ""
    return format_trace_id(context.trace_id), format_span_id(context.span_id)


def trace_id_of(span: trace.Span) -> str:
    """The span's trace id as 32 hex digits, or "" for a span without one (the no-op tracer's)."""
    context = span.get_span_context()
    return format_trace_id(context.trace_id) if context.is_valid else ""


_NO_PARENT = Context()


def parent_context(headers: Mapping[str, str]) -> Context:
    """The context a caller's `traceparent`/`tracestate` describe (an empty one when absent or malformed)."""
    return _PROPAGATOR.extract(headers) if headers else _NO_PARENT


def outgoing_trace_headers() -> dict[str, str]:
    """`traceparent` (and `tracestate`) naming the current span as the parent; empty when no span is current."""
    headers: dict[str, str] = {}
    _PROPAGATOR.inject(headers)
    return headers
