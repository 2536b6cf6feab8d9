"""The component_inspector tool: the parts of this server (registry, runners, log readers, credential sources,
store, tracing, auth, watcher, HTTP app, search index, workspaces, user tools...) and their state."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..model import Example, Parameter
from .introspection_tool import IntrospectionTool

if TYPE_CHECKING:
    from ..introspection.service import ServerIntrospection


class ComponentInspectorTool(IntrospectionTool):
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
    parameters = (
        Parameter("component", "string", "One component's name, as the list shows it (store, runner.process, "
                  "log_reader.file, credentials.directory...).",
                  schema={"minLength": 1, "maxLength": 64, "pattern": "^[a-z][a-z_.]*$"}),
    )
    examples = (
        Example("Every component and its state", {}),
        Example("The store's engine and schema version", {"component": "store"}),
    )

    async def inspect(self, introspection: ServerIntrospection, arguments: Mapping[str, Any]) -> dict[str, Any]:
        return await introspection.components(arguments.get("component", ""))
