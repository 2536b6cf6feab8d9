"""toolhost.v1.ToolService over grpc.aio: requests to domain calls, results to responses, errors to status."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing

import grpc

from toolhost.v1 import tool_pb2, tool_service_pb2, tool_service_pb2_grpc

from ..app import Toolhost
from ..auth import Caller, find_visible, generation_seen, view_of
from ..auth.rights import Right
from ..errors import InvalidRequestError
from ..listing import list_tools
from ..pipeline import CallRequest
from ..telemetry.trace_context import TRACE_CONTEXT_KEYS
from .authentication import authenticate
from .convert import (
    ToolMessages,
    call_response,
    reload_response,
    result_format_of,
    stream_response,
    struct_to_dict,
    watch_response,
)
from .remote_client import HOPS_METADATA_KEY
from .rights import requires
from .search_messages import search_response
from .status import status_of, translate_errors

SERVICE_NAME = tool_service_pb2.DESCRIPTOR.services_by_name["ToolService"].full_name
# The caller's W3C trace context, which the remote runner passes on when this server does not trace itself
# (when it does, the RPC observer's server span has made it the parent of this call's spans).
TRACE_METADATA_KEYS = TRACE_CONTEXT_KEYS


class ToolService(tool_service_pb2_grpc.ToolServiceServicer):
    def __init__(self, toolhost: Toolhost) -> None:
        self._toolhost = toolhost
        self._messages = ToolMessages()
        toolhost.registry.add_listener(self._messages.prepare)

    def _caller(self, context: grpc.aio.ServicerContext) -> Caller:
        """Who sent this request; UnauthenticatedError when the server requires credentials it lacks."""
        return authenticate(self._toolhost.authenticator, context, self._toolhost.config.trusted_unix_socket)

    @requires(Right.AUTHENTICATED)
    @translate_errors
    async def ListTools(
        self, request: tool_service_pb2.ListToolsRequest, context: grpc.aio.ServicerContext
    ) -> bytes:
        """The ListToolsResponse, serialized: its small fields, then the tools as kept serialized (in the wire
        format, concatenated messages are one message with the repeated fields appended); the RPC observer's
        serializer passes bytes through."""
        tool_filter = self._toolhost.tool_filter(request.platform, request.category, request.tags, request.provider)
        caller, registry = self._caller(context), self._toolhost.registry
        page = list_tools(registry.snapshot, tool_filter, request.page_size, request.page_token, caller)
        head = tool_service_pb2.ListToolsResponse(next_page_token=page.next_page_token, total_size=page.total_size,
                                                  generation=generation_seen(registry, caller))
        full = request.view == tool_pb2.TOOL_VIEW_FULL
        return head.SerializeToString() + self._messages.page((t.spec for t in page.tools), full)

    @requires(Right.AUTHENTICATED)
    @translate_errors
    async def GetTool(
        self, request: tool_service_pb2.GetToolRequest, context: grpc.aio.ServicerContext
    ) -> tool_service_pb2.GetToolResponse:
        caller = self._caller(context)
        if not request.name:
            # A missing name is the caller's slip, as CallTool says: not an unknown tool called ''.
            raise InvalidRequestError("name is required: the name of the tool to describe (ListTools shows them)")
        registry = self._toolhost.registry
        tool = find_visible(registry.snapshot, caller, request.name)
        full = request.view != tool_pb2.TOOL_VIEW_BASIC
        return tool_service_pb2.GetToolResponse(
            tool=self._messages.get(tool.spec, full), generation=generation_seen(registry, caller))

    @requires(Right.AUTHENTICATED)
    @translate_errors
    async def CallTool(
        self, request: tool_service_pb2.CallToolRequest, context: grpc.aio.ServicerContext
    ) -> tool_service_pb2.CallToolResponse:
        call = _call_request(request, context, self._caller(context))
        return call_response(await self._toolhost.pipeline.call(call))

    @requires(Right.AUTHENTICATED)
    async def StreamCallTool(
        self, request: tool_service_pb2.StreamCallToolRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[tool_service_pb2.StreamCallToolResponse]:
        # When the client cancels, grpc cancels this generator; closing the pipeline's stream stops the tool.
        try:
            call = _call_request(request, context, self._caller(context))
            async with aclosing(self._toolhost.pipeline.stream(call)) as events:
                async for event in events:
                    yield stream_response(event)
        except Exception as exc:
            await context.abort_with_status(status_of(exc, "StreamCallTool"))

    @requires(Right.ADMIN)
    @translate_errors
    async def Reload(
        self, request: tool_service_pb2.ReloadRequest, context: grpc.aio.ServicerContext
    ) -> tool_service_pb2.ReloadResponse:
        return reload_response(await self._toolhost.reload(self._caller(context), "Reload RPC"))

    @requires(Right.AUTHENTICATED)
    @translate_errors
    async def GetInstructions(
        self, request: tool_service_pb2.GetInstructionsRequest, context: grpc.aio.ServicerContext
    ) -> tool_service_pb2.GetInstructionsResponse:
        instructions = self._toolhost.instructions(self._caller(context), request.provider)
        return tool_service_pb2.GetInstructionsResponse(markdown=instructions.markdown,
                                                        tool_names=instructions.tool_names)

    @requires(Right.AUTHENTICATED)
    @translate_errors
    async def SearchTools(
        self, request: tool_service_pb2.SearchToolsRequest, context: grpc.aio.ServicerContext
    ) -> tool_service_pb2.SearchToolsResponse:
        # Who asks comes first: a caller without credentials learns nothing, not even that its filter is wrong.
        caller = self._caller(context)
        tool_filter = self._toolhost.tool_filter(request.platform, request.category, request.tags, request.provider)
        results = self._toolhost.tool_search.search(request.query, caller, tool_filter, request.page_size)
        return search_response(results, self._messages)

    @requires(Right.AUTHENTICATED)
    async def WatchTools(
        self, request: tool_service_pb2.WatchToolsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[tool_service_pb2.WatchToolsResponse]:
        try:
            # The stream keeps the rights its caller had when it opened, as a call keeps its snapshot, and
            # streams the generations of that caller's view.
            registry = self._toolhost.registry
            async for change in registry.watch(view_of(registry, self._caller(context))):
                yield watch_response(change)
        except Exception as exc:
            await context.abort_with_status(status_of(exc, "WatchTools"))


def _call_request(
    request: tool_service_pb2.CallToolRequest | tool_service_pb2.StreamCallToolRequest,
    context: grpc.aio.ServicerContext,
    caller: Caller,
) -> CallRequest:
    which = request.WhichOneof("args")
    received = context.invocation_metadata() or ()
    metadata = dict(received)
    return CallRequest(
        name=request.name,
        arguments=struct_to_dict(request.arguments) if which == "arguments" else None,
        arguments_json=request.arguments_json if which == "arguments_json" else None,
        call_id=request.call_id,
        caller_timeout_seconds=context.time_remaining(),
        hops=_hops([value for key, value in received if key == HOPS_METADATA_KEY]),
        trace_headers={k: str(metadata[k]) for k in TRACE_METADATA_KEYS if k in metadata},
        caller=caller,
        result_format=result_format_of(request),
    )


def _hops(values: list[str | bytes]) -> int:
    """How many toolhosts forwarded the call (the remote runner adds one each time): a whole number; of several
    values the largest, so that a repeated header cannot lower the count a loop would reach."""
    hops = 0
    for value in values:
        text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
        # At most 20 digits: any count that long is over every limit, and int() of thousands of digits is slow.
        if not (text.isascii() and text.isdigit() and len(text) <= 20):
            raise InvalidRequestError(
                f"the {HOPS_METADATA_KEY} metadata must be a whole number of at most 20 digits, the toolhosts the "
                "call passed through; only a toolhost's remote runner sends it")
        hops = max(hops, int(text))
    return hops
