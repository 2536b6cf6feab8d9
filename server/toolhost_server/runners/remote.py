"""The remote runner: forwards a call to another toolhost (a worker pool, the pipeline service).

It propagates the deadline (the call's remaining budget), the trace context and a hop counter so a loop of
forwarding servers is refused; it never forwards the caller's metadata (credentials stay on this server) and
never retries: a tool call may have side effects, so only the caller may decide to call again.
The transport is injected (a RemoteCaller) because runners do not speak gRPC themselves.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..model import ToolSpec
from .base import Invocation, Runner, RunnerConfigError, RunnerSettings, RunOutcome, ToolFailure


@dataclass(frozen=True, slots=True)
class RemoteCall:
    """A call to forward: which tool on the remote, its arguments and this call's limits."""

    target: str
    tool: str
    arguments: Mapping[str, Any]
    call_id: str
    timeout_seconds: float
    hops: int
    trace_headers: Mapping[str, str] = field(default_factory=dict)


class RemoteCaller(Protocol):
    """Carries a RemoteCall to another toolhost and reports its result as a RunOutcome.

    Failures to reach the remote are RunOutcome failures with code REMOTE_UNAVAILABLE; a status the remote
    answered with is REMOTE_ERROR; its deadline passing is TIMEOUT.
    """

    async def call(self, request: RemoteCall) -> RunOutcome: ...


class RemoteRunner(Runner):
    kind = "remote"

    def __init__(self, target: str, remote_tool: str, caller: RemoteCaller | None) -> None:
        self.target = target
        self.remote_tool = remote_tool
        self._caller = caller

    @classmethod
    def from_config(cls, config: Mapping[str, Any], tool: ToolSpec, settings: RunnerSettings) -> RemoteRunner:
        target = config.get("target")
        if not isinstance(target, str) or not target.strip():
            raise RunnerConfigError("a remote runner needs `target:`, the other toolhost's gRPC address, for "
                                    "example dns:///pipeline:50051")
        remote_tool = config.get("tool", tool.name)
        if not isinstance(remote_tool, str) or not remote_tool:
            raise RunnerConfigError("runner.tool must be the tool's name on the remote toolhost")
        unknown = set(config) - {"type", "target", "tool"}
        if unknown:
            raise RunnerConfigError(f"unknown remote runner keys: {', '.join(sorted(unknown))}; "
                                    "allowed: target, tool")
        return cls(target.strip(), remote_tool, settings.remote_caller)

    async def run(self, invocation: Invocation) -> RunOutcome:
        if self._caller is None:
            # Only offline validation builds runners without a transport; a server always has one.
            return RunOutcome(failure=ToolFailure("REMOTE_UNAVAILABLE", "this process cannot forward calls"))
        return await self._caller.call(
            RemoteCall(
                target=self.target,
                tool=self.remote_tool,
                arguments=invocation.arguments,
                call_id=invocation.call_id,
                timeout_seconds=invocation.timeout_seconds,
                hops=invocation.hops + 1,
                trace_headers=invocation.trace_headers,
            )
        )
