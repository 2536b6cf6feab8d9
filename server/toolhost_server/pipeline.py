"""The call pipeline: look the tool up, validate its arguments, run it within its time limits, report.

Every call, whichever surface it came from, goes through `CallPipeline.call`; the surfaces only translate.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import random
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace

from .audit import AuditRecord, AuditTrail
from .auth import ANONYMOUS, Caller, authorize_call, find_visible, generation_seen
from .call_events import CallEvent, EventBuffer, RedactingEvents
from .credentials import NO_CREDENTIALS, CredentialResolver, ResolvedCredentials
from .errors import (
    CallerDeadlineExceeded,
    HopLimitExceededError,
    InvalidRequestError,
    MissingCredentialsError,
    OverCapacityError,
    ShuttingDownError,
    ToolhostError,
)
from .event_waits import wait_set
from .model import ToolSpec
from .output_format import DEFAULT_RESULT_FORMAT, ResultFormat, formatted
from .registry import RegisteredTool, Registry
from .request_checks import (
    MAX_ARGUMENT_DEPTH,
    check_arguments,
    check_call_id,
    check_key_count,
    check_name,
    is_printable,
    is_valid_call_id,
    printable,
    recorded_keys,
)
from .runners import Invocation, RunOutcome, ToolFailure
from .sanitize import LearningRedactor, Redactor
from .telemetry import UntracedCall, trace_id_of
from .telemetry.metrics import ToolhostMetrics
from .telemetry.tool_spans import record_arguments, record_outcome, record_refusal, record_tool, start_tool_span

logger = logging.getLogger("toolhost.calls")
# Call ids only need to be unique, not unguessable (they are shown in logs and responses): drawn from a
# generator seeded once from the OS, not with uuid4's system call on every call.
_call_ids = random.Random(os.urandom(32))


def new_call_id() -> str:
    """32 hex digits, like a uuid4's."""
    return f"{_call_ids.getrandbits(128):032x}"


@dataclass(frozen=True, slots=True)
class CallRequest:
    """A call as the surfaces hand it over. Give `arguments` or `arguments_json`, not both.

    `caller_timeout_seconds` is what is left of the caller's deadline (None: no deadline). `caller` is who
    asked, as the surface authenticated it (by default anonymous with full rights). `result_format` is how the
    caller wants the result written (by default as the tool made it). `client_trace_id` is the caller's own
    correlation id when it is no W3C trace id (the REST API's `trace_id`; at most 128 printable ASCII characters,
    which that surface checks): kept in the audit record beside the call's trace id.
    """

    name: str
    arguments: Mapping[str, Any] | None = None
    arguments_json: str | None = None
    call_id: str = ""
    caller_timeout_seconds: float | None = None
    hops: int = 0
    trace_headers: Mapping[str, str] = field(default_factory=dict)
    caller: Caller = ANONYMOUS
    result_format: ResultFormat = DEFAULT_RESULT_FORMAT
    client_trace_id: str = ""


@dataclass(frozen=True, slots=True)
class CallResult:
    """What a call produced (the fields of CallToolResponse)."""

    success: bool
    tool: str
    call_id: str
    generation: int
    started_at: datetime
    duration_ms: float
    outcome: RunOutcome
    trace_id: str = ""
    redacted: bool = False

    @property
    def failure(self) -> ToolFailure | None:
        return self.outcome.failure


@dataclass(frozen=True, slots=True)
class PipelineSettings:
    """`max_call_seconds` bounds every call; a tool's own timeout can only be shorter. `max_output_bytes` is
    the server's output limit, which a result rendered in another format is cut at (unless the tool has its own).
    """

    max_call_seconds: float = 300.0
    max_hops: int = 8
    max_in_flight_calls: int = 256
    max_output_bytes: int = 1024 * 1024


class CallPipeline:
    def __init__(
        self, registry: Registry, settings: PipelineSettings, redactor: Redactor | LearningRedactor | None = None,
        audit: AuditTrail | None = None, credentials: CredentialResolver | None = None,
        tracer: trace.Tracer | None = None, metrics: ToolhostMetrics | None = None,
    ) -> None:
        self._registry = registry
        self._settings = settings
        # Learning: each call's credential values are hidden from then on in logs and spans too.
        if not isinstance(redactor, LearningRedactor):
            redactor = LearningRedactor(redactor or Redactor())
        self._redactor = redactor
        self._audit = audit or AuditTrail()
        # No sources by default: a tool that declares credentials then fails with MISSING_CREDENTIALS.
        self._credentials = credentials or CredentialResolver(())
        # Off by default: the no-op tracer's spans record nothing and carry no trace id.
        self._tracer = tracer or trace.NoOpTracer()
        self._metrics = metrics or ToolhostMetrics()
        self._accepting = True
        self._in_flight = 0
        self._in_flight_by_tool: dict[str, int] = {}
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def in_flight(self) -> int:
        """Calls between validation and result, including those still cleaning up after a cancel."""
        return self._in_flight

    @property
    def accepting(self) -> bool:
        """Whether new calls are taken (false once the server drains)."""
        return self._accepting

    def stop_accepting(self) -> None:
        """Refuse new calls from now on (the server is draining); running calls go on."""
        self._accepting = False

    async def wait_idle(self, within_seconds: float) -> bool:
        """Wait until no call is running, at most `within_seconds`; True when idle.

        gRPC cancels the calls left at the end of the shutdown grace, but their runners still need a moment to
        stop what they started (a process tree gets SIGTERM, then SIGKILL); the event loop must not close first.
        """
        return await wait_set(self._idle, within_seconds)

    def _admit(self, spec: ToolSpec) -> None:
        """Count the call in, or refuse it at once when a limit is reached (no queue: the caller retries)."""
        if self._in_flight >= self._settings.max_in_flight_calls:
            raise _over_capacity(f"the server is running {self._in_flight} calls, its limit (max_in_flight_calls)")
        running = self._in_flight_by_tool.get(spec.name, 0)
        if spec.max_concurrency is not None and running >= spec.max_concurrency:
            raise _over_capacity(f"tool {spec.name!r} is running {running} calls, its max_concurrency")
        self._in_flight += 1
        self._in_flight_by_tool[spec.name] = running + 1
        self._idle.clear()
        self._metrics.call_started(spec.name)

    def _release(self, spec: ToolSpec) -> None:
        self._metrics.call_released(spec.name)
        self._in_flight -= 1
        remaining = self._in_flight_by_tool[spec.name] - 1
        if remaining:
            self._in_flight_by_tool[spec.name] = remaining
        else:
            del self._in_flight_by_tool[spec.name]
        if self._in_flight == 0:
            self._idle.set()

    async def call(self, request: CallRequest) -> CallResult:
        """Run one call. Raises a ToolhostError for the caller's mistakes; a tool's failure is in the result."""
        return await self._execute(request, None)

    async def stream(self, request: CallRequest) -> AsyncGenerator[CallEvent | CallResult, None]:
        """Run one call, yielding its progress and output chunks as they come and last its CallResult.

        Raises like `call`, before anything is yielded when the call cannot start. Closing the iterator early
        (the caller went away) cancels the call, which stops the tool.
        """
        events = EventBuffer()
        task = asyncio.create_task(self._execute(request, events.put), name=f"stream-call-{request.name}")

        def end_of_events(done: asyncio.Task[CallResult]) -> None:
            events.close()
            if not done.cancelled():
                done.exception()  # retrieved here: a caller gone early must not leave a "never retrieved" warning

        task.add_done_callback(end_of_events)
        try:
            while (event := await events.get()) is not None:
                yield event
            yield task.result()
        finally:
            # The runner stops its processes whatever cancels it; the task finishes that on its own.
            task.cancel()

    async def _execute(self, request: CallRequest, deliver: Callable[[CallEvent], None] | None) -> CallResult:
        """Run the call in its execute_tool span; however it ends, leave its audit record and, for a tool this
        server serves, its metrics (a name nobody serves is no metric label: callers could grow them unbounded)."""
        # A call id or name that cannot be recorded as it is (request_checks) is refused below; its audit
        # record and span get a new id and the name escaped.
        name_ok, call_id_ok = is_printable(request.name), is_valid_call_id(request.call_id)
        call_id = request.call_id if request.call_id and call_id_ok else new_call_id()
        name = request.name if name_ok else printable(request.name)
        started_at = datetime.now(UTC)
        started = time.perf_counter()
        argument_keys: tuple[str, ...] = ()
        key_count = 0
        outcome = "CANCELLED"
        served = ""
        result: CallResult | None = None
        with start_tool_span(self._tracer, name, call_id) as span:
            trace_id = trace_id_of(span)
            # Tracing off: no span, but the call still has a trace id, for its response, audit and log lines.
            untraced = UntracedCall.from_headers(request.trace_headers) if not trace_id else None
            untraced_token = None
            if untraced is not None:
                trace_id = untraced.trace_id
                untraced_token = untraced.begin()
            try:
                if not name_ok:
                    check_name(request.name)  # raises, saying what is wrong
                if not call_id_ok:
                    check_call_id(request.call_id)
                arguments = _arguments_of(request)
                key_count = len(arguments)
                argument_keys = recorded_keys(arguments)  # for an unknown tool's record
                tool, generation = self._look_up(request, span)
                try:
                    check_key_count(tool.spec.name, arguments, tool.spec.input_schema)
                except ToolhostError:
                    argument_keys = ()  # refused for its keys: the record keeps their count only
                    raise
                record_arguments(span, argument_keys, key_count, request.arguments_json, arguments)
                check_arguments(arguments)
                served = tool.spec.name
                result = await self._run(tool, generation, request, arguments, call_id, started_at, started,
                                         deliver, span, trace_id, untraced)
                outcome = "OK" if result.failure is None else result.failure.code
                return result
            except ToolhostError as exc:
                outcome = exc.reason
                record_refusal(span, outcome)
                raise
            except Exception:
                outcome = "INTERNAL"
                record_refusal(span, outcome)
                raise
            except asyncio.CancelledError:
                record_refusal(span, outcome)
                raise
            finally:
                seconds = time.perf_counter() - started
                caller = request.caller
                self._audit.record(AuditRecord(
                    time=started_at, caller=caller.name, auth_method=caller.method.value, tool=name,
                    call_id=call_id, trace_id=trace_id, duration_ms=seconds * 1000, outcome=outcome,
                    argument_keys=argument_keys, argument_key_count=key_count,
                    client_trace_id=request.client_trace_id))
                if served:
                    truncated = result.outcome.truncated if result is not None else False
                    redacted = result.redacted if result is not None else False
                    self._metrics.call_finished(served, outcome, seconds, truncated, redacted)
                if untraced_token is not None:
                    UntracedCall.end(untraced_token)

    def _look_up(self, request: CallRequest, span: trace.Span) -> tuple[RegisteredTool, int]:
        """The tool to run and the generation that serves it (as the caller sees it), or the refusal."""
        if not self._accepting:
            raise ShuttingDownError("the server is shutting down; retry on another replica")
        if not request.name:
            raise InvalidRequestError("name is required: the name of the tool to call (ListTools shows them)")
        if request.hops > self._settings.max_hops:
            raise HopLimitExceededError(
                f"the call was forwarded {request.hops} times (limit {self._settings.max_hops}); the remote "
                "runners' targets form a loop")
        snapshot = self._registry.snapshot
        # Authorize: a tool the caller may not see is NOT_FOUND exactly as an unknown one; one it sees but may
        # not run is PERMISSION_DENIED.
        tool = find_visible(snapshot, request.caller, request.name)
        record_tool(span, tool.spec, tool.runner.kind)
        authorize_call(request.caller, tool.spec)
        return tool, generation_seen(self._registry, request.caller)

    async def _run(
        self, tool: RegisteredTool, generation: int, request: CallRequest, arguments: Mapping[str, Any],
        call_id: str, started_at: datetime, started: float, deliver: Callable[[CallEvent], None] | None,
        span: trace.Span, trace_id: str, untraced: UntracedCall | None,
    ) -> CallResult:
        arguments = tool.validator.prepare(tool.spec.name, arguments)
        tool_limit = min(tool.spec.timeout_seconds or self._settings.max_call_seconds, self._settings.max_call_seconds)
        caller_limit = request.caller_timeout_seconds
        budget = tool_limit if caller_limit is None else min(tool_limit, caller_limit)
        redactor = self._redactor.current
        events: RedactingEvents | None = None
        self._admit(tool.spec)
        try:
            async with asyncio.timeout(budget):
                credentials = await self._credentials_of(tool.spec, call_id) if tool.spec.credentials \
                    else NO_CREDENTIALS
                if isinstance(credentials, ToolFailure):
                    outcome = RunOutcome(failure=credentials)
                else:
                    if credentials:
                        # From here on the call's own secrets are hidden too, in every form.
                        redactor = self._redactor.learn(credentials.values())
                    events = RedactingEvents(redactor, deliver) if deliver is not None else None
                    outcome = await tool.runner.run(Invocation(
                        tool.spec, arguments, call_id, budget, request.hops, untraced, events, credentials,
                        request.result_format, caller=request.caller))
        except TimeoutError:
            if caller_limit is not None and caller_limit <= tool_limit:
                raise CallerDeadlineExceeded(
                    f"the caller's deadline of {caller_limit:.3f}s passed before tool {tool.spec.name!r} "
                    "finished") from None
            outcome = RunOutcome(failure=ToolFailure(
                "TIMEOUT", f"tool {tool.spec.name!r} ran longer than its {tool_limit:g}s limit and was stopped"))
        finally:
            self._release(tool.spec)
        # A tool may have resolved credentials during its run (ToolServices.resolve_credentials): the redactor
        # learned them, so its latest form (which still hides all the call's declared ones) is used.
        redactor = self._redactor.current
        if outcome.failure is not None:
            outcome.failure = outcome.failure.with_valid_code()
        streamed_redacted = events.finish(outcome.cut_streams) if events is not None else False
        outcome, redacted = _redact(outcome, redactor)
        redacted = redacted or streamed_redacted
        record_outcome(span, outcome, redacted)
        # After redaction, so a rendering is made of what the caller may see; the span keeps the tool's outcome.
        outcome = formatted(outcome, request.result_format,
                            tool.spec.max_output_bytes or self._settings.max_output_bytes)
        return CallResult(
            success=outcome.failure is None,
            tool=tool.spec.name,
            call_id=call_id,
            generation=generation,
            started_at=started_at,
            duration_ms=(time.perf_counter() - started) * 1000,
            outcome=outcome,
            trace_id=trace_id,
            redacted=redacted,
        )

    async def _credentials_of(self, spec: ToolSpec, call_id: str) -> ResolvedCredentials | ToolFailure:
        """The credentials the tool declares, or the MISSING_CREDENTIALS failure naming those that are not."""
        try:
            return await self._credentials.resolve(spec.credentials)
        except MissingCredentialsError as exc:
            # Where the server looked (paths, database) is for the operator's log, not for the caller.
            logger.warning("call %s of tool %s: %s", call_id, spec.name, exc.message)
            return ToolFailure(exc.code, _missing_credentials(spec.name, exc))

def _redact(outcome: RunOutcome, redactor: Redactor) -> tuple[RunOutcome, bool]:
    """The outcome with secrets replaced in everything the caller will see, and whether any were."""
    output = redactor.redact_text(_without_cut_secret(outcome.output, "stdout" in outcome.cut_streams, redactor))
    stderr = redactor.redact_text(_without_cut_secret(outcome.stderr, "stderr" in outcome.cut_streams, redactor))
    structured = redactor.redact_value(outcome.structured)
    failure = outcome.failure
    failure_redacted = False
    if failure is not None:
        message = redactor.redact_text(failure.message)
        # A code holding a secret (a credential shaped like a code) is no code: it would become an audit outcome,
        # a span attribute and a metric label, none of which a redacted "[REDACTED]" code may be either.
        code_redacted = redactor.redact_text(failure.code).redacted
        code = "TOOL_EXCEPTION" if code_redacted else failure.code
        failure = ToolFailure(code, _shortened(message.value, redactor))
        failure_redacted = message.redacted or code_redacted
    redacted = output.redacted or stderr.redacted or structured.redacted or failure_redacted
    if not redacted and not outcome.cut_streams and failure == outcome.failure:
        return outcome, False
    return dataclasses.replace(outcome, output=output.value, stderr=stderr.value, structured=structured.value,
                               failure=failure), redacted


# A failure message quotes what a tool wrote (a process's last stderr line); it is cut to this many characters,
# after redaction, so that no secret the cut would have split survives unrecognised.
MAX_FAILURE_MESSAGE_CHARS = 500


def _shortened(message: str, redactor: Redactor) -> str:
    if len(message) <= MAX_FAILURE_MESSAGE_CHARS:
        return message
    cut = message[:MAX_FAILURE_MESSAGE_CHARS - 1]
    return cut[:redactor.safe_end(cut)].rstrip() + "…"


def _missing_credentials(tool: str, exc: MissingCredentialsError) -> str:
    names = ", ".join(exc.names)
    return (f"tool {tool!r} needs credentials this server has no value for: {names}. An operator provides them as "
            "TOOLHOST_CRED_<NAME>_<KEY> variables, <name>.<key> files in credentials_dir, or with `toolhost "
            "credentials set`; the server log says where it looked")


def _without_cut_secret(text: str, cut: bool, redactor: Redactor) -> str:
    """A stream cut at the output limit loses what may be the first part of a secret (Redactor.safe_end)."""
    return text[:redactor.safe_end(text)] if cut else text


def _over_capacity(what: str) -> OverCapacityError:
    return OverCapacityError(f"{what}; retry in a moment")


def _arguments_of(request: CallRequest) -> Mapping[str, Any]:
    if request.arguments_json is not None and request.arguments is not None:
        raise InvalidRequestError("give arguments or arguments_json, not both")
    if request.arguments_json is not None:
        if not request.arguments_json.strip():
            return {}
        try:
            parsed = json.loads(request.arguments_json)
        except json.JSONDecodeError as exc:
            raise InvalidRequestError(f"arguments_json is not valid JSON: {exc}") from None
        except ValueError:  # valid JSON, but a number longer than Python converts (sys.get_int_max_str_digits)
            raise InvalidRequestError(
                "arguments_json holds a number of thousands of digits, more than the server reads; send it as a "
                "string") from None
        except RecursionError:
            raise InvalidRequestError(
                f"arguments_json is nested more than {MAX_ARGUMENT_DEPTH} levels deep; flatten it") from None
        if not isinstance(parsed, dict):
            raise InvalidRequestError("arguments_json must be a JSON object such as {\"host\": \"example.com\"}")
        return parsed
    return request.arguments or {}

