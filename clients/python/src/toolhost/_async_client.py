"""The asyncio client, over grpc.aio; the same methods as Client, awaited.

    async with toolhost.AsyncClient("127.0.0.1:50051", timeout=30) as client:
        async for tool in client.list_tools(category="network"):
            print(tool.name)
        result = await client.call_tool("echo", text="hello")
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

import grpc

from ._asset_methods import AsyncAssetMethods
from ._client import (
    DEFAULT_MAX_RECEIVE_MESSAGE_BYTES,
    DEFAULT_TARGET,
    Metadata,
    OutputFormat,
    ToolView,
    call_request,
    channel_options,
    list_request,
    metadata_pairs,
    stream_call_request,
    view_value,
)
from ._connection import PemSource, channel_security, with_security_metadata
from ._errors import error_from_rpc
from ._instructions import Instructions
from ._logs import LogEntry, LogPage, query_logs_request, tail_entry, tail_logs_request
from ._results import (
    GenerationEvent,
    ReloadResult,
    StreamEvent,
    ToolInfo,
    ToolPage,
    ToolResult,
    stream_event_from_proto,
)
from ._search import SearchResults, search_request
from ._streams import AsyncServerStream
from ._user_tool_methods import AsyncUserToolMethods
from .v1 import (
    asset_service_pb2_grpc,
    log_service_pb2,
    log_service_pb2_grpc,
    tool_service_pb2,
    tool_service_pb2_grpc,
    user_tool_service_pb2_grpc,
)

__all__ = ["AsyncCallStream", "AsyncClient", "AsyncLogTail", "AsyncToolWatch"]

_Response = TypeVar("_Response")


class AsyncClient(AsyncUserToolMethods, AsyncAssetMethods):
    """An asyncio client of one toolhost server. Create it inside a running event loop and reuse it.

    The arguments mean what they mean for Client: `timeout` is the default deadline in seconds of each call,
    `metadata` goes with every call, a `channel` you pass (a grpc.aio.Channel) stays open on close(); `tls`,
    `root_certificates`, `client_certificate`, `client_key`, `server_name_override`, `token` and
    `insecure_token_ok` choose TLS and authentication as for Client.
    """

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        channel: grpc.aio.Channel | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        max_receive_message_bytes: int = DEFAULT_MAX_RECEIVE_MESSAGE_BYTES,
        tls: bool = False,
        root_certificates: PemSource | None = None,
        client_certificate: PemSource | None = None,
        client_key: PemSource | None = None,
        server_name_override: str | None = None,
        token: str | None = None,
        insecure_token_ok: bool = False,
    ) -> None:
        security = channel_security(
            target, credentials=credentials, tls=tls, root_certificates=root_certificates,
            client_certificate=client_certificate, client_key=client_key, server_name_override=server_name_override,
            token=token, insecure_token_ok=insecure_token_ok, own_channel=channel is None)
        self.target = target
        self.timeout = timeout
        self._metadata = with_security_metadata(metadata_pairs(metadata), security)
        self._owns_channel = channel is None
        if channel is None:
            options = [*channel_options(max_receive_message_bytes), *security.options]
            if security.credentials is not None:
                channel = grpc.aio.secure_channel(target, security.credentials, options=options)
            else:
                channel = grpc.aio.insecure_channel(target, options=options)
        self._channel = channel
        self._stub = tool_service_pb2_grpc.ToolServiceStub(channel)
        self._log_stub = log_service_pb2_grpc.LogServiceStub(channel)
        self._user_tool_stub = user_tool_service_pb2_grpc.UserToolServiceStub(channel)
        self._asset_stub = asset_service_pb2_grpc.AssetServiceStub(channel)
        self._watches: weakref.WeakSet[AsyncServerStream[Any]] = weakref.WeakSet()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """End open watch_tools and tail_logs streams and close the channel (unless it was passed in)."""
        for watch in list(self._watches):
            await watch.aclose()
        if self._owns_channel:
            await self._channel.close()

    async def _unary(
        self, method: Callable[..., Awaitable[_Response]], request: Any, deadline: float | None = None
    ) -> _Response:
        """Call `method`; `deadline` (seconds) overrides the client's default timeout."""
        timeout = self.timeout if deadline is None else deadline
        try:
            return await method(request, timeout=timeout, metadata=self._metadata)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc) from exc

    async def list_tools_page(
        self,
        platform: str | None = None,
        category: str | None = None,
        tags: Iterable[str] = (),
        provider: str | None = None,
        view: ToolView = "basic",
        page_size: int = 0,
        page_token: str = "",
    ) -> ToolPage:
        """One page of tools matching every filter given (page_size 0: the server's 100, at most 1000)."""
        request = list_request(platform, category, tags, provider, view, page_size, page_token)
        return ToolPage.from_proto(await self._unary(self._stub.ListTools, request))

    def list_tools(
        self,
        platform: str | None = None,
        category: str | None = None,
        tags: Iterable[str] = (),
        provider: str | None = None,
        view: ToolView = "basic",
        page_size: int = 0,
    ) -> AsyncIterator[ToolInfo]:
        """Every tool matching the filters, sorted by name: `async for tool in client.list_tools(): ...`.
        Pages are fetched as the iteration reaches them."""
        return self._pages(list_request(platform, category, tags, provider, view, page_size, ""))

    async def _pages(self, request: tool_service_pb2.ListToolsRequest) -> AsyncIterator[ToolInfo]:
        while True:
            page = ToolPage.from_proto(await self._unary(self._stub.ListTools, request))
            for tool in page.tools:
                yield tool
            if not page.next_page_token:
                return
            request.page_token = page.next_page_token

    async def get_tool(self, name: str, view: ToolView = "full") -> ToolInfo:
        """One tool by name; NotFoundError (suggesting close names) when there is none."""
        request = tool_service_pb2.GetToolRequest(name=name, view=view_value(view))
        return ToolInfo.from_proto((await self._unary(self._stub.GetTool, request)).tool)

    async def search_tools(
        self,
        query: str,
        *,
        limit: int = 0,
        platform: str | None = None,
        category: str | None = None,
        tags: Iterable[str] = (),
        provider: str | None = None,
    ) -> SearchResults:
        """As Client.search_tools: the tools for a need in words, best first (an intent's match first)."""
        request = search_request(query, limit, platform, category, tags, provider)
        return SearchResults.from_proto(await self._unary(self._stub.SearchTools, request))

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        /,
        *,
        call_id: str | None = None,
        # The gRPC deadline of this call, the same parameter as Client.call_tool's.
        timeout: float | None = None,  # noqa: ASYNC109
        output_format: OutputFormat | None = None,
        filter_empty_fields: bool = False,
        **kwargs_arguments: Any,
    ) -> ToolResult:
        """Run a tool; see Client.call_tool."""
        request = call_request(name, arguments, kwargs_arguments, call_id, output_format, filter_empty_fields)
        return ToolResult.from_proto(await self._unary(self._stub.CallTool, request, timeout))

    def stream_call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        /,
        *,
        call_id: str | None = None,
        timeout: float | None = None,
        output_format: OutputFormat | None = None,
        filter_empty_fields: bool = False,
        **kwargs_arguments: Any,
    ) -> AsyncCallStream:
        """Run a tool and follow it with `async for event in client.stream_call(...)`; see Client.stream_call."""
        request = stream_call_request(name, arguments, kwargs_arguments, call_id, output_format, filter_empty_fields)
        return AsyncCallStream(self._stub.StreamCallTool(
            request, timeout=self.timeout if timeout is None else timeout, metadata=self._metadata))

    async def get_instructions(self, provider: str) -> Instructions:
        """The block for the system prompt of an agent of `provider` ("claude_code", "codex", "anthropic",
        "openai", "openai_compatible") about the tools it is offered; InvalidArgumentError for another."""
        request = tool_service_pb2.GetInstructionsRequest(provider=provider)
        return Instructions.from_proto(await self._unary(self._stub.GetInstructions, request))

    async def reload(self) -> ReloadResult:
        """Ask the server to read its catalog directories again and swap in the result."""
        return ReloadResult.from_proto(await self._unary(self._stub.Reload, tool_service_pb2.ReloadRequest()))

    def watch_tools(self, *, timeout: float | None = None) -> AsyncToolWatch:
        """A stream of registry generations, the current one first: `async for event in client.watch_tools()`.
        aclose() it (or the client) to stop; cancelling the task that iterates also cancels the stream."""
        call = self._stub.WatchTools(tool_service_pb2.WatchToolsRequest(), timeout=timeout,
                                     metadata=self._metadata)
        watch = AsyncToolWatch(call)
        self._watches.add(watch)
        return watch

    async def query_logs_page(
        self,
        *,
        level: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        text: str | None = None,
        trace_id: str | None = None,
        source: str | None = None,
        page_size: int = 0,
        page_token: str = "",
    ) -> LogPage:
        """One page of the server's log records, newest first, with a summary; see Client.query_logs_page."""
        request = query_logs_request(level, since, until, text, trace_id, source, page_size, page_token)
        return LogPage.from_proto(await self._unary(self._log_stub.QueryLogs, request))

    def query_logs(
        self,
        *,
        level: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        text: str | None = None,
        trace_id: str | None = None,
        source: str | None = None,
        page_size: int = 0,
    ) -> AsyncIterator[LogEntry]:
        """Every matching log record, newest first: `async for entry in client.query_logs(level="ERROR")`."""
        return self._log_pages(query_logs_request(level, since, until, text, trace_id, source, page_size, ""))

    async def _log_pages(self, request: log_service_pb2.QueryLogsRequest) -> AsyncIterator[LogEntry]:
        while True:
            page = LogPage.from_proto(await self._unary(self._log_stub.QueryLogs, request))
            for entry in page.records:
                yield entry
            if not page.next_page_token:
                return
            request.page_token = page.next_page_token

    def tail_logs(
        self,
        *,
        level: str | None = None,
        since: datetime | None = None,
        text: str | None = None,
        trace_id: str | None = None,
        source: str | None = None,
        backlog: int = 0,
        timeout: float | None = None,
    ) -> AsyncLogTail:
        """Follow the server's logs: `async for entry in client.tail_logs(backlog=10)`; see Client.tail_logs."""
        request = tail_logs_request(level, since, text, trace_id, source, backlog)
        tail = AsyncLogTail(self._log_stub.TailLogs(request, timeout=timeout, metadata=self._metadata))
        self._watches.add(tail)
        return tail


class AsyncToolWatch(AsyncServerStream[GenerationEvent]):
    """An open WatchTools stream: an async iterator of GenerationEvent that aclose() ends."""

    def __init__(self, call: Any) -> None:
        super().__init__(call, GenerationEvent.from_proto)


class AsyncLogTail(AsyncServerStream[LogEntry]):
    """An open TailLogs stream: an async iterator of LogEntry that aclose() ends."""

    def __init__(self, call: Any) -> None:
        super().__init__(call, tail_entry)


class AsyncCallStream(AsyncServerStream[StreamEvent]):
    """An open StreamCallTool stream: CallProgress and OutputChunk events, then one ToolResult.

    aclose() (or leaving an `async with` block, or cancelling the iterating task) stops the tool on the server.
    """

    def __init__(self, call: Any) -> None:
        super().__init__(call, stream_event_from_proto)
