"""toolhost.v1.ToolService over grpc.aio: requests to domain calls, results to responses, errors to status."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from toolhost.v1 import tool_pb2, tool_service_pb2, tool_service_pb2_grpc

from ..app import Toolhost
from ..listing import ToolFilter, list_tools
from ..pipeline import CallRequest
from .convert import ToolMessages, call_response, reload_response, struct_to_dict, watch_response
from .remote_client import HOPS_METADATA_KEY
from .status import status_of, translate_errors

SERVICE_NAME = tool_service_pb2.DESCRIPTOR.services_by_name["ToolService"].full_name
# W3C trace context travels with a forwarded call, so a call through several toolhosts is one trace.
TRACE_METADATA_KEYS = ("traceparent", "tracestate")


class ToolService(tool_service_pb2_grpc.ToolServiceServicer):
    def __init__(self, toolhost: Toolhost) -> None:
        self._toolhost = toolhost
        self._messages = ToolMessages()
        toolhost.registry.add_listener(self._messages.prepare)

    @translate_errors
    async def ListTools(
        self, request: tool_service_pb2.ListToolsRequest, context: grpc.aio.ServicerContext
    ) -> tool_service_pb2.ListToolsResponse:
        tool_filter = ToolFilter(request.platform, request.category, tuple(request.tags), request.provider)
        page = list_tools(self._toolhost.registry.snapshot, tool_filter, request.page_size, request.page_token)
        response = tool_service_pb2.ListToolsResponse(
            next_page_token=page.next_page_token, total_size=page.total_size, generation=page.generation)
        full = request.view == tool_pb2.TOOL_VIEW_FULL
        response.MergeFromString(self._messages.page((t.spec for t in page.tools), full))
        return response

    @translate_errors
    async def GetTool(
        self, request: tool_service_pb2.GetToolRequest, context: grpc.aio.ServicerContext
    ) -> tool_service_pb2.GetToolResponse:
        snapshot = self._toolhost.registry.snapshot
        tool = snapshot.get(request.name)
        full = request.view != tool_pb2.TOOL_VIEW_BASIC
        return tool_service_pb2.GetToolResponse(
            tool=self._messages.get(tool.spec, full), generation=snapshot.generation)

    @translate_errors
    async def CallTool(
        self, request: tool_service_pb2.CallToolRequest, context: grpc.aio.ServicerContext
    ) -> tool_service_pb2.CallToolResponse:
        which = request.WhichOneof("args")
        metadata = dict(context.invocation_metadata() or ())
        call = CallRequest(
            name=request.name,
            arguments=struct_to_dict(request.arguments) if which == "arguments" else None,
            arguments_json=request.arguments_json if which == "arguments_json" else None,
            call_id=request.call_id,
            caller_timeout_seconds=context.time_remaining(),
            hops=_hops(metadata.get(HOPS_METADATA_KEY)),
            trace_headers={k: str(metadata[k]) for k in TRACE_METADATA_KEYS if k in metadata},
        )
        return call_response(await self._toolhost.pipeline.call(call))

    @translate_errors
    async def Reload(
        self, request: tool_service_pb2.ReloadRequest, context: grpc.aio.ServicerContext
    ) -> tool_service_pb2.ReloadResponse:
        return reload_response(await self._toolhost.reloader.reload("Reload RPC"))

    async def WatchTools(
        self, request: tool_service_pb2.WatchToolsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[tool_service_pb2.WatchToolsResponse]:
        try:
            async for change in self._toolhost.registry.watch():
                yield watch_response(change)
        except Exception as exc:
            await context.abort_with_status(status_of(exc, "WatchTools"))


def _hops(value: str | bytes | None) -> int:
    try:
        return max(0, int(value or 0))
    except ValueError:
        return 0
