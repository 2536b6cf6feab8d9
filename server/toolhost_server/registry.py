"""The registry: an immutable snapshot of the served tools, swapped whole on reload, and its watchers.

A call takes the current snapshot once and keeps it to the end, so a reload never changes a tool under a
running call. Only the generation counter and the snapshot reference change, and only on the event loop.
"""

from __future__ import annotations

import asyncio
import bisect
import difflib
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .errors import ToolNotFoundError
from .model import ToolSpec
from .runners import Runner
from .schema import ArgumentValidator

logger = logging.getLogger("toolhost.registry")


@dataclass(frozen=True, slots=True)
class RegisteredTool:
    """A tool ready to call: its definition, its runner and its compiled argument validator."""

    spec: ToolSpec
    runner: Runner
    validator: ArgumentValidator


@dataclass(frozen=True, slots=True)
class CatalogProblem:
    """A bad catalog file or directory: where, and why. `line` is 1-based, 0 when unknown."""

    file: str
    line: int
    reason: str


@dataclass(frozen=True, slots=True)
class GenerationChange:
    """How one generation differs from the one before."""

    generation: int
    count: int
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]


class Snapshot:
    """One immutable generation of the registry."""

    _FILTER_CACHE_SIZE = 128

    def __init__(self, generation: int, tools: Mapping[str, RegisteredTool]) -> None:
        self.generation = generation
        self._tools = dict(tools)
        self.names: tuple[str, ...] = tuple(sorted(self._tools))
        # Filtered name lists, computed on first use per filter, so paging through a filter is a bisect.
        self._filtered: OrderedDict[object, tuple[str, ...]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def tools(self) -> Mapping[str, RegisteredTool]:
        return self._tools

    def get(self, name: str) -> RegisteredTool:
        """The tool called `name`, or ToolNotFoundError suggesting close names."""
        try:
            return self._tools[name]
        except KeyError:
            raise ToolNotFoundError(name, close_names(name, self.names)) from None

    def filtered(self, key: object, predicate: Callable[[ToolSpec], bool]) -> tuple[str, ...]:
        """The sorted names of the tools that match `predicate`, cached under `key`."""
        cached = self._filtered.get(key)
        if cached is not None:
            self._filtered.move_to_end(key)
            return cached
        names = tuple(n for n in self.names if predicate(self._tools[n].spec))
        self._filtered[key] = names
        if len(self._filtered) > self._FILTER_CACHE_SIZE:
            self._filtered.popitem(last=False)
        return names

    @staticmethod
    def position_after(names: Sequence[str], after: str) -> int:
        """The index of the first name greater than `after` in a sorted sequence."""
        return bisect.bisect_right(names, after)


def close_names(name: str, names: Sequence[str]) -> list[str]:
    """Up to three of `names` that look like `name`, closest first: what a NOT_FOUND suggests."""
    return difflib.get_close_matches(name, names, n=3, cutoff=0.6)


def diff(old: Snapshot, new_tools: Mapping[str, RegisteredTool]) -> tuple[list[str], list[str], list[str]]:
    """The names added, removed and changed from `old` to `new_tools`, each sorted."""
    old_tools = old.tools()
    added = sorted(n for n in new_tools if n not in old_tools)
    removed = sorted(n for n in old_tools if n not in new_tools)
    changed = sorted(
        n for n, t in new_tools.items()
        if n in old_tools and (old_tools[n].spec.content_hash != t.spec.content_hash
                               or old_tools[n].spec.origin != t.spec.origin)
    )
    return added, removed, changed


@dataclass(eq=False)  # identity semantics: each stream is its own watcher
class _Watcher:
    queue: asyncio.Queue[GenerationChange | None] = field(default_factory=lambda: asyncio.Queue(maxsize=256))


class Registry:
    """Holds the current snapshot and tells watchers about each new generation."""

    def __init__(self) -> None:
        self._snapshot = Snapshot(0, {})
        self._watchers: set[_Watcher] = set()
        self._closed = False
        self._listeners: list[Callable[[Snapshot], None]] = []

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    def add_listener(self, listener: Callable[[Snapshot], None]) -> None:
        """Call `listener` with each new snapshot before it serves (to prepare per-snapshot artefacts)."""
        self._listeners.append(listener)
        listener(self._snapshot)

    def swap(self, tools: Mapping[str, RegisteredTool]) -> GenerationChange | None:
        """Make `tools` the serving set. Returns the change, or None when nothing changed (no new generation)."""
        added, removed, changed = diff(self._snapshot, tools)
        if not (added or removed or changed) and self._snapshot.generation > 0:
            return None
        new = Snapshot(self._snapshot.generation + 1, tools)
        for listener in self._listeners:
            listener(new)
        self._snapshot = new
        change = GenerationChange(new.generation, len(new), tuple(added), tuple(removed), tuple(changed))
        for watcher in list(self._watchers):
            try:
                watcher.queue.put_nowait(change)
            except asyncio.QueueFull:
                # A watcher this far behind is dropped; it reconnects and starts from the current state.
                logger.warning("dropping a WatchTools stream that fell %d generations behind",
                               watcher.queue.maxsize)
                self._end(watcher)
        return change

    async def watch(self) -> AsyncIterator[GenerationChange]:
        """The current generation (every tool as added), then each new one, until `close()`."""
        if self._closed:
            return
        watcher = _Watcher()
        self._watchers.add(watcher)
        try:
            current = self._snapshot
            yield GenerationChange(current.generation, len(current), current.names, (), ())
            while True:
                change = await watcher.queue.get()
                if change is None or change.generation <= current.generation:
                    if change is None:
                        return
                    continue
                yield change
        finally:
            self._watchers.discard(watcher)

    def close(self) -> None:
        """End every watch stream (on shutdown)."""
        self._closed = True
        for watcher in list(self._watchers):
            self._end(watcher)

    def _end(self, watcher: _Watcher) -> None:
        self._watchers.discard(watcher)
        while True:
            try:
                watcher.queue.put_nowait(None)
                return
            except asyncio.QueueFull:
                watcher.queue.get_nowait()
