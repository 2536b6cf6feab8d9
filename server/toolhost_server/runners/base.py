"""The Runner contract: how a tool's call is carried out (in-process, as a subprocess, on another toolhost)."""

from __future__ import annotations

import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from opentelemetry import trace

from ..call_events import CallEvents
from ..credentials.resolved import NO_CREDENTIALS, ResolvedCredentials
from ..model import ToolSpec
from ..output_format import DEFAULT_RESULT_FORMAT, ResultFormat

if TYPE_CHECKING:
    from ..auth.caller import Caller
    from ..telemetry.trace_context import UntracedCall
    from ..tools.base import ToolServices
    from .remote import RemoteCaller


class RunnerConfigError(Exception):
    """A tool's `runner:` configuration cannot work; the message says why and how to fix it."""


@dataclass(frozen=True, slots=True)
class ToolFailure:
    """Why a tool that ran did not succeed: a code from ToolError's list and a message without secrets."""

    code: str
    message: str

    def with_valid_code(self) -> ToolFailure:
        """This failure, or TOOL_EXCEPTION when its code is not an upper-case identifier: a code a tool (or a
        remote toolhost) chose becomes an audit outcome, a span attribute and a metric label, where free text
        could carry a secret or grow the labels without bound."""
        if _FAILURE_CODE.fullmatch(self.code):
            return self
        return ToolFailure("TOOL_EXCEPTION", self.message)


# ToolError.code: TIMEOUT, NON_ZERO_EXIT, or a tool's own code in the same form.
_FAILURE_CODE = re.compile(r"[A-Z][A-Z0-9_]{0,63}")


@dataclass(slots=True)
class RunOutcome:
    """What a runner reports back. `structured` is any JSON value, or None when the tool returned none."""

    output: str = ""
    stderr: str = ""
    structured: Any = None
    exit_code: int | None = None
    failure: ToolFailure | None = None
    truncated: bool = False
    original_size_bytes: int = 0
    # The streams ("stdout", "stderr") cut at the output limit: their ends may hold the first part of a secret.
    cut_streams: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Invocation:
    """One call as a runner sees it: validated arguments and the time it may take.

    `timeout_seconds` is the whole budget; the pipeline also cancels the runner when it passes, so a runner
    only needs it to plan (a process runner kills its children in a `finally`, whatever ended the wait).
    `hops` counts how many toolhosts forwarded the call before this one. `untraced` is the call's trace when
    tracing is off (with tracing on, the current span is the call's place in its trace). `events`, set for a
    streamed call, takes progress and output as they come (a runner that has neither reports nothing).
    `credentials` are the ones the tool declares, resolved on this server for this call: a process gets them
    in its environment, never in argv; a Python tool as an object. `result_format` is how the caller wants the
    result written: the pipeline applies it; a runner that forwards the call passes it on.
    """

    tool: ToolSpec
    arguments: Mapping[str, Any]
    call_id: str
    timeout_seconds: float
    hops: int = 0
    untraced: UntracedCall | None = None
    events: CallEvents | None = None
    credentials: ResolvedCredentials = NO_CREDENTIALS
    result_format: ResultFormat = DEFAULT_RESULT_FORMAT
    # The authenticated caller with its rights: a Python tool gets it as ToolContext.authenticated_caller.
    caller: Caller | None = None


def _sync_tool_slots() -> threading.Semaphore:
    return threading.BoundedSemaphore(32)


@dataclass(frozen=True, slots=True)
class RunnerSettings:
    """Server-wide settings that runners read. Built once from the server's Config."""

    kill_grace_seconds: float = 2.0
    max_output_bytes: int = 1024 * 1024
    pipeline_target: str = ""
    # The transport of the remote runner; the API layer provides it (runners do not speak gRPC).
    remote_caller: RemoteCaller | None = None
    # The (uid, gid) process tools run as; None runs them as the server's own user. See Config.process_user.
    process_identity: tuple[int, int] | None = None
    # Where process calls get a cgroup each: "" the server's own cgroup when it may, a path, or "off".
    process_cgroup_parent: str = ""
    # Threads for sync Python tools, shared by every tool of the server.
    sync_tool_slots: threading.Semaphore = field(default_factory=_sync_tool_slots)
    # The server's tracer, for runners' own spans (a subprocess); the no-op tracer when tracing is off.
    tracer: trace.Tracer = field(default_factory=trace.NoOpTracer)
    # What the server offers Python tools in their ToolContext; None offers nothing (offline validation).
    tool_services: ToolServices | None = None


class Runner(ABC):
    """Carries out the calls of one tool. A Runner is built once per tool at load and reused by every call.

    Subclasses set `kind` (the `runner.type` they implement in catalog YAML) and validate their configuration in
    `from_config`, raising RunnerConfigError so that a bad catalog file is reported at load, not at call time::

        class EchoRunner(Runner):
            kind = "echo"

            @classmethod
            def from_config(cls, config, tool, settings):
                return cls()

            async def run(self, invocation):
                return RunOutcome(output=str(invocation.arguments.get("text", "")))

    `run` reports a failed tool as RunOutcome(failure=...), never by raising; an exception from `run` is an
    internal error. It must release everything it started (processes, connections) when it is cancelled.
    """

    kind: ClassVar[str]

    @classmethod
    @abstractmethod
    def from_config(cls, config: Mapping[str, Any], tool: ToolSpec, settings: RunnerSettings) -> Runner:
        """A runner for `tool`, or RunnerConfigError explaining what is wrong with `config`."""

    @abstractmethod
    async def run(self, invocation: Invocation) -> RunOutcome:
        """Carry out one call."""
