"""What the built-in network tools (net_dns, net_tcp, net_http) share: failure codes, time budgets, resolving.

A network tool succeeds when it got an answer, even a negative one (a closed port, an HTTP 500, a name that
does not exist): that is what the caller asked to find out. It fails, with one of these codes, when it could
not get an answer at all:

    TIMEOUT             no answer within the tool's `timeout_seconds` (or the call's own limit)
    HOST_NOT_FOUND      the host name does not resolve to any address
    CONNECTION_FAILED   the host resolved but the connection could not be made or broke off
    TLS_ERROR           the TLS handshake failed, for example on a certificate that does not verify
    PROTOCOL_ERROR      the peer's reply is not valid for the protocol
    TOO_MANY_REDIRECTS  following redirects did not end at a response
    DNS_ERROR           no nameserver gave a usable answer (SERVFAIL, REFUSED, none configured)
    INVALID_TARGET      an argument fits the schema but cannot be used (an over-long DNS label, say)
    EGRESS_DENIED       the egress policy (see .egress) does not let the tool connect to that address
    EGRESS_MISCONFIGURED the egress policy's environment variables do not parse
"""

from __future__ import annotations

import asyncio
import errno
import socket
import time
from typing import Any, Final

from .base import ToolContext, ToolRaisedFailure

# Hostnames (RFC 1123 labels, underscores tolerated for service names), IPv4 and IPv6 addresses (with an
# optional %zone). It refuses a leading "-" so that no value can read as a program option, and anything with
# spaces, slashes or a user:password@ part.
HOST_PATTERN: Final = r"^[A-Za-z0-9_:][A-Za-z0-9_.:%-]*$"
HOST_MAX_LENGTH: Final = 253

# Leave the call's own limit some room, so the tool reports its own TIMEOUT with what it was waiting for
# instead of being cancelled by the pipeline with a generic message.
_PIPELINE_MARGIN: Final = 0.9
_MIN_BUDGET_SECONDS: Final = 0.05


def time_budget(requested_seconds: float, context: ToolContext) -> float:
    """How long one call may spend on the network: the caller's `timeout_seconds`, cut to fit the call."""
    return max(_MIN_BUDGET_SECONDS, min(float(requested_seconds), context.timeout_seconds * _PIPELINE_MARGIN))


def elapsed_ms(started: float) -> float:
    """Milliseconds since `started` (a time.perf_counter() value), rounded to hundredths."""
    return round((time.perf_counter() - started) * 1000, 2)


_OS_ERRORS: Final = {
    errno.ECONNREFUSED: "connection refused",
    errno.ECONNRESET: "connection reset",
    errno.EHOSTUNREACH: "host unreachable",
    errno.ENETUNREACH: "network unreachable",
    errno.ETIMEDOUT: "timed out",
}


def describe_os_error(exc: OSError) -> str:
    """A socket error in a few words ("connection refused"), the same whichever tool met it."""
    return _OS_ERRORS.get(exc.errno or 0, exc.strerror or str(exc) or type(exc).__name__)


def format_seconds(seconds: float) -> str:
    """A budget for a message: '3s', '0.5s'."""
    return f"{seconds:g}s"


async def resolve(host: str, port: int, deadline: float, budget: float) -> list[tuple[int, Any]]:
    """(family, sockaddr) of every TCP address of `host`, once each, in the resolver's order.

    Raises TIMEOUT when resolving passes `deadline` (`budget` is for the message) and HOST_NOT_FOUND when
    the name does not resolve.
    """
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout_at(deadline):
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except TimeoutError:
        raise ToolRaisedFailure(
            f"resolving {host!r} took longer than {format_seconds(budget)}", "TIMEOUT") from None
    except socket.gaierror as exc:
        raise ToolRaisedFailure(
            f"host {host!r} cannot be resolved: {exc.strerror}", "HOST_NOT_FOUND") from None
    # /etc/hosts may list an address twice (localhost often is); try each one once, in the resolver's order.
    unique: dict[Any, int] = {}
    for family, _type, _proto, _name, sockaddr in infos:
        unique.setdefault(sockaddr, family)
    return [(family, sockaddr) for sockaddr, family in unique.items()]
