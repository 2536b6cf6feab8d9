"""Driving an MCP streamable-HTTP endpoint with hey, the pinned HTTP load generator, and checking what it got.

Every MCP server measured gets the very same bytes: one JSON-RPC `tools/call` of `echo` in one protocol era, POSTed
with the same headers. hey counts HTTP statuses only, so a JSON-RPC error inside a 200 would pass for a success:
`check_reply` reads one reply before the rounds, and `load` compares hey's successes with the server's own count
of echo calls that succeeded afterwards.

    call = EchoCall.at(MODERN)
    target = McpHttpTarget(server, "http://127.0.0.1:PORT/mcp", call, scratch / "echo.json", counts)
    target.check_reply()            # the reply's content type; RuntimeError unless it is echo's text
    target.load(concurrency=8, seconds=2.5)
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.ghz_load import TEXT, Load, run_loadgen
from bench.harness import ROOT, ServerProcess

HEY = os.environ.get("HEY", str(ROOT / ".tools/bin/hey-v0.1.4"))
# The newest MCP revision: its requests are self-contained (no initialize, no session). The _meta envelope and
# the Mcp-Method/Mcp-Name headers are what that revision requires.
MODERN = "2026-07-28"
# The handshake era's last revision, which the TypeScript SDK and most hosts speak. A stateless server answers
# it without an initialize; its requests carry no _meta envelope and no Mcp-Method/Mcp-Name headers.
HANDSHAKE = "2025-11-25"


def mcp_request(method: str, params: dict[str, Any], protocol: str = MODERN) -> dict[str, Any]:
    """A JSON-RPC request of `protocol` with id 1."""
    if protocol == MODERN:
        params = {**params, "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                                      "io.modelcontextprotocol/clientCapabilities": {}}}
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def mcp_headers(protocol: str, method: str, name: str | None = None) -> dict[str, str]:
    """The HTTP headers of a `method` request in `protocol` (what the SDK's own client sends)."""
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": protocol}
    if protocol == MODERN:
        headers["Mcp-Method"] = method
        if name is not None:
            headers["Mcp-Name"] = name
    return headers


@dataclasses.dataclass(frozen=True)
class EchoCall:
    """tools/call(echo, text=TEXT) in one protocol era: its headers and body, the same for every server."""

    protocol: str
    headers: dict[str, str]
    body: bytes

    @classmethod
    def at(cls, protocol: str) -> EchoCall:
        request = mcp_request("tools/call", {"name": "echo", "arguments": {"text": TEXT}}, protocol)
        return cls(protocol, mcp_headers(protocol, "tools/call", "echo"), json.dumps(request).encode())


@dataclasses.dataclass(frozen=True)
class EchoCounts:
    """A server's own running count of echo calls: those that returned the text, and all others."""

    ok: int
    failed: int


def reply_message(content_type: str, body: bytes) -> dict[str, Any]:
    """The JSON-RPC response in an HTTP reply: the JSON body, or the response among an SSE stream's events
    (notifications and priming events, which carry no id, are skipped)."""
    if content_type.startswith("application/json"):
        message: dict[str, Any] = json.loads(body)
        return message
    if content_type.startswith("text/event-stream"):
        for event in re.split(r"\r?\n\r?\n", body.decode()):
            data = "\n".join(line[5:].removeprefix(" ") for line in event.splitlines() if line.startswith("data:"))
            if data:
                message = json.loads(data)
                if "id" in message:
                    return message
        raise RuntimeError(f"no JSON-RPC response among the SSE events: {body[:500]!r}")
    raise RuntimeError(f"an MCP reply of content type {content_type!r}: {body[:500]!r}")


def echo_text(message: dict[str, Any]) -> str:
    """echo's text from a tools/call response; RuntimeError for a JSON-RPC error or a tool error."""
    if "error" in message or "result" not in message:
        raise RuntimeError(f"tools/call(echo) answered a JSON-RPC error: {message}")
    result = message["result"]
    content = result.get("content") or [{}]
    if result.get("isError") or content[0].get("type") != "text":
        raise RuntimeError(f"tools/call(echo) failed: {result}")
    return str(content[0].get("text"))


class McpHttpTarget:
    """One MCP endpoint under hey's load. `counts` reads the server's own echo counters (outside the CPU
    window)."""

    def __init__(self, server: ServerProcess, url: str, call: EchoCall, body_file: Path,
                 counts: Callable[[], EchoCounts]) -> None:
        self.server = server
        self.url = url
        self.call = call
        self.body_file = body_file
        body_file.write_bytes(call.body)
        self.counts = counts
        # What the reply looked like (check_reply): the content type and size of one answer, for the figures.
        self.reply_content_type = ""
        self.reply_bytes = 0

    def check_reply(self) -> None:
        """One call read back: it must be echo's text, in JSON or in an SSE stream."""
        request = urllib.request.Request(self.url, data=self.call.body, headers=self.call.headers, method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            content_type = response.headers.get("Content-Type", "")
            body = response.read()
        text = echo_text(reply_message(content_type, body))
        if text != TEXT:
            raise RuntimeError(f"tools/call(echo) at {self.url} returned {text!r}, not {TEXT!r}")
        self.reply_content_type = content_type.partition(";")[0]
        self.reply_bytes = len(body)

    def load(self, concurrency: int, seconds: float) -> Load:
        before = self.counts()
        cpu = self.server.cpu_seconds()
        out, loadgen_cpu = run_loadgen([
            HEY, "-z", f"{seconds}s", "-c", str(concurrency), "-m", "POST", "-D", str(self.body_file),
            *(arg for name, value in self.call.headers.items() for arg in ("-H", f"{name}: {value}")), self.url])
        cpu = self.server.cpu_seconds() - cpu
        after = self.counts()
        statuses = {int(code): int(n) for code, n in re.findall(r"\[(\d{3})\]\s+(\d+) responses", out)}
        errors = re.search(r"Error distribution:\n((?:\s+\[\d+\].*\n?)+)", out)
        total = re.search(r"Total:\s+([0-9.]+) secs", out)
        ok = statuses.get(200, 0)
        server_ok = after.ok - before.ok
        server_failed = after.failed - before.failed
        failures = sum(n for code, n in statuses.items() if code != 200)
        # A 200 whose body was a JSON-RPC error (unknown tool, a refusal) never reaches echo, so the server's
        # count of successful echo calls falls short of hey's 200s.
        if failures or errors or total is None or server_failed or server_ok < ok or ok == 0:
            raise RuntimeError(f"echo calls at {self.url} failed: hey statuses {statuses}, errors "
                               f"{errors.group(1) if errors else None}, server counted {server_ok} successful "
                               f"and {server_failed} failed echo calls")
        return Load(ok, float(total.group(1)), server_ok, cpu, loadgen_cpu)
