"""The route_inspector tool: every gRPC method and HTTP route this server serves, read from what its listeners
registered (introspection.surface), with the right each requires."""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from ..introspection.surface import GrpcMethod, HttpRoute, ServingSurface
from ..model import Annotations, Example, Parameter
from .base import Tool, ToolContext, ToolRaisedFailure, ToolServices

KINDS = ("grpc", "http")
_KIND_OF_ADDRESS = {"grpc": "grpc", "unix": "grpc", "http": "http"}


class RouteInspectorTool(Tool):
    name = "route_inspector"
    display_name = "Route Inspector"
    description = (
        "Lists what this server serves, read from its live listeners: every gRPC service and method (full name, "
        "request and response message types, streaming kind: unary, server, client or bidi) and every HTTP route "
        "(path, methods), each with the right it requires (none, authenticated, metrics_token, manage_tools, "
        "manage_assets, admin). Narrow by `service` (a gRPC service's full or short name) or `kind`. Returns "
        "`addresses` (the listeners, with their bound ports), `services` (each with its methods), `routes` and a "
        "summary (counts, counts per right, notes). NOT_FOUND names the services when `service` matches none; "
        "INVALID_ARGUMENT when `service` is given with kind http.")
    category = "diagnostics"
    tags = ("introspection", "diagnostics", "api")
    # The surface tells which RPCs an attacker could try and which need less than admin: admins only.
    requires_admin = True
    parameters = (
        Parameter("service", "string", "Only this gRPC service: its full name (toolhost.v1.ToolService) or the "
                  "part after the last dot (ToolService).", schema={"maxLength": 256}),
        Parameter("kind", "string", "Only gRPC methods or only HTTP routes.", enum=KINDS),
    )
    examples = (
        Example("Everything served", {}),
        Example("The methods of one service", {"service": "toolhost.v1.LogService"}),
        Example("Only the HTTP routes", {"kind": "http"}),
    )
    annotations = Annotations(read_only=True, idempotent=True)

    @classmethod
    def unserved_because(cls, services: ToolServices) -> str:
        if services.surface is None:
            return "the server records no serving surface here (offline validation)"
        return ""

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> dict[str, Any]:
        surface = context.services.surface
        if surface is None:
            raise ToolRaisedFailure("this server records no serving surface, so there are no routes to show",
                                    "UNAVAILABLE")
        service, kind = arguments.get("service", ""), arguments.get("kind", "")
        if service and kind == "http":
            raise ToolRaisedFailure("`service` names a gRPC service, which kind http leaves out: drop `service`, "
                                    "or set kind to grpc", "INVALID_ARGUMENT")
        methods = surface.grpc_methods() if kind != "http" else []
        if service:
            methods = _methods_of(service, methods)
        routes = surface.http_routes() if kind != "grpc" and not service else []
        return {
            # Where they are served: the listeners of the kinds shown, with their bound ports.
            "addresses": [asdict(a) for a in surface.addresses() if kind in ("", _KIND_OF_ADDRESS[a.kind])],
            "services": _grouped(methods),
            "routes": [asdict(route) | {"methods": list(route.methods)} for route in routes],
            "summary": _summary(surface, methods, routes, kind, service),
        }


def _methods_of(service: str, methods: list[GrpcMethod]) -> list[GrpcMethod]:
    """The methods of the service named `service` (full name, or its last part when that is unambiguous);
    NOT_FOUND naming the services otherwise."""
    names = sorted({m.service for m in methods})
    wanted = service if service in names else None
    if wanted is None:
        short = [name for name in names if name.rpartition(".")[2] == service]
        wanted = short[0] if len(short) == 1 else None
    if wanted is None:
        close = difflib.get_close_matches(service, names, n=3, cutoff=0.5) or names
        raise ToolRaisedFailure(f"no gRPC service named {service[:200]!r} is served; did you mean "
                                f"{', '.join(close)}?", "NOT_FOUND")
    return [m for m in methods if m.service == wanted]


def _grouped(methods: list[GrpcMethod]) -> list[dict[str, Any]]:
    services: dict[str, list[dict[str, Any]]] = {}
    for method in methods:
        services.setdefault(method.service, []).append(asdict(method))
    return [{"service": name, "methods": entries} for name, entries in services.items()]


def _summary(surface: ServingSurface, methods: list[GrpcMethod], routes: list[HttpRoute], kind: str,
             service: str) -> dict[str, Any]:
    notes: list[str] = []
    if kind != "http" and not surface.grpc_methods():
        notes.append("no gRPC services are recorded: the server that runs this call has not bound its gRPC "
                     "listener (a Toolhost driven without api.server.GrpcServer)")
    if kind != "grpc" and not service and not surface.serves_http:
        notes.append("no HTTP app is served: set http_address to serve /metrics, /healthz and /readyz")
    if not surface.authentication_required:
        notes.append("this server requires no credentials (no auth_file): every caller has every right; the "
                     "rights shown apply once an auth file is configured")
    undeclared = [route.path for route in routes if route.required_right == "unknown"]
    if undeclared:
        notes.append(f"these HTTP routes declare no required right, so it is shown as unknown: "
                     f"{', '.join(undeclared)}; declare it where web/app.py builds the route")
    rights = Counter(m.required_right for m in methods) + Counter(r.required_right for r in routes)
    return {
        "service_count": len({m.service for m in methods}),
        "method_count": len(methods),
        "route_count": len(routes),
        # A list, not a map keyed by right: the redactor hides the value of any key that looks like a secret's
        # name, and "metrics_token" does.
        "right_counts": [{"right": right, "count": count} for right, count in sorted(rights.items())],
        "notes": notes,
    }
