"""Server streams (WatchTools, StreamCallTool) as iterators that close() ends, blocking and asyncio."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from types import TracebackType
from typing import Any, Generic, TypeVar

import grpc

from ._errors import error_from_rpc

_Event = TypeVar("_Event")


class ServerStream(Iterator[_Event], Generic[_Event]):
    """An open server stream of a blocking client: an iterator of events that close() ends."""

    def __init__(self, call: Any, convert: Callable[[Any], _Event]) -> None:
        self._call = call
        self._convert = convert
        self._closed = False

    def __iter__(self) -> ServerStream[_Event]:
        return self

    def __next__(self) -> _Event:
        if self._closed:
            raise StopIteration
        try:
            message = next(self._call)
        except grpc.RpcError as exc:
            # close() cancels the call, which surfaces here as CANCELLED: the end the caller asked for.
            if self._closed:
                raise StopIteration from None
            raise error_from_rpc(exc) from exc
        return self._convert(message)

    def close(self) -> None:
        """Cancel the stream (the server stops what it does for it); a next() blocked in another thread then
        ends the iteration."""
        self._closed = True
        self._call.cancel()

    def __enter__(self) -> ServerStream[_Event]:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AsyncServerStream(AsyncIterator[_Event], Generic[_Event]):
    """An open server stream of the asyncio client: an async iterator of events that aclose() ends."""

    def __init__(self, call: Any, convert: Callable[[Any], _Event]) -> None:
        self._call = call
        self._convert = convert
        self._closed = False

    def __aiter__(self) -> AsyncServerStream[_Event]:
        return self

    async def __anext__(self) -> _Event:
        if self._closed:
            raise StopAsyncIteration
        try:
            message = await self._call.read()
        except asyncio.CancelledError:
            # grpc.aio reports a locally cancelled call as CancelledError. After aclose() that is the end the
            # caller asked for; a cancellation of this task itself must go on.
            if self._closed and not _task_is_cancelling():
                raise StopAsyncIteration from None
            raise
        except grpc.RpcError as exc:
            if self._closed:
                raise StopAsyncIteration from None
            raise error_from_rpc(exc) from exc
        if message is grpc.aio.EOF:
            raise StopAsyncIteration
        return self._convert(message)

    async def aclose(self) -> None:
        """Cancel the stream (the server stops what it does for it); an iteration waiting then ends."""
        self._closed = True
        self._call.cancel()

    async def __aenter__(self) -> AsyncServerStream[_Event]:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def _task_is_cancelling() -> bool:
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)  # Task.cancelling() is new in Python 3.11
    return bool(cancelling()) if cancelling is not None else False
