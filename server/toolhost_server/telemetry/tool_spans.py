"""The `execute_tool {name}` span of each call, after the OpenTelemetry GenAI conventions for tool execution.

Attributes say which tool ran, for which call and how it ended; never an argument value, an output or a
secret: argument keys and sizes only. toolhost's own attributes are under `toolhost.`.

    with start_tool_span(tracer, name, call_id) as span:
        record_arguments(span, arguments, request.arguments_json)
        ...
        record_outcome(span, outcome, redacted)      # or record_refusal(span, "TOOL_NOT_FOUND")
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from ..model import ToolSpec
from ..runners.base import RunOutcome

# The GenAI names (gen_ai.*) moved out of opentelemetry-semantic-conventions into their own repository; they
# are spelled out here rather than imported from the deprecated constants.
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
GEN_AI_TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
ERROR_TYPE: Final = "error.type"
EXECUTE_TOOL: Final = "execute_tool"

OUTCOME: Final = "toolhost.outcome"
RUNNER: Final = "toolhost.runner"
ARGUMENT_KEYS: Final = "toolhost.argument_keys"
ARGUMENT_KEY_COUNT: Final = "toolhost.argument_key_count"
ARGUMENTS_SIZE: Final = "toolhost.arguments.size_bytes"
OUTPUT_SIZE: Final = "toolhost.output.size_bytes"
ORIGINAL_SIZE: Final = "toolhost.output.original_size_bytes"
TRUNCATED: Final = "toolhost.truncated"
REDACTED: Final = "toolhost.redacted"
EXIT_CODE: Final = "toolhost.exit_code"


def start_tool_span(tracer: trace.Tracer, tool_name: str, call_id: str) -> AbstractContextManager[trace.Span]:
    """The call's span, current inside the `with` (so runner spans and a tool's own events land in it)."""
    if isinstance(tracer, trace.NoOpTracer):
        # Tracing off: a no-op span would record nothing either; this skips making it current (a few µs a call).
        return nullcontext(trace.INVALID_SPAN)
    current = trace.get_current_span()
    context = current.get_span_context()
    if context.is_valid and not context.trace_flags.sampled and not current.is_recording():
        # The RPC's span was not sampled, so a child would record nothing either (the samplers decide by the
        # parent or by the same trace id); the RPC's span stays current and carries the trace id and its
        # not-sampled flag on to remote toolhosts. Skipping it saves a span per unsampled call.
        return nullcontext(current)
    return tracer.start_as_current_span(
        f"{EXECUTE_TOOL} {tool_name}", kind=SpanKind.INTERNAL,
        attributes={GEN_AI_OPERATION_NAME: EXECUTE_TOOL, GEN_AI_TOOL_NAME: tool_name, GEN_AI_TOOL_CALL_ID: call_id,
                    # "function": the caller chose the arguments, and this server, not the model, runs the tool.
                    GEN_AI_TOOL_TYPE: "function"},
        # Exception messages can quote argument values; failures are recorded by code (record_refusal).
        record_exception=False, set_status_on_exception=False)


def record_arguments(span: trace.Span, keys: Sequence[str], key_count: int, arguments_json: str | None,
                     arguments: Mapping[str, Any] | None = None) -> None:
    """The argument keys as records keep them (at most 64, cut: request_checks.recorded_keys), how many there
    were, and the size of the arguments as JSON (as sent, when they came as JSON text)."""
    if span.is_recording():
        text = arguments_json if arguments_json is not None else json.dumps(arguments or {}, default=str)
        span.set_attributes({ARGUMENT_KEYS: list(keys), ARGUMENT_KEY_COUNT: key_count,
                             ARGUMENTS_SIZE: len(text.encode("utf-8", "replace"))})


def record_tool(span: trace.Span, spec: ToolSpec, runner_kind: str) -> None:
    if span.is_recording():
        span.set_attributes({GEN_AI_TOOL_DESCRIPTION: spec.description, RUNNER: runner_kind})


def record_outcome(span: trace.Span, outcome: RunOutcome, redacted: bool) -> None:
    """How a tool that ran ended: OK, or its error code with the span's status ERROR."""
    if not span.is_recording():
        return
    attributes: dict[str, Any] = {
        OUTCOME: "OK" if outcome.failure is None else outcome.failure.code,
        TRUNCATED: outcome.truncated,
        REDACTED: redacted,
        OUTPUT_SIZE: len(outcome.output.encode("utf-8", "surrogatepass")),
    }
    if outcome.truncated:
        attributes[ORIGINAL_SIZE] = outcome.original_size_bytes
    if outcome.exit_code is not None:
        attributes[EXIT_CODE] = outcome.exit_code
    span.set_attributes(attributes)
    if outcome.failure is not None:
        _set_error(span, outcome.failure.code)


def record_refusal(span: trace.Span, reason: str) -> None:
    """A call that did not run (unknown tool, bad arguments, over capacity...) or failed inside the server."""
    if span.is_recording():
        span.set_attribute(OUTCOME, reason)
        _set_error(span, reason)


def _set_error(span: trace.Span, code: str) -> None:
    # The code, not the message: messages can quote a process's last stderr line or an argument.
    span.set_attribute(ERROR_TYPE, code)
    span.set_status(Status(StatusCode.ERROR, code))

