"""W3C trace context in and out of a toolhost, and the ids of the current span.

Only `traceparent` and `tracestate` cross a toolhost (no baggage: the remote runner never forwards what a
caller sent beyond what tracing needs).

Every call has a trace id, traced or not. With tracing on it is the call's span's. With tracing off no span is
made (spans cost on every call); `UntracedCall.begin` gives the call the caller's trace id, or a new random
one, and makes it the current trace id of log lines until `end`. Its `forward_headers` are the `traceparent`
a remote hop gets, so that the next toolhost's records carry the same id.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Final

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import format_span_id, format_trace_id
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

TRACE_CONTEXT_KEYS = ("traceparent", "tracestate")
_PROPAGATOR = TraceContextTextMapPropagator()


# The trace id of the untraced call running in this context ("" outside one): log lines read it.
_UNTRACED_TRACE_ID: ContextVar[str] = ContextVar("toolhost_untraced_trace_id", default="")
# Trace and span ids only need to be random and unique, not secret (they are shown in logs and responses):
# drawn from a generator seeded once from the OS, as the OpenTelemetry SDK's own id generator does.
_ids = random.Random(os.urandom(32))
# version-trace_id-parent_id-flags, lowercase hex; a later version may append fields after a dash.
_TRACEPARENT: Final = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_INVALID_TRACE_ID: Final = "0" * 32
_INVALID_SPAN_ID: Final = "0" * 16


@dataclass(frozen=True, slots=True)
class UntracedCall:
    """The trace of a call that no span records: its id, whether the caller's trace is sampled (passed on as
    it came: this server made no decision of its own), and the caller's tracestate."""

    trace_id: str
    sampled: bool = False
    state: str = ""

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> UntracedCall:
        """The trace the caller's `traceparent` names, or a new one when it sent none or a malformed one (the
        W3C rule: a receiver that cannot parse it starts a new trace)."""
        parent = headers.get("traceparent", "") if headers else ""
        found = _TRACEPARENT.fullmatch(parent.strip()) if parent else None
        if found is None:
            return cls(new_trace_id())
        version, trace_id, span_id, flags, rest = found.groups()
        if version == "ff" or (version == "00" and rest) or trace_id == _INVALID_TRACE_ID \
                or span_id == _INVALID_SPAN_ID:
            return cls(new_trace_id())
        return cls(trace_id, bool(int(flags, 16) & 1), headers.get("tracestate", ""))

    def begin(self) -> Token[str]:
        """Make this the trace id of the log lines of the current context; give the token to `end`."""
        return _UNTRACED_TRACE_ID.set(self.trace_id)

    @staticmethod
    def end(token: Token[str]) -> None:
        _UNTRACED_TRACE_ID.reset(token)

    def forward_headers(self) -> dict[str, str]:
        """`traceparent` (and `tracestate`) for a call this one makes: the same trace, a new span id (this
        call's place in the trace, though no span records it), the caller's sampled flag."""
        headers = {"traceparent": f"00-{self.trace_id}-{_ids.getrandbits(64) or 1:016x}-"
                                  f"{'01' if self.sampled else '00'}"}
        if self.state:
            headers["tracestate"] = self.state
        return headers


def new_trace_id() -> str:
    """A random W3C trace id: 32 lowercase hex digits, never all zeros."""
    return f"{_ids.getrandbits(128) or 1:032x}"


def current_trace_ids() -> tuple[str, str]:
    """(trace id, span id) of the current span as lowercase hex; with tracing off the untraced call's trace id
    and no span id; ("", "") outside any call."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return _UNTRACED_TRACE_ID.get(), ""
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
