"""A bound on the subscriptions/listen streams /mcp holds open: each one keeps a connection (a file descriptor),
an SSE response and a registry watcher for as long as the client stays, so any token could otherwise open them
until the process runs out of descriptors and can no longer accept gRPC connections or start tools.

    streams = ListenStreams(total=256, per_owner=16)
    backend = StreamLimitedBackend(backend, streams, owner)   # tool_changes() raises beyond either bound
    changes = backend.tool_changes()                          # close it (aclose) to give its place back
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Hashable

from .backend import BackendUnavailableError, CallArguments, CallOutcome, ProgressReport, ToolBackend, ToolPage

# One client needs one stream; a few more leave room for reconnects whose old stream the server has not yet
# seen close.
LISTEN_STREAMS_PER_OWNER = 16


class ListenStreams:
    """The open streams, counted in total and by owner (an identity and its client address)."""

    def __init__(self, total: int, per_owner: int = LISTEN_STREAMS_PER_OWNER) -> None:
        self.total = total
        self.per_owner = per_owner
        self._open: dict[Hashable, int] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def hold(self, owner: Hashable) -> Callable[[], None]:
        """Count one more stream of `owner`, and return what gives its place back (call it once);
        BackendUnavailableError when either bound is reached."""
        mine = self._open.get(owner, 0)
        if mine >= self.per_owner:
            raise BackendUnavailableError(f"this client already has {mine} subscriptions/listen streams open, the most "
                                    "one caller may: close one before opening another (one stream per client "
                                    "is enough)")
        if self._count >= self.total:
            raise BackendUnavailableError(f"the server already holds {self._count} subscriptions/listen streams, its "
                                    "limit (max_in_flight_calls): retry later, or on another replica")
        self._open[owner] = mine + 1
        self._count += 1
        return lambda: self._release(owner)

    def _release(self, owner: Hashable) -> None:
        self._count -= 1
        left = self._open[owner] - 1
        if left:
            self._open[owner] = left
        else:
            del self._open[owner]


class StreamLimitedBackend:
    """`backend` whose tool_changes() takes one of `streams` for `owner` at once (or raises BackendUnavailableError,
    before the caller acknowledges anything) and holds it until the changes end or are closed."""

    def __init__(self, backend: ToolBackend, streams: ListenStreams, owner: Hashable) -> None:
        self._backend = backend
        self._streams = streams
        self._owner = owner

    async def list_tools(self, cursor: str) -> ToolPage:
        return await self._backend.list_tools(cursor)

    async def call(self, request: CallArguments, progress: ProgressReport | None) -> CallOutcome:
        return await self._backend.call(request, progress)

    def tool_changes(self) -> AsyncIterator[None]:
        release = self._streams.hold(self._owner)
        return _HeldChanges(self._backend.tool_changes(), release)


class _HeldChanges:
    """The changes of one stream, holding its place until they end, fail or are closed (aclose)."""

    def __init__(self, changes: AsyncIterator[None], release: Callable[[], None]) -> None:
        self._changes = changes
        self._release: Callable[[], None] | None = release

    def __aiter__(self) -> _HeldChanges:
        return self

    async def __anext__(self) -> None:
        try:
            return await anext(self._changes)
        except BaseException:
            self._let_go()
            raise

    async def aclose(self) -> None:
        self._let_go()
        close = getattr(self._changes, "aclose", None)
        if close is not None:
            await close()

    def _let_go(self) -> None:
        if self._release is not None:
            self._release()
            self._release = None
