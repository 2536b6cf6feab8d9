"""The application_info tool: what this server is and runs on (version, runtime, process, addresses, catalog)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..model import Annotations, Example
from .base import Tool, ToolContext, ToolRaisedFailure, ToolServices

NO_INTROSPECTION = "the server offers no view of itself here (offline validation)"


class ApplicationInfoTool(Tool):
    name = "application_info"
    display_name = "Application Info"
    description = (
        "Describes this toolhost server: its version; the Python and library versions it runs with; the "
        "platform; its process id, user, start time and uptime; the addresses it serves (gRPC, unix socket, "
        "HTTP, with TLS or not); its catalog directories; and its tools: the registry generation and counts by "
        "source and category. Returns those under version, python, libraries, platform, process, addresses, "
        "catalog_dirs and tools, and a summary (tool count, generation, notes on what could not be told). The "
        "counts are the server's, including tools hidden from the caller (numbers, never their names).")
    category = "diagnostics"
    tags = ("introspection", "diagnostics")
    # Paths, users, addresses and versions help an attacker aim: admins only.
    requires_admin = True
    examples = (Example("Everything about the server", {}),)
    annotations = Annotations(read_only=True, idempotent=True)

    @classmethod
    def unserved_because(cls, services: ToolServices) -> str:
        return "" if services.introspection is not None else NO_INTROSPECTION

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> dict[str, Any]:
        introspection = context.services.introspection
        if introspection is None:
            raise ToolRaisedFailure(NO_INTROSPECTION, "UNAVAILABLE")
        return introspection.application()
