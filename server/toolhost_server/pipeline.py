"""The call pipeline: look the tool up, validate its arguments, run it within its time limits, report.

Every call, whichever surface it came from, goes through `CallPipeline.call`; the surfaces only translate.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .errors import (
    CallerDeadlineExceeded,
    HopLimitExceededError,
    InvalidRequestError,
    OverCapacityError,
    ShuttingDownError,
)
from .model import ToolSpec
from .registry import Registry
from .runners import Invocation, RunOutcome, ToolFailure
from .sanitize import Redactor

logger = logging.getLogger("toolhost.calls")


@dataclass(frozen=True, slots=True)
class CallRequest:
    """A call as the surfaces hand it over. Give `arguments` or `arguments_json`, not both.

    `caller_timeout_seconds` is what is left of the caller's deadline (None: no deadline).
    """

    name: str
    arguments: Mapping[str, Any] | None = None
    arguments_json: str | None = None
    call_id: str = ""
    caller_timeout_seconds: float | None = None
    hops: int = 0
    trace_headers: Mapping[str, str] = field(default_factory=dict)


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
    """`max_call_seconds` bounds every call; a tool's own timeout can only be shorter."""

    max_call_seconds: float = 300.0
    max_hops: int = 8
    max_in_flight_calls: int = 256


class CallPipeline:
    def __init__(self, registry: Registry, settings: PipelineSettings, redactor: Redactor | None = None) -> None:
        self._registry = registry
        self._settings = settings
        self._redactor = redactor or Redactor()
        self._accepting = True
        self._in_flight = 0
        self._in_flight_by_tool: dict[str, int] = {}
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def in_flight(self) -> int:
        """Calls between validation and result, including those still cleaning up after a cancel."""
        return self._in_flight

    def stop_accepting(self) -> None:
        """Refuse new calls from now on (the server is draining); running calls go on."""
        self._accepting = False

    async def wait_idle(self, within_seconds: float) -> bool:
        """Wait until no call is running, at most `within_seconds`; True when idle.

        gRPC cancels the calls left at the end of the shutdown grace, but their runners still need a moment to
        stop what they started (a process tree gets SIGTERM, then SIGKILL); the event loop must not close first.
        """
        try:
            await asyncio.wait_for(self._idle.wait(), within_seconds)
        except TimeoutError:
            return False
        return True

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

    def _release(self, spec: ToolSpec) -> None:
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
        if not self._accepting:
            raise ShuttingDownError("the server is shutting down; retry on another replica")
        if not request.name:
            raise InvalidRequestError("name is required: the name of the tool to call (ListTools shows them)")
        if request.hops > self._settings.max_hops:
            raise HopLimitExceededError(
                f"the call was forwarded {request.hops} times (limit {self._settings.max_hops}); the remote "
                "runners' targets form a loop")
        snapshot = self._registry.snapshot
        tool = snapshot.get(request.name)
        arguments = tool.validator.prepare(tool.spec.name, _arguments_of(request))
        call_id = request.call_id or uuid.uuid4().hex
        started_at = datetime.now(UTC)
        started = time.perf_counter()

        tool_limit = min(tool.spec.timeout_seconds or self._settings.max_call_seconds, self._settings.max_call_seconds)
        caller_limit = request.caller_timeout_seconds
        budget = tool_limit if caller_limit is None else min(tool_limit, caller_limit)
        invocation = Invocation(tool.spec, arguments, call_id, budget, request.hops, request.trace_headers)
        self._admit(tool.spec)
        try:
            async with asyncio.timeout(budget):
                outcome = await tool.runner.run(invocation)
        except TimeoutError:
            if caller_limit is not None and caller_limit <= tool_limit:
                raise CallerDeadlineExceeded(
                    f"the caller's deadline of {caller_limit:.3f}s passed before tool {tool.spec.name!r} "
                    "finished") from None
            outcome = RunOutcome(failure=ToolFailure(
                "TIMEOUT", f"tool {tool.spec.name!r} ran longer than its {tool_limit:g}s limit and was stopped"))
        finally:
            self._release(tool.spec)
        outcome, redacted = _redact(outcome, self._redactor)
        duration_ms = (time.perf_counter() - started) * 1000
        return CallResult(
            success=outcome.failure is None,
            tool=tool.spec.name,
            call_id=call_id,
            generation=snapshot.generation,
            started_at=started_at,
            duration_ms=duration_ms,
            outcome=outcome,
            redacted=redacted,
        )


def _redact(outcome: RunOutcome, redactor: Redactor) -> tuple[RunOutcome, bool]:
    """The outcome with secrets replaced in everything the caller will see, and whether any were."""
    output = redactor.redact_text(outcome.output)
    stderr = redactor.redact_text(outcome.stderr)
    structured = redactor.redact_value(outcome.structured)
    failure = outcome.failure
    failure_redacted = False
    if failure is not None:
        message = redactor.redact_text(failure.message)
        failure, failure_redacted = ToolFailure(failure.code, message.value), message.redacted
    redacted = output.redacted or stderr.redacted or structured.redacted or failure_redacted
    if not redacted:
        return outcome, False
    return dataclasses.replace(outcome, output=output.value, stderr=stderr.value, structured=structured.value,
                               failure=failure), True


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
        if not isinstance(parsed, dict):
            raise InvalidRequestError("arguments_json must be a JSON object such as {\"host\": \"example.com\"}")
        return parsed
    return request.arguments or {}
