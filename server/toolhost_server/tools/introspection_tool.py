"""What application_info, component_inspector and config_access share: admin-only, read-only diagnostics over the
server's ServerIntrospection, unserved without it, an unknown name NOT_FOUND listing the close ones."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from ..introspection.names import NameNotFound
from ..model import Annotations
from .base import Tool, ToolContext, ToolRaisedFailure, ToolServices

if TYPE_CHECKING:
    from ..introspection.service import ServerIntrospection

NO_INTROSPECTION = "the server offers no view of itself here (offline validation)"


class IntrospectionTool(Tool):
    """A tool that reports one view of the live server (`inspect`). Abstract: built-in discovery skips it."""

    category: ClassVar[str] = "diagnostics"
    tags: ClassVar[tuple[str, ...]] = ("introspection", "diagnostics")
    # Paths, users, addresses, settings and what is unavailable help an attacker aim: admins only.
    requires_admin: ClassVar[bool] = True
    annotations: ClassVar[Annotations] = Annotations(read_only=True, idempotent=True)

    @classmethod
    def unserved_because(cls, services: ToolServices) -> str:
        return "" if services.introspection is not None else NO_INTROSPECTION

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> dict[str, Any]:
        introspection = context.services.introspection
        if introspection is None:
            raise ToolRaisedFailure(NO_INTROSPECTION, "UNAVAILABLE")
        try:
            return await self.inspect(introspection, arguments)
        except NameNotFound as exc:
            raise ToolRaisedFailure(str(exc), "NOT_FOUND") from None

    @abstractmethod
    async def inspect(self, introspection: ServerIntrospection, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The view this tool reports; NameNotFound for a name the server does not have."""
