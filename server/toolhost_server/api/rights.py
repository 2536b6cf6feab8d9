"""`requires(right)`: the right a servicer method needs, declared on the method itself.

The check stays where it is made today (the caller's authentication in each method, require_admin in the core,
manage_tools in the user-tools core, which records an audit entry for each refused change and so must be the one
to refuse). The declaration sits on the method the server registers, so registration reads it from the very
handler it serves (api/server.py refuses a method without one), and tests/test_route_inspector.py calls every
registered RPC as each kind of caller and compares the refusals with it.

    class LogService(...):
        @requires(Right.ADMIN)
        @translate_errors
        async def QueryLogs(self, request, context): ...
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ..auth.rights import Right

Method = TypeVar("Method", bound=Callable[..., Any])

_ATTRIBUTE = "required_right"


def requires(right: Right) -> Callable[[Method], Method]:
    def declare(method: Method) -> Method:
        setattr(method, _ATTRIBUTE, right)
        return method
    return declare


def declared_right(servicer: object, method: str) -> Right:
    """The right `servicer`'s method `method` declares; LookupError naming the fix when it declares none."""
    right = getattr(getattr(servicer, method, None), _ATTRIBUTE, None)
    if not isinstance(right, Right):
        raise LookupError(f"{type(servicer).__name__}.{method} declares no required right: decorate it with "
                          "@requires(Right....) from toolhost_server.api.rights")
    return right
