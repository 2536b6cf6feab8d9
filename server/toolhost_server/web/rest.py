"""The seed's REST API (AI Tool Catalog) on the HTTP listener, in front of the one call pipeline:

    GET  /ai/tools/list     platform, category, tags (comma-separated), provider
    GET  /ai/tools/search   q (or query), limit, and the list's filters
    POST /ai/tools/execute  {"name", "params", "trace_id"}
    POST /ai/tools/reload   the admin right; no body needed
    GET  /openapi.json      this API, described

Every route but /openapi.json authenticates as /mcp does (web.http_auth), and sees and calls what the caller may,
as gRPC does: listing, tool_search and the pipeline decide, never this module. Host, Origin, content type and
body size are checked before any route by the browser guard (web.guard). Bodies: web.rest_bodies; refusals:
web.http_errors.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

from opentelemetry import context as otel_context
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive

from .. import __version__
from ..app import Toolhost
from ..auth import Caller
from ..auth.rights import Right
from ..errors import ShuttingDownError
from ..listing import matching_tools
from ..pipeline import CallRequest, CallResult
from ..telemetry import parent_context
from ..telemetry.trace_context import TRACE_CONTEXT_KEYS
from .app import requires
from .http_auth import HttpAuthentication
from .http_errors import http_error_of
from .openapi import OPENAPI_PATH, openapi_document
from .rest_bodies import JsonBody, execute_body, list_body, reload_body, search_body
from .rest_requests import ClientTrace, ExecuteRequest, execute_request, filters_of, search_request

LIST_PATH, SEARCH_PATH = "/ai/tools/list", "/ai/tools/search"
EXECUTE_PATH, RELOAD_PATH = "/ai/tools/execute", "/ai/tools/reload"
TRACE_ID_HEADER = "X-Trace-Id"
_DRAINING = "the server is shutting down; retry on another replica"
# nginx's status for a request whose client left before the answer: written to nobody, but never a 200.
_CLIENT_CLOSED_REQUEST = 499
Handler = Callable[[Request], Awaitable[Response]]


class RestApi:
    """The routes of the REST API for `toolhost` (`routes`), and its calls in flight (`stop_calls`)."""

    def __init__(self, toolhost: Toolhost) -> None:
        self._toolhost = toolhost
        self._authentication = HttpAuthentication.of(toolhost)
        self._calls = _RunningCalls()
        document = JsonBody(openapi_document(__version__)).body

        async def serve_openapi(request: Request) -> Response:
            return Response(document, media_type="application/json", headers={"X-Content-Type-Options": "nosniff"})

        self.routes = [
            Route(LIST_PATH, requires(Right.AUTHENTICATED, _answering(self._list, LIST_PATH)), methods=["GET"]),
            Route(SEARCH_PATH, requires(Right.AUTHENTICATED, _answering(self._search, SEARCH_PATH)),
                  methods=["GET"]),
            # Execute answers its own refusals: they echo the caller's trace_id.
            Route(EXECUTE_PATH, requires(Right.AUTHENTICATED, _function(self._execute)), methods=["POST"]),
            Route(RELOAD_PATH, requires(Right.ADMIN, _answering(self._reload, RELOAD_PATH)), methods=["POST"]),
            Route(OPENAPI_PATH, requires(Right.NONE, serve_openapi), methods=["GET"]),
        ]

    def stop_calls(self) -> None:
        """Cancel every call running, and refuse new ones: the server is shutting down and its grace is over.
        Each answers 503."""
        self._calls.stop_all()

    def _caller(self, request: Request) -> Caller:
        return self._authentication.caller(request.scope)

    def _check_accepting(self) -> None:
        # The pipeline refuses calls itself once the server drains; the other routes ask it as /readyz does.
        if not self._toolhost.pipeline.accepting:
            raise ShuttingDownError(_DRAINING)

    async def _list(self, request: Request) -> Response:
        caller = self._caller(request)
        self._check_accepting()
        filters = filters_of(request.query_params)
        toolhost = self._toolhost
        tool_filter = toolhost.tool_filter(filters.platform, filters.category, filters.tags, filters.provider)
        return JsonBody(list_body(matching_tools(toolhost.registry.snapshot, tool_filter, caller), filters))

    async def _search(self, request: Request) -> Response:
        caller = self._caller(request)
        self._check_accepting()
        asked = search_request(request.query_params)
        filters = asked.filters
        toolhost = self._toolhost
        tool_filter = toolhost.tool_filter(filters.platform, filters.category, filters.tags, filters.provider)
        results = toolhost.tool_search.search(asked.query, caller, tool_filter, asked.limit)
        return JsonBody(search_body(asked.query, results, filters))

    async def _reload(self, request: Request) -> Response:
        caller = self._caller(request)
        self._check_accepting()
        report = await self._toolhost.reload(caller, f"POST {RELOAD_PATH}")
        return JsonBody(reload_body(report))

    async def _execute(self, request: Request) -> Response:
        asked: ExecuteRequest | None = None
        try:
            caller = self._caller(request)
            asked = execute_request(await request.body())
            result = await self._call(asked, request, caller)
        except _ClientGone:
            return Response(status_code=_CLIENT_CLOSED_REQUEST)
        except Exception as exc:
            error = http_error_of(exc, request.scope, EXECUTE_PATH, body_pointer="/params")
            if asked is not None:
                trace = asked.trace
                error.body.update(tool=asked.name, trace_id=trace.w3c_trace_id or trace.client_trace_id or None)
            return JsonBody(error.body, error.status, error.headers)
        shown = asked.trace.client_trace_id or result.trace_id
        return JsonBody(execute_body(result, shown), headers={TRACE_ID_HEADER: result.trace_id})

    async def _call(self, asked: ExecuteRequest, request: Request, caller: Caller) -> CallResult:
        headers = _trace_headers(asked.trace, request.headers)
        call = CallRequest(name=asked.name, arguments=asked.params, trace_headers=headers, caller=caller,
                           client_trace_id=asked.trace.client_trace_id)
        # The caller's trace parents the call's span, as an RPC's server span does on gRPC (with tracing off the
        # pipeline takes the trace id from trace_headers itself).
        token = otel_context.attach(parent_context(headers)) if headers else None
        try:
            return await self._calls.run(self._toolhost.pipeline.call(call), request.receive)
        finally:
            if token is not None:
                otel_context.detach(token)


def _trace_headers(trace: ClientTrace, request_headers: Mapping[str, str]) -> dict[str, str]:
    """The W3C trace context the call joins: the body's trace id, else the request's own `traceparent`.

    The body's id gets the sampled flag: a caller naming the trace wants to find it, and a default
    (parent-based) sampler then records the call, exactly as it does for a `traceparent` header with that flag,
    which any caller of any surface may send. The span id is new: the caller named a trace, not a span.
    """
    if trace.w3c_trace_id:
        return {"traceparent": f"00-{trace.w3c_trace_id}-{secrets.randbits(64) or 1:016x}-01"}
    if "traceparent" not in request_headers:
        return {}
    return {key: request_headers[key] for key in TRACE_CONTEXT_KEYS if key in request_headers}


def _function(handler: Handler) -> Handler:
    """`handler` as a function of its own, on which `requires` can note the right (a bound method takes no
    attributes)."""

    async def answer(request: Request) -> Response:
        return await handler(request)

    return answer


def _answering(handler: Handler, where: str) -> Handler:
    """`handler`, with whatever it raises answered by http_errors' table."""

    async def answer(request: Request) -> Response:
        try:
            return await handler(request)
        except Exception as exc:
            error = http_error_of(exc, request.scope, where)
            return JsonBody(error.body, error.status, error.headers)

    return answer


class _ClientGone(Exception):
    """The client closed the connection before its call finished: the call was stopped, nobody reads an answer."""


class _RunningCalls:
    """The execute calls in flight. A call stops when its client goes away (as a cancelled gRPC call does), and
    a shutdown stops those its grace did not see finish."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[CallResult]] = set()
        self._stopped = False

    async def run(self, call: Coroutine[Any, Any, CallResult], receive: Receive) -> CallResult:
        """The result of `call`; `receive` is the request's, its body read already, so that what it says next
        is that the client went away."""
        if self._stopped:
            call.close()
            raise ShuttingDownError(_DRAINING)
        task = asyncio.ensure_future(call)
        gone = asyncio.ensure_future(_disconnected(receive))
        self._tasks.add(task)
        try:
            await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            self._tasks.discard(task)
            if not task.done():
                task.cancel()  # the client went away, or this request is being cancelled: the tool stops
        if not task.done():
            await asyncio.wait({task})  # until the runner has stopped what it started
            raise _ClientGone()
        if task.cancelled():
            raise ShuttingDownError("the server shut down before the call finished; its tool was stopped. Retry on "
                                    "another replica")
        return task.result()

    def stop_all(self) -> None:
        self._stopped = True
        for task in self._tasks:
            task.cancel()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
