"""The application_info tool: what this server is and runs on (version, runtime, process, addresses, catalog)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..model import Example
from .introspection_tool import IntrospectionTool

if TYPE_CHECKING:
    from ..introspection.service import ServerIntrospection


class ApplicationInfoTool(IntrospectionTool):
    name = "application_info"
    display_name = "Application Info"
    description = (
        "Describes this toolhost server: its version; the Python and library versions it runs with; the "
        "platform; its process id, user, start time and uptime; the addresses it serves (gRPC, unix socket, "
        "HTTP, with TLS or not); its catalog directories; and its tools: the registry generation and counts by "
        "source and category. Returns those under version, python, libraries, platform, process, addresses, "
        "catalog_dirs and tools, and a summary (tool count, generation, notes on what could not be told). The "
        "counts are the server's, including tools hidden from the caller (numbers, never their names).")
    examples = (Example("Everything about the server", {}),)

    async def inspect(self, introspection: ServerIntrospection, arguments: Mapping[str, Any]) -> dict[str, Any]:
        return introspection.application()
