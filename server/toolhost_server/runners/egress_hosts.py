"""Network destinations in a process tool's arguments, held to the egress policy before the program runs.

A program such as ping resolves a name itself, out of the server's sight. For the parameters a runner lists in
`egress_hosts:`, the runner resolves the name first, checks every address against the egress policy (see
tools/egress.py), and hands the program the checked address instead of the name, so a second resolution by
the program cannot land somewhere else (DNS rebinding).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Mapping
from typing import Any

from ..model import ToolSpec
from ..tools.base import ToolRaisedFailure
from ..tools.egress import current_policy
from .base import RunnerConfigError
from .process_config import declared_parameters


def egress_hosts(config: Mapping[str, Any], tool: ToolSpec) -> tuple[str, ...]:
    """The parameters `egress_hosts:` names, each a declared string parameter."""
    names = config.get("egress_hosts", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise RunnerConfigError("egress_hosts must be a list of parameter names that hold host names or addresses")
    declared = set(declared_parameters(tool))
    unknown = [n for n in names if n not in declared]
    if unknown:
        raise RunnerConfigError(f"egress_hosts names undeclared parameters: {', '.join(unknown)}")
    return tuple(names)


async def pin_egress_hosts(
    arguments: Mapping[str, Any], names: tuple[str, ...], budget_seconds: float
) -> Mapping[str, Any]:
    """`arguments` with each named host replaced by its first address, after the policy allowed them all.

    Raises ToolRaisedFailure: EGRESS_DENIED (or EGRESS_MISCONFIGURED), HOST_NOT_FOUND or TIMEOUT.
    """
    pinned = dict(arguments)
    loop = asyncio.get_running_loop()
    policy = current_policy()
    for name in names:
        host = pinned.get(name)
        if not isinstance(host, str) or not host:
            continue
        try:
            async with asyncio.timeout(budget_seconds):
                infos = await loop.getaddrinfo(host, None, type=socket.SOCK_RAW)
        except TimeoutError:
            raise ToolRaisedFailure(f"resolving {host!r} took too long", "TIMEOUT") from None
        except socket.gaierror as exc:
            raise ToolRaisedFailure(f"host {host!r} cannot be resolved: {exc.strerror}", "HOST_NOT_FOUND") from None
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        policy.check_all(addresses, host)
        pinned[name] = addresses[0]
    return pinned
