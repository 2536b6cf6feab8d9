"""The ASGI app: `/metrics`, `/healthz` (the process is alive) and `/readyz` (it takes calls).

`/metrics` names every served tool, hidden ones too, with its calls, outcomes and durations: with a metrics
token it answers only to `Authorization: Bearer <token>`. The health endpoints stay open for probes; they tell
nothing but whether the server is up.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from ..telemetry.metrics import CONTENT_TYPE, ToolhostMetrics
from .metrics_token import MetricsToken

_CHALLENGE = 'Bearer realm="toolhost metrics"'


def create_http_app(metrics: ToolhostMetrics, ready: Callable[[], bool],
                    metrics_token: MetricsToken | None = None) -> Starlette:
    """`ready` says whether the server takes calls: false while it starts and once it drains. With
    `metrics_token`, /metrics needs that bearer token."""

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

    return Starlette(routes=[
        Route("/metrics", serve_metrics, methods=["GET"]),
        Route("/healthz", live, methods=["GET"]),
        Route("/readyz", readiness, methods=["GET"]),
    ])
