"""The tcp_port_check tool: whether a TCP port on a host accepts connections, and how fast."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Mapping
from typing import Any

from ..model import Annotations, Example, Parameter
from .base import Tool, ToolContext
from .egress import current_policy
from .net import HOST_MAX_LENGTH, HOST_PATTERN, describe_os_error, elapsed_ms, format_seconds, resolve, time_budget

MAX_TIMEOUT_SECONDS = 30

_OUTPUT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "address": {"type": ["string", "null"], "description": "The IP address last tried."},
        "error": {"type": ["string", "null"], "description": "Why the port is not open; null when it is."},
        "host": {"type": "string"},
        "latency_ms": {"type": ["number", "null"], "description": "Time to connect; null unless open."},
        "open": {"type": "boolean"},
        "port": {"type": "integer"},
    },
    "required": ["address", "error", "host", "latency_ms", "open", "port"],
}


class TcpPortCheck(Tool):
    name = "tcp_port_check"
    display_name = "TCP Port Check"
    description = (
        "Checks whether a TCP port on a host accepts connections, as seen from the toolhost server, and "
        "measures how long the connection took. Use it to see whether a service (SSH 22, HTTPS 443, "
        "PostgreSQL 5432, ...) is listening and reachable. A closed or filtered port is a normal answer: "
        "`open` is false and `error` says why (connection refused, timed out, unreachable). The call fails "
        "when the host name does not resolve, or when the server's egress policy does not allow an address "
        "it resolves to: cloud metadata and link-local addresses never, the server's own and private "
        "addresses only once an operator opened them. Nothing is sent over the connection; it is closed at "
        "once."
    )
    category = "network"
    tags = ("network", "tcp", "port", "diagnostics")
    parameters = (
        Parameter("host", "string", "Host name or IP address to connect to, for example 'db.example.com'.",
                  required=True, schema={"pattern": HOST_PATTERN, "maxLength": HOST_MAX_LENGTH}),
        Parameter("port", "integer", "TCP port number.", required=True,
                  schema={"minimum": 1, "maximum": 65535}),
        Parameter("timeout_seconds", "number",
                  f"How long to wait for the connection, in seconds (at most {MAX_TIMEOUT_SECONDS}).",
                  default=3, schema={"exclusiveMinimum": 0, "maximum": MAX_TIMEOUT_SECONDS}),
    )
    output_schema = _OUTPUT_SCHEMA
    # Room above the largest timeout_seconds argument, so the tool's own TIMEOUT (which says what it was
    # waiting for) comes before the pipeline's.
    timeout_seconds = MAX_TIMEOUT_SECONDS + 10
    examples = (
        Example("Is HTTPS reachable on example.com?", {"host": "example.com", "port": 443}),
        Example("Check PostgreSQL with a short timeout",
                {"host": "10.0.0.5", "port": 5432, "timeout_seconds": 1}),
    )
    annotations = Annotations(read_only=True, idempotent=True, open_world=True)
    intents = (r"check port (?P<port>\d{1,5}) on (?P<host>[^\s?]+)\??",)

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> dict[str, Any]:
        host = str(arguments["host"])
        port = int(arguments["port"])
        budget = time_budget(arguments["timeout_seconds"], context)
        loop = asyncio.get_running_loop()
        # One deadline for resolving and every connection attempt together, as the caller asked.
        deadline = loop.time() + budget
        timed_out = f"timed out after {format_seconds(budget)}"
        policy = current_policy()
        addresses = await resolve(host, port, deadline, budget)
        # Every address is checked before the first connection, and the connection goes to the checked
        # sockaddr itself: nothing resolves the name a second time.
        policy.check_all((str(sockaddr[0]) for _family, sockaddr in addresses), host)
        address: str | None = None
        error = "the host name resolved to no address"
        for family, sockaddr in addresses:
            if loop.time() >= deadline:
                error = timed_out
                break
            address = str(sockaddr[0])
            started = time.perf_counter()
            problem = await _connect(family, sockaddr, deadline)
            if problem is None:
                return _result(host, port, address, open_=True, latency_ms=elapsed_ms(started), error=None)
            error = timed_out if problem == _TIMED_OUT else problem
        return _result(host, port, address, open_=False, latency_ms=None, error=error)


_TIMED_OUT = "timed out"


def _result(host: str, port: int, address: str | None, *, open_: bool, latency_ms: float | None,
            error: str | None) -> dict[str, Any]:
    return {"address": address, "error": error, "host": host, "latency_ms": latency_ms, "open": open_,
            "port": port}


async def _connect(family: int, sockaddr: Any, deadline: float) -> str | None:
    """None when the port accepted the connection, else why not."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        async with asyncio.timeout_at(deadline):
            await loop.sock_connect(sock, sockaddr)
    except TimeoutError:
        return _TIMED_OUT
    except OSError as exc:
        return describe_os_error(exc)
    finally:
        with contextlib.suppress(OSError):
            sock.close()
    return None

