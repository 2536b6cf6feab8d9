"""The component_inspector tool: the parts of this server (registry, runners, log readers, credential sources,
store, tracing, auth, watcher, HTTP app, search index, workspaces, user tools...) and their state."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..introspection.names import NameNotFound
from ..model import Annotations, Example, Parameter
from .application_info import NO_INTROSPECTION
from .base import Tool, ToolContext, ToolRaisedFailure, ToolServices


class ComponentInspectorTool(Tool):
    name = "component_inspector"
    display_name = "Component Inspector"
    description = (
        "Lists the parts of this toolhost server and their state (ok, off, unavailable, degraded, starting, "
        "error), read from the live objects: the registry, each runner type, the log readers, the credential "
        "sources, the store (engine, schema version), tracing (exporter, sampler), authentication (modes, number "
        "of roles; never a token), the catalog watcher, the HTTP app, the search index, the workspaces, user "
        "tools, the call pipeline and the audit trail. Without `component`, returns `components` as name, kind, "
        "state and a one-line detail; with it, that component with its properties. The summary counts the "
        "states and notes the parts that could not be read. NOT_FOUND lists the component names. Tool counts "
        "are the server's, including tools hidden from the caller (numbers, never their names).")
    category = "diagnostics"
    tags = ("introspection", "diagnostics")
    # Paths, users, auth modes and what is unavailable tell an attacker where to push: admins only.
    requires_admin = True
    parameters = (
        Parameter("component", "string", "One component's name, as the list shows it (store, runner.process, "
                  "log_reader.file, credentials.directory...).",
                  schema={"minLength": 1, "maxLength": 64, "pattern": "^[a-z][a-z_.]*$"}),
    )
    examples = (
        Example("Every component and its state", {}),
        Example("The store's engine and schema version", {"component": "store"}),
    )
    annotations = Annotations(read_only=True, idempotent=True)

    @classmethod
    def unserved_because(cls, services: ToolServices) -> str:
        return "" if services.introspection is not None else NO_INTROSPECTION

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> dict[str, Any]:
        introspection = context.services.introspection
        if introspection is None:
            raise ToolRaisedFailure(NO_INTROSPECTION, "UNAVAILABLE")
        try:
            return await introspection.components(arguments.get("component", ""))
        except NameNotFound as exc:
            raise ToolRaisedFailure(str(exc), "NOT_FOUND") from None
