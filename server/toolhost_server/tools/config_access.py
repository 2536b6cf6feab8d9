"""The config_access tool: this server's effective settings, each with where its value came from."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..model import Example, Parameter
from .introspection_tool import IntrospectionTool

if TYPE_CHECKING:
    from ..introspection.service import ServerIntrospection


class ConfigAccessTool(IntrospectionTool):
    name = "config_access"
    display_name = "Config Access"
    description = (
        "Shows this toolhost server's effective settings, each as key, value, source (flag --NAME, environment "
        "VARIABLE, config file PATH, program, or default) and sensitive (true when part of the value is hidden). "
        "Secrets never appear: database URLs show [REDACTED] for their password, and store_key (whether "
        "TOOLHOST_STORE_KEY is set) shows [REDACTED]. `key` narrows to one setting or a part of its value, dotted: "
        "log_level, workspaces.0.path, databases.analytics. Returns `settings` and a summary (counts by source, "
        "notes). NOT_FOUND names the keys that exist where `key` goes wrong.")
    tags = ("introspection", "diagnostics", "configuration")
    parameters = (
        Parameter("key", "string", "One setting (log_level) or a part of its value, dotted (workspaces.0.path, "
                  "databases.analytics).",
                  schema={"minLength": 1, "maxLength": 256, "pattern": r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$"}),
    )
    examples = (
        Example("Every setting and where it came from", {}),
        Example("One setting", {"key": "log_level"}),
        # Left out of `toolhost check`: a server without a workspace (the offline check's) has no workspaces.0.
        Example("The path of the first workspace", {"key": "workspaces.0.path"}, skip_check=True),
    )

    async def inspect(self, introspection: ServerIntrospection, arguments: Mapping[str, Any]) -> dict[str, Any]:
        return introspection.settings(arguments.get("key", ""))
