"""The remote runner: forwards a call to another toolhost (a worker pool, the pipeline service).

    runner:
      type: remote
      target: dns:///workers.tools.svc:50051   # or `self`: this server's own gRPC address, wherever it listens
      tool: dns_lookup                     # optional: the name on the remote (default: this tool's)
      tls: {ca_file: /etc/toolhost/ca.pem, cert_file: ..., key_file: ..., server_name: ...}  # all optional
      token_credential: workers            # send credentials["workers"]["token"] as a bearer token
    credentials: [workers]                 # the tool declares what the runner sends

It propagates the deadline (the call's remaining budget), the W3C trace context, the caller's output format and
filtering of empty fields, and a hop counter so a loop of forwarding servers is refused. The trace context
names the current span (the call's execute_tool span) as the parent, so the remote's spans join this call's
trace; a server that does not trace passes on the caller's context unchanged, so it does not cut a trace in
two. It never forwards the caller's other metadata (credentials stay on this server) and never retries: a
tool call may have side effects, so only the caller may decide to call again.
The transport is injected (a RemoteCaller) because runners do not speak gRPC themselves.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from ..model import ToolSpec
from ..output_format import DEFAULT_RESULT_FORMAT, ResultFormat
from ..telemetry import outgoing_trace_headers
from .base import Invocation, Runner, RunnerConfigError, RunnerSettings, RunOutcome, ToolFailure

_TLS_KEYS: Final = frozenset({"ca_file", "cert_file", "key_file", "server_name"})
# Where a bearer token may go without TLS: this machine only.
_LOCAL_HOSTS: Final = ("127.0.0.1", "localhost", "[::1]", "::1")


@dataclass(frozen=True, slots=True)
class RemoteTls:
    """TLS towards the remote: its CA (empty: the system's roots), a client certificate for mTLS, and the name
    to check in its certificate when it differs from the target's host."""

    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    server_name: str = ""


@dataclass(frozen=True, slots=True)
class RemoteCall:
    """A call to forward: which tool on the remote, its arguments, this call's limits and how to connect."""

    target: str
    tool: str
    arguments: Mapping[str, Any]
    call_id: str
    timeout_seconds: float
    hops: int
    trace_headers: Mapping[str, str] = field(default_factory=dict)
    tls: RemoteTls | None = None
    # A bearer token for the remote's auth file; empty sends none.
    token: str = field(default="", repr=False)
    # The caller's output format and filtering: the remote renders and caps as this server would.
    result_format: ResultFormat = DEFAULT_RESULT_FORMAT


class RemoteCaller(Protocol):
    """Carries a RemoteCall to another toolhost and reports its result as a RunOutcome.

    Failures to reach the remote are RunOutcome failures with code REMOTE_UNAVAILABLE; a status the remote
    answered with is REMOTE_ERROR; its deadline passing is TIMEOUT.
    """

    async def call(self, request: RemoteCall) -> RunOutcome: ...


class RemoteRunner(Runner):
    kind = "remote"

    def __init__(self, target: str, remote_tool: str, caller: RemoteCaller | None, tls: RemoteTls | None = None,
                 token_credential: str = "") -> None:
        self.target = target
        self.remote_tool = remote_tool
        self._caller = caller
        self.tls = tls
        self.token_credential = token_credential

    @classmethod
    def from_config(cls, config: Mapping[str, Any], tool: ToolSpec, settings: RunnerSettings) -> RemoteRunner:
        target = config.get("target")
        if not isinstance(target, str) or not target.strip():
            raise RunnerConfigError("a remote runner needs `target:`, the other toolhost's gRPC address, for "
                                    "example dns:///pipeline:50051 (or `self`, this server's own)")
        remote_tool = config.get("tool", tool.name)
        if not isinstance(remote_tool, str) or not remote_tool:
            raise RunnerConfigError("runner.tool must be the tool's name on the remote toolhost")
        unknown = set(config) - {"type", "target", "tool", "tls", "token_credential"}
        if unknown:
            raise RunnerConfigError(f"unknown remote runner keys: {', '.join(sorted(unknown))}; "
                                    "allowed: target, tool, tls, token_credential")
        tls = _tls(config.get("tls"))
        token_credential = _token_credential(config.get("token_credential"), tool, tls, target.strip())
        return cls(target.strip(), remote_tool, settings.remote_caller, tls, token_credential)

    async def run(self, invocation: Invocation) -> RunOutcome:
        if self._caller is None:
            # Only offline validation builds runners without a transport; a server always has one.
            return RunOutcome(failure=ToolFailure("REMOTE_UNAVAILABLE", "this process cannot forward calls"))
        token = ""
        if self.token_credential:
            credential = invocation.credentials[self.token_credential]
            if "token" not in credential:
                return RunOutcome(failure=ToolFailure("MISSING_CREDENTIALS", (
                    f"credential {self.token_credential!r} has no key 'token', the bearer token the remote "
                    f"toolhost expects (TOOLHOST_CRED_{self.token_credential.upper()}_TOKEN)")))
            token = credential["token"]
        return await self._caller.call(
            RemoteCall(
                target=self.target,
                tool=self.remote_tool,
                arguments=invocation.arguments,
                call_id=invocation.call_id,
                timeout_seconds=invocation.timeout_seconds,
                hops=invocation.hops + 1,
                # The trace goes on: the current span's with tracing on, else the call's own trace id.
                trace_headers=outgoing_trace_headers() or (
                    invocation.untraced.forward_headers() if invocation.untraced is not None else {}),
                tls=self.tls,
                token=token,
                result_format=invocation.result_format,
            )
        )


def _tls(value: Any) -> RemoteTls | None:
    if value is None or value is False:
        return None
    if value is True:
        return RemoteTls()
    if not isinstance(value, Mapping):
        raise RunnerConfigError("runner.tls must be true or a mapping of ca_file, cert_file, key_file, server_name")
    unknown = set(value) - _TLS_KEYS
    if unknown:
        raise RunnerConfigError(f"unknown runner.tls keys: {', '.join(sorted(unknown))}; allowed: "
                                f"{', '.join(sorted(_TLS_KEYS))}")
    if not all(isinstance(v, str) for v in value.values()):
        raise RunnerConfigError("runner.tls values must be strings (file paths, or the server name)")
    tls = RemoteTls(**value)
    if bool(tls.cert_file) != bool(tls.key_file):
        raise RunnerConfigError("runner.tls needs both cert_file and key_file for a client certificate, or neither")
    for name in ("ca_file", "cert_file", "key_file"):
        path = getattr(tls, name)
        if path and not os.path.isfile(path):
            raise RunnerConfigError(f"runner.tls.{name} {path} is not a file")
    return tls


def _token_credential(value: Any, tool: ToolSpec, tls: RemoteTls | None, target: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or value not in tool.credentials:
        raise RunnerConfigError(
            f"runner.token_credential {value!r} must name a credential the tool declares in `credentials:`")
    host = target.removeprefix("dns:///").removeprefix("ipv4:").removeprefix("ipv6:").rpartition(":")[0]
    if tls is None and not target.startswith("unix:") and host not in _LOCAL_HOSTS:
        raise RunnerConfigError(
            "runner.token_credential sends a bearer token, which must not cross the network in plaintext: set "
            "runner.tls (or reach the remote on this machine)")
    return value
