"""The blocking client, and the request building it shares with the asyncio client.

    with toolhost.Client("127.0.0.1:50051", timeout=30) as client:
        for tool in client.list_tools(category="network"):
            print(tool.name, tool.description)
        result = client.call_tool("echo", text="hello")
        print(result.output if result.success else result.error)
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Literal, TypeVar

import grpc

from ._asset_methods import AssetMethods
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
from ._streams import ServerStream
from ._user_tool_methods import UserToolMethods
from .v1 import (
    asset_service_pb2_grpc,
    log_service_pb2,
    log_service_pb2_grpc,
    tool_pb2,
    tool_service_pb2,
    tool_service_pb2_grpc,
    user_tool_service_pb2_grpc,
)

__all__ = [
    "DEFAULT_MAX_RECEIVE_MESSAGE_BYTES", "DEFAULT_TARGET", "CallStream", "Client", "LogTail", "Metadata",
    "OutputFormat", "ToolView", "ToolWatch",
]

DEFAULT_TARGET = "127.0.0.1:50051"
# A full ListTools page is 1000 tools in the FULL view; with schemas and examples that passes gRPC's 4 MiB
# default, so the client accepts far more.
DEFAULT_MAX_RECEIVE_MESSAGE_BYTES = 64 * 1024 * 1024

ToolView = Literal["basic", "full"]
Metadata = Mapping[str, str] | Sequence[tuple[str, str]]
OutputFormat = Literal["json", "pretty", "text"]
"""How a call's `output` is written: compact JSON or indented JSON (keys sorted) of the structured output, or
the tool's own text. None (the default) leaves it to the tool."""

_VIEWS: dict[str, tool_pb2.ToolView] = {"basic": tool_pb2.TOOL_VIEW_BASIC, "full": tool_pb2.TOOL_VIEW_FULL}
_OUTPUT_FORMATS: dict[str | None, tool_service_pb2.OutputFormat] = {
    None: tool_service_pb2.OUTPUT_FORMAT_UNSPECIFIED,
    "json": tool_service_pb2.OUTPUT_FORMAT_JSON,
    "pretty": tool_service_pb2.OUTPUT_FORMAT_PRETTY,
    "text": tool_service_pb2.OUTPUT_FORMAT_TEXT,
}
_Response = TypeVar("_Response")


def channel_options(max_receive_message_bytes: int) -> list[tuple[str, int]]:
    return [("grpc.max_receive_message_length", max_receive_message_bytes)]


def metadata_pairs(metadata: Metadata | None) -> tuple[tuple[str, str], ...]:
    if metadata is None:
        return ()
    items: Iterable[tuple[str, str]] = metadata.items() if isinstance(metadata, Mapping) else metadata
    return tuple((str(key).lower(), str(value)) for key, value in items)


def view_value(view: str) -> tool_pb2.ToolView:
    try:
        return _VIEWS[view]
    except KeyError:
        raise ValueError(f"view must be 'basic' or 'full', not {view!r}") from None


def output_format_value(output_format: str | None) -> tool_service_pb2.OutputFormat:
    try:
        return _OUTPUT_FORMATS[output_format]
    except KeyError:
        raise ValueError(f"output_format must be 'json', 'pretty', 'text' or None, not {output_format!r}") from None


def list_request(
    platform: str | None,
    category: str | None,
    tags: Iterable[str],
    provider: str | None,
    view: str,
    page_size: int,
    page_token: str,
) -> tool_service_pb2.ListToolsRequest:
    if isinstance(tags, str):
        raise TypeError("tags must be a list of tags, not one string")
    return tool_service_pb2.ListToolsRequest(
        platform=platform or "",
        category=category or "",
        tags=list(tags),
        provider=provider or "",
        view=view_value(view),
        page_size=page_size,
        page_token=page_token,
    )


def call_request(
    name: str, arguments: Mapping[str, Any] | None, keyword_arguments: Mapping[str, Any], call_id: str | None,
    output_format: str | None = None, filter_empty_fields: bool = False,
) -> tool_service_pb2.CallToolRequest:
    merged = {**(arguments or {}), **keyword_arguments}
    # JSON text, not a Struct: a Struct carries numbers as doubles and would round integers past 2**53.
    text = json.dumps(merged, allow_nan=False, ensure_ascii=False)
    return tool_service_pb2.CallToolRequest(
        name=name, arguments_json=text, call_id=call_id or "", output_format=output_format_value(output_format),
        filter_empty_fields=filter_empty_fields)


def stream_call_request(
    name: str, arguments: Mapping[str, Any] | None, keyword_arguments: Mapping[str, Any], call_id: str | None,
    output_format: str | None = None, filter_empty_fields: bool = False,
) -> tool_service_pb2.StreamCallToolRequest:
    unary = call_request(name, arguments, keyword_arguments, call_id, output_format, filter_empty_fields)
    return tool_service_pb2.StreamCallToolRequest(
        name=unary.name, arguments_json=unary.arguments_json, call_id=unary.call_id,
        output_format=unary.output_format, filter_empty_fields=unary.filter_empty_fields)


class Client(UserToolMethods, AssetMethods):
    """A blocking client of one toolhost server; thread-safe, and meant to be reused.

    `timeout` is the default deadline in seconds of each call (None: no deadline; watch_tools never has
    one unless asked). `metadata` is sent with every call. Pass `channel` to use a channel you built (with
    TLS, interceptors, a load-balancing config ...); the client then leaves it open on close().
    `credentials` makes a TLS channel to `target`; or, simpler, `tls=True` verifies the server with the
    system's roots and `root_certificates` with these (PEM bytes, or a file path), and `client_certificate` with
    `client_key` (PEM bytes or paths) add a client certificate (mTLS). `server_name_override` checks the
    server's certificate for that name instead of the target's host. `token` goes with every call as
    `authorization: Bearer <token>`, over TLS only; in plaintext only to a loopback or unix socket target and
    with `insecure_token_ok=True` (otherwise ValueError says why). Every gRPC error is raised as a
    toolhost.ToolhostError subclass; a tool that ran and failed is a ToolResult with success=False.
    """

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        channel: grpc.Channel | None = None,
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
                channel = grpc.secure_channel(target, security.credentials, options=options)
            else:
                channel = grpc.insecure_channel(target, options=options)
        self._channel = channel
        self._stub = tool_service_pb2_grpc.ToolServiceStub(channel)
        self._log_stub = log_service_pb2_grpc.LogServiceStub(channel)
        self._user_tool_stub = user_tool_service_pb2_grpc.UserToolServiceStub(channel)
        self._asset_stub = asset_service_pb2_grpc.AssetServiceStub(channel)
        self._watches: weakref.WeakSet[ServerStream[Any]] = weakref.WeakSet()
        self._lock = threading.Lock()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """End open watch_tools and tail_logs streams and close the channel (unless it was passed in)."""
        with self._lock:
            watches = list(self._watches)
        for watch in watches:
            watch.close()
        if self._owns_channel:
            self._channel.close()

    def _unary(
        self, method: Callable[..., _Response], request: Any, deadline: float | None = None
    ) -> _Response:
        """Call `method`; `deadline` (seconds) overrides the client's default timeout."""
        timeout = self.timeout if deadline is None else deadline
        try:
            return method(request, timeout=timeout, metadata=self._metadata)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc) from exc

    def list_tools_page(
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
        return ToolPage.from_proto(self._unary(self._stub.ListTools, request))

    def list_tools(
        self,
        platform: str | None = None,
        category: str | None = None,
        tags: Iterable[str] = (),
        provider: str | None = None,
        view: ToolView = "basic",
        page_size: int = 0,
    ) -> Iterator[ToolInfo]:
        """Every tool matching the filters, sorted by name; pages are fetched as the iteration needs them."""
        # Built here, not in the generator, so a bad argument raises at the call, not at the first next().
        return self._pages(list_request(platform, category, tags, provider, view, page_size, ""))

    def _pages(self, request: tool_service_pb2.ListToolsRequest) -> Iterator[ToolInfo]:
        while True:
            page = ToolPage.from_proto(self._unary(self._stub.ListTools, request))
            yield from page.tools
            if not page.next_page_token:
                return
            request.page_token = page.next_page_token

    def get_tool(self, name: str, view: ToolView = "full") -> ToolInfo:
        """One tool by name; NotFoundError (suggesting close names) when there is none."""
        request = tool_service_pb2.GetToolRequest(name=name, view=view_value(view))
        return ToolInfo.from_proto(self._unary(self._stub.GetTool, request).tool)

    def search_tools(
        self,
        query: str,
        *,
        limit: int = 0,
        platform: str | None = None,
        category: str | None = None,
        tags: Iterable[str] = (),
        provider: str | None = None,
    ) -> SearchResults:
        """The tools for a need written in words, best first: at most `limit` (0: the server's 10, at most 50),
        every filter given matching, only tools the caller may see. When one of a tool's intents matches the
        whole query ("check port 5432 on db.example.com"), that tool comes first with the `arguments` to call it
        with. A ranked top list, not paged; InvalidArgumentError for a query over 1,000 characters."""
        request = search_request(query, limit, platform, category, tags, provider)
        return SearchResults.from_proto(self._unary(self._stub.SearchTools, request))

    def call_tool(
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
    ) -> ToolResult:
        """Run a tool: `client.call_tool("dns_lookup", {"domain": "example.com"})` or
        `client.call_tool("dns_lookup", domain="example.com")` (keywords win over the mapping; pass arguments
        called `call_id`, `timeout`, `output_format` or `filter_empty_fields` in the mapping). `timeout`
        overrides the client's default deadline. `output_format` "json" or "pretty" writes `output` from the
        structured output (a tool without one keeps its text), "text" keeps the tool's text;
        `filter_empty_fields` drops null and empty fields from the structured output and its rendering."""
        request = call_request(name, arguments, kwargs_arguments, call_id, output_format, filter_empty_fields)
        return ToolResult.from_proto(self._unary(self._stub.CallTool, request, timeout))

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
    ) -> CallStream:
        """Run a tool and follow it: iterate the returned stream for CallProgress and OutputChunk events as
        they happen, then a ToolResult (the same as call_tool's, output included)::

            with client.stream_call("ping", host="example.com") as stream:
                for event in stream:
                    if isinstance(event, toolhost.OutputChunk):
                        print(event.text, end="")

        Arguments as for call_tool; `output_format` shapes the ToolResult's output, not the chunks (the tool's
        text as it writes it). Errors before the tool starts are raised by the iteration."""
        request = stream_call_request(name, arguments, kwargs_arguments, call_id, output_format, filter_empty_fields)
        return CallStream(self._stub.StreamCallTool(
            request, timeout=self.timeout if timeout is None else timeout, metadata=self._metadata))

    def get_instructions(self, provider: str) -> Instructions:
        """The block for the system prompt of an agent of `provider` ("claude_code", "codex", "anthropic",
        "openai", "openai_compatible") about the tools it is offered; InvalidArgumentError for another."""
        request = tool_service_pb2.GetInstructionsRequest(provider=provider)
        return Instructions.from_proto(self._unary(self._stub.GetInstructions, request))

    def reload(self) -> ReloadResult:
        """Ask the server to read its catalog directories again and swap in the result."""
        return ReloadResult.from_proto(self._unary(self._stub.Reload, tool_service_pb2.ReloadRequest()))

    def watch_tools(self, *, timeout: float | None = None) -> ToolWatch:
        """A stream of registry generations, the current one first. Iterate it; close() it (or the client)
        from any thread to stop, which ends the iteration. No deadline unless `timeout` is given."""
        call = self._stub.WatchTools(tool_service_pb2.WatchToolsRequest(), timeout=timeout,
                                     metadata=self._metadata)
        watch = ToolWatch(call)
        with self._lock:
            self._watches.add(watch)
        return watch

    def query_logs_page(
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
        """One page of the server's log records, newest first, with a summary (needs the admin role when the
        server authenticates). `level` keeps that level and above; `since` and `until` are timezone-aware
        datetimes; `text` is part of the message (any case); `source` is "memory", "file" or "database"."""
        request = query_logs_request(level, since, until, text, trace_id, source, page_size, page_token)
        return LogPage.from_proto(self._unary(self._log_stub.QueryLogs, request))

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
    ) -> Iterator[LogEntry]:
        """Every matching log record, newest first; pages are fetched as the iteration needs them."""
        return self._log_pages(query_logs_request(level, since, until, text, trace_id, source, page_size, ""))

    def _log_pages(self, request: log_service_pb2.QueryLogsRequest) -> Iterator[LogEntry]:
        while True:
            page = LogPage.from_proto(self._unary(self._log_stub.QueryLogs, request))
            yield from page.records
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
    ) -> LogTail:
        """Follow the server's logs: the newest `backlog` matching records, then each new one, oldest first.
        Iterate it; close() it (or the client) from any thread to stop. No deadline unless `timeout` is given."""
        request = tail_logs_request(level, since, text, trace_id, source, backlog)
        tail = LogTail(self._log_stub.TailLogs(request, timeout=timeout, metadata=self._metadata))
        with self._lock:
            self._watches.add(tail)
        return tail


class ToolWatch(ServerStream[GenerationEvent]):
    """An open WatchTools stream: an iterator of GenerationEvent that close() ends."""

    def __init__(self, call: Any) -> None:
        super().__init__(call, GenerationEvent.from_proto)


class LogTail(ServerStream[LogEntry]):
    """An open TailLogs stream: an iterator of LogEntry that close() ends."""

    def __init__(self, call: Any) -> None:
        super().__init__(call, tail_entry)


class CallStream(ServerStream[StreamEvent]):
    """An open StreamCallTool stream: CallProgress and OutputChunk events, then one ToolResult.

    close() (or leaving a `with` block) cancels the call, which stops the tool on the server.
    """

    def __init__(self, call: Any) -> None:
        super().__init__(call, stream_event_from_proto)
