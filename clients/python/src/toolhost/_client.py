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
from types import TracebackType
from typing import Any, Literal, TypeVar

import grpc

from ._errors import error_from_rpc
from ._results import GenerationEvent, ReloadResult, ToolInfo, ToolPage, ToolResult
from .v1 import tool_pb2, tool_service_pb2, tool_service_pb2_grpc

__all__ = [
    "DEFAULT_MAX_RECEIVE_MESSAGE_BYTES", "DEFAULT_TARGET", "Client", "Metadata", "ToolView", "ToolWatch",
]

DEFAULT_TARGET = "127.0.0.1:50051"
# A full ListTools page is 1000 tools in the FULL view; with schemas and examples that passes gRPC's 4 MiB
# default, so the client accepts far more.
DEFAULT_MAX_RECEIVE_MESSAGE_BYTES = 64 * 1024 * 1024

ToolView = Literal["basic", "full"]
Metadata = Mapping[str, str] | Sequence[tuple[str, str]]

_VIEWS: dict[str, tool_pb2.ToolView] = {"basic": tool_pb2.TOOL_VIEW_BASIC, "full": tool_pb2.TOOL_VIEW_FULL}
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
    name: str, arguments: Mapping[str, Any] | None, keyword_arguments: Mapping[str, Any], call_id: str | None
) -> tool_service_pb2.CallToolRequest:
    merged = {**(arguments or {}), **keyword_arguments}
    # JSON text, not a Struct: a Struct carries numbers as doubles and would round integers past 2**53.
    text = json.dumps(merged, allow_nan=False, ensure_ascii=False)
    return tool_service_pb2.CallToolRequest(name=name, arguments_json=text, call_id=call_id or "")


class Client:
    """A blocking client of one toolhost server; thread-safe, and meant to be reused.

    `timeout` is the default deadline in seconds of each call (None: no deadline; watch_tools never has
    one unless asked). `metadata` is sent with every call. Pass `channel` to use a channel you built (with
    TLS, interceptors, a load-balancing config ...); the client then leaves it open on close().
    `credentials` makes a TLS channel to `target`. Every gRPC error is raised as a toolhost.ToolhostError
    subclass; a tool that ran and failed is a ToolResult with success=False.
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
    ) -> None:
        self.target = target
        self.timeout = timeout
        self._metadata = metadata_pairs(metadata)
        self._owns_channel = channel is None
        if channel is None:
            options = channel_options(max_receive_message_bytes)
            if credentials is not None:
                channel = grpc.secure_channel(target, credentials, options=options)
            else:
                channel = grpc.insecure_channel(target, options=options)
        self._channel = channel
        self._stub = tool_service_pb2_grpc.ToolServiceStub(channel)
        self._watches: weakref.WeakSet[ToolWatch] = weakref.WeakSet()
        self._lock = threading.Lock()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """End open watch_tools streams and close the channel (unless it was passed in)."""
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

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        /,
        *,
        call_id: str | None = None,
        timeout: float | None = None,
        **kwargs_arguments: Any,
    ) -> ToolResult:
        """Run a tool: `client.call_tool("dns_lookup", {"domain": "example.com"})` or
        `client.call_tool("dns_lookup", domain="example.com")` (keywords win over the mapping; pass arguments
        called `call_id` or `timeout` in the mapping). `timeout` overrides the client's default deadline."""
        request = call_request(name, arguments, kwargs_arguments, call_id)
        return ToolResult.from_proto(self._unary(self._stub.CallTool, request, timeout))

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


class ToolWatch(Iterator[GenerationEvent]):
    """An open WatchTools stream: an iterator of GenerationEvent that close() ends."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self._closed = False

    def __iter__(self) -> ToolWatch:
        return self

    def __next__(self) -> GenerationEvent:
        if self._closed:
            raise StopIteration
        try:
            message = next(self._call)
        except grpc.RpcError as exc:
            # close() cancels the call, which surfaces here as CANCELLED: the end the caller asked for.
            if self._closed:
                raise StopIteration from None
            raise error_from_rpc(exc) from exc
        return GenerationEvent.from_proto(message)

    def close(self) -> None:
        """Cancel the stream; a next() blocked in another thread then ends the iteration."""
        self._closed = True
        self._call.cancel()

    def __enter__(self) -> ToolWatch:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
