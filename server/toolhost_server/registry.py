"""The registry: an immutable snapshot of the served tools, swapped whole on reload, and its watchers.

A call takes the current snapshot once and keeps it to the end, so a reload never changes a tool under a
running call. Only the generation counters and the snapshot reference change, and only on the event loop.

A caller that sees only some tools sees the generation of its view (`View`), which moves only when a tool it sees
changes: the real one would reveal edits to the tools hidden from it.

Building the next snapshot (the diff, the sorted names, the listeners' per-snapshot artefacts) is the costly
part with thousands of tools; `prepare` does it and may run off the event loop, `commit` makes it serve.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import difflib
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Hashable, Mapping, Sequence
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

    def __init__(self, generation: int, tools: Mapping[str, RegisteredTool],
                 names: tuple[str, ...] | None = None) -> None:
        """`names`, when given, must be the sorted names of `tools` (the previous generation's, when only
        definitions changed)."""
        self.generation = generation
        self._tools = dict(tools)
        self.names: tuple[str, ...] = tuple(sorted(self._tools)) if names is None else names
        # Filtered name lists, computed on first use per filter, so paging through a filter is a bisect.
        self._filtered: OrderedDict[object, tuple[str, ...]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def tools(self) -> Mapping[str, RegisteredTool]:
        return self._tools

    def get(self, name: str) -> RegisteredTool:
        """The tool called `name`, or ToolNotFoundError suggesting close names from every tool: for the server's
        own use. A request's lookup goes through auth.find_visible, which suggests only what its caller sees."""
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
    added = sorted(new_tools.keys() - old_tools.keys())
    removed = sorted(old_tools.keys() - new_tools.keys())
    # The catalog reader hands back the very same object for an unchanged file: only the others are compared.
    old_get = old_tools.get
    others = [name for name, tool in new_tools.items() if old_get(name) is not tool]
    changed = sorted(
        name for name in others
        if name in old_tools and (old_tools[name].spec.content_hash != new_tools[name].spec.content_hash
                                  or old_tools[name].spec.origin != new_tools[name].spec.origin)
    )
    return added, removed, changed


@dataclass(frozen=True, slots=True)
class PreparedSwap:
    """The next generation, built by `Registry.prepare` and not yet serving."""

    base: Snapshot
    snapshot: Snapshot
    change: GenerationChange


@dataclass(eq=False)
class View:
    """The tools one set of rights sees (`sees`), with its own generation counter, keyed by what decides it.

    The counter starts at the registry's generation when the view is first asked about and goes up by one at
    each swap that adds, removes or changes a tool the view sees, so from then on it reveals only what the
    view's own tools did. It never passes the real generation, so a caller whose rights change (and who so
    gets another view) never sees its generation go back. Views are kept for the life of the process: one per
    set of rights ever asked about, which only an auth file's edits add to.
    """

    key: Hashable
    sees: Callable[[ToolSpec], bool]
    generation: int
    count: int

    def change(self, base: Snapshot, new: Snapshot, change: GenerationChange) -> GenerationChange | None:
        """The swap from `base` to `new` as this view sees it, or None when it changes nothing the view sees;
        advances the view's generation when it does."""
        old_tools, new_tools, sees = base.tools(), new.tools(), self.sees
        added = [n for n in change.added if sees(new_tools[n].spec)]
        removed = [n for n in change.removed if sees(old_tools[n].spec)]
        changed = []
        for name in change.changed:
            before, after = sees(old_tools[name].spec), sees(new_tools[name].spec)
            if before and after:
                changed.append(name)
            elif after:  # a tool whose new definition enters the view is new to it
                added.append(name)
            elif before:
                removed.append(name)
        if not (added or removed or changed):
            return None
        self.generation += 1
        self.count += len(added) - len(removed)
        return GenerationChange(self.generation, self.count, tuple(sorted(added)), tuple(sorted(removed)),
                                tuple(changed))


@dataclass(eq=False)  # identity semantics: each stream is its own watcher
class _Watcher:
    queue: asyncio.Queue[GenerationChange | None] = field(default_factory=lambda: asyncio.Queue(maxsize=256))
    # Set when the stream must end (shutdown, or too far behind): it ends once it has read what is queued, so
    # it never skips a generation it was told about.
    ended: bool = False
    # The view it watches, None for every tool.
    view: View | None = None


class Registry:
    """Holds the current snapshot and tells watchers about each new generation."""

    def __init__(self) -> None:
        self._snapshot = Snapshot(0, {})
        self._watchers: set[_Watcher] = set()
        self._closed = False
        self._listeners: list[Callable[[Snapshot], None]] = []
        # Every view asked about, kept for the life of the process so its generation never goes back.
        self._views: dict[Hashable, View] = {}

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    def view(self, key: Hashable, sees: Callable[[ToolSpec], bool]) -> View:
        """The view of the tools `sees` accepts, registered under `key` on first use (one pass over the tools);
        then a dict lookup. Its generation is that of the current snapshot. On the event loop."""
        view = self._views.get(key)
        if view is None:
            snapshot = self._snapshot
            count = len(snapshot.filtered(key, sees))
            view = self._views[key] = View(key, sees, snapshot.generation, count)
        return view

    def add_listener(self, listener: Callable[[Snapshot], None]) -> None:
        """Call `listener` with each new snapshot before it serves (to prepare per-snapshot artefacts). It may
        be called from a thread other than the event loop's (see `prepare`), while an older snapshot serves."""
        self._listeners.append(listener)
        listener(self._snapshot)

    def swap(self, tools: Mapping[str, RegisteredTool]) -> GenerationChange | None:
        """Make `tools` the serving set. Returns the change, or None when nothing changed (no new generation)."""
        prepared = self.prepare(tools)
        return None if prepared is None else self.commit(prepared)

    def prepare(self, tools: Mapping[str, RegisteredTool]) -> PreparedSwap | None:
        """The generation after the current one serving `tools`, listeners told, or None when nothing changed.
        Safe off the event loop; whoever swaps must not swap between this and `commit` (the Reloader's lock)."""
        base = self._snapshot
        added, removed, changed = diff(base, tools)
        if not (added or removed or changed) and base.generation > 0:
            return None
        # Only definitions changed: the names, and so their order, are the previous generation's.
        names = base.names if not (added or removed) and base.generation > 0 else None
        new = Snapshot(base.generation + 1, tools, names)
        for listener in self._listeners:
            listener(new)
        change = GenerationChange(new.generation, len(new), tuple(added), tuple(removed), tuple(changed))
        return PreparedSwap(base, new, change)

    def commit(self, prepared: PreparedSwap) -> GenerationChange | None:
        """Make a prepared generation serve and tell the watchers. On the event loop."""
        if prepared.base is not self._snapshot:  # another swap came between: build this one again
            return self.swap(prepared.snapshot.tools())
        self._snapshot = prepared.snapshot
        change = prepared.change
        # Every view moves now, not when next asked, so a call and a watch stream of the same view agree.
        view_changes = {view: view.change(prepared.base, prepared.snapshot, change)
                        for view in self._views.values()}
        for watcher in list(self._watchers):
            seen = change if watcher.view is None else view_changes[watcher.view]
            if seen is None:
                continue
            try:
                watcher.queue.put_nowait(seen)
            except asyncio.QueueFull:
                # A watcher this far behind is dropped; it reconnects and starts from the current state.
                logger.warning("dropping a WatchTools stream that fell %d generations behind",
                               watcher.queue.maxsize)
                self._end(watcher)
        return change

    async def watch(self, view: View | None = None) -> AsyncIterator[GenerationChange]:
        """The current generation (every tool as added), then each new one, until `close()`. Of a `view`: its
        generations, each only with the tools it sees, and none for a swap that changes nothing it sees."""
        if self._closed:
            return
        watcher = _Watcher(view=view)
        self._watchers.add(watcher)
        try:
            current = self._snapshot
            if view is None:
                first = GenerationChange(current.generation, len(current), current.names, (), ())
            else:
                names = current.filtered(view.key, view.sees)
                first = GenerationChange(view.generation, len(names), names, (), ())
            yield first
            while not (watcher.ended and watcher.queue.empty()):
                change = await watcher.queue.get()
                if change is None:
                    return
                if change.generation > first.generation:
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
        watcher.ended = True
        # Wakes a stream waiting on an empty queue; a full queue needs no wake-up (the stream has its
        # generations to read first, then sees `ended`), and dropping one to make room would lose it.
        with contextlib.suppress(asyncio.QueueFull):
            watcher.queue.put_nowait(None)
