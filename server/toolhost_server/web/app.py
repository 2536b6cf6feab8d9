"""The ASGI app: `/metrics`, `/healthz` (the process is alive) and `/readyz` (it takes calls).

`/metrics` names every served tool, hidden ones too, with its calls, outcomes and durations: with a metrics
token it answers only to `Authorization: Bearer <token>`. The health endpoints stay open for probes; they tell
nothing but whether the server is up. The health endpoints, and /metrics when it needs a token, are the only
routes the browser guard (web.guard, put in front by web.server) lets through whatever the Host: probes and
scrapers dial the pod's IP.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute

from ..auth.rights import Right
from ..introspection.surface import HttpRoute
from ..telemetry.metrics import CONTENT_TYPE, ToolhostMetrics
from .metrics_token import MetricsToken

_CHALLENGE = 'Bearer realm="toolhost metrics"'
METRICS_PATH, LIVE_PATH, READY_PATH = "/metrics", "/healthz", "/readyz"
PROBE_PATHS = (METRICS_PATH, LIVE_PATH, READY_PATH)
_RIGHT_ATTRIBUTE = "required_right"
Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])


def requires(right: Right, endpoint: Endpoint) -> Endpoint:
    """Declare on the endpoint the right it checks, where route_inspector reads it (http_routes)."""
    setattr(endpoint, _RIGHT_ATTRIBUTE, right)
    return endpoint


def create_http_app(metrics: ToolhostMetrics, ready: Callable[[], bool],
                    metrics_token: MetricsToken | None = None, routes: Sequence[BaseRoute] = ()) -> Starlette:
    """`ready` says whether the server takes calls: false while it starts and once it drains. With
    `metrics_token`, /metrics needs that bearer token. `routes` are the other surfaces served beside them (/mcp),
    each endpoint declaring its right with `requires`; HttpServer puts the browser guard in front of them."""

    async def serve_metrics(request: Request) -> Response:
        if metrics_token is not None:
            authorization = request.headers.get("authorization")
            if authorization is None:
                return PlainTextResponse("/metrics needs a bearer token (metrics_token_file)\n", status_code=401,
                                         headers={"WWW-Authenticate": _CHALLENGE})
            if not metrics_token.accepts(authorization):
                return PlainTextResponse("the bearer token is not valid for /metrics\n", status_code=401,
                                         headers={"WWW-Authenticate": f'{_CHALLENGE}, error="invalid_token"'})
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    async def live(request: Request) -> Response:
        # Alive as long as the event loop answers, also while draining: a liveness probe that failed during a
        # graceful shutdown would have the pod killed before its calls finish.
        return PlainTextResponse("ok\n")

    async def readiness(request: Request) -> Response:
        if ready():
            return PlainTextResponse("ready\n")
        return PlainTextResponse("not ready\n", status_code=503)

    metrics_right = Right.NONE if metrics_token is None else Right.METRICS_TOKEN
    return Starlette(routes=[
        Route(METRICS_PATH, requires(metrics_right, serve_metrics), methods=["GET"]),
        Route(LIVE_PATH, requires(Right.NONE, live), methods=["GET"]),
        Route(READY_PATH, requires(Right.NONE, readiness), methods=["GET"]),
        *routes,
    ])


def http_routes(app: Starlette) -> list[HttpRoute]:
    """The route table of `app`, mounts walked, each route with the right its endpoint declares ("unknown" for
    one that declares none)."""
    return list(_walk(app.routes, ""))


def _walk(routes: Iterable[BaseRoute], prefix: str) -> Iterable[HttpRoute]:
    for route in routes:
        if isinstance(route, Mount):
            yield from _walk(route.routes, prefix + route.path)
        elif isinstance(route, Route):
            yield HttpRoute(prefix + route.path, tuple(sorted(route.methods or ())), _declared(route.endpoint))
        elif isinstance(route, WebSocketRoute):
            yield HttpRoute(prefix + route.path, ("WEBSOCKET",), _declared(route.endpoint))
        else:
            yield HttpRoute(prefix + str(getattr(route, "path", "")), (), "unknown")


def _declared(endpoint: object) -> str:
    right = getattr(endpoint, _RIGHT_ATTRIBUTE, None)
    return right.value if isinstance(right, Right) else "unknown"
