"""The ASGI app: `/metrics`, `/healthz` (the process is alive) and `/readyz` (it takes calls)."""

from __future__ import annotations

from collections.abc import Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from ..telemetry.metrics import CONTENT_TYPE, ToolhostMetrics


def create_http_app(metrics: ToolhostMetrics, ready: Callable[[], bool]) -> Starlette:
    """`ready` says whether the server takes calls: false while it starts and once it drains."""

    async def serve_metrics(request: Request) -> Response:
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
