"""The search every surface asks (SearchTools, GET /ai/tools/search, the search_tools tool, the CLI)."""

from __future__ import annotations

from collections.abc import Callable

from ..auth import Caller, generation_seen
from ..errors import InvalidRequestError
from ..listing import ToolFilter
from ..model import ToolSpec
from ..registry import Registry, Snapshot
from .index import RankedIndex
from .intents import IntentRoutes
from .results import DEFAULT_RESULTS, MAX_QUERY_CHARACTERS, MAX_RESULTS, SearchHit, SearchResults


class _SnapshotSearch:
    """What one snapshot is searched with: its intents, compiled, and its ranked index."""

    def __init__(self, snapshot: Snapshot, previous: _SnapshotSearch | None) -> None:
        self.snapshot = snapshot
        self.routes: IntentRoutes = IntentRoutes(snapshot, previous.routes if previous is not None else None)
        self.index: RankedIndex = RankedIndex((tool.spec for tool in snapshot.tools().values()),
                                 previous.index if previous is not None else None)


class ToolSearch:
    """Searches the registry's current snapshot; keeps its index up to date as reloads swap snapshots.

        search = ToolSearch(registry)
        found = search.search("check port 5432 on db.example.com", caller, ToolFilter())
        found.hits[0].tool.spec.name, found.hits[0].arguments   # tcp_port_check {'port': 5432, 'host': ...}
    """

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        # The snapshot being prepared and the one serving (a reload builds the next while the last serves);
        # replaced whole, since the registry may prepare on its loader thread while the event loop searches.
        self._prepared: tuple[_SnapshotSearch, ...] = ()
        registry.add_listener(self._prepare)

    def _prepare(self, snapshot: Snapshot) -> None:
        latest = self._prepared[0] if self._prepared else None
        self._prepared = (_SnapshotSearch(snapshot, latest), *self._prepared[:1])

    def _searching(self, snapshot: Snapshot) -> _SnapshotSearch:
        for prepared in self._prepared:
            if prepared.snapshot is snapshot:
                return prepared
        # Not prepared by the listener (a registry swapped before this search existed): built now, and kept.
        self._prepare(snapshot)
        return self._prepared[0]

    def search(self, query: str, caller: Caller, tool_filter: ToolFilter, page_size: int = 0) -> SearchResults:
        """At most `page_size` (0: DEFAULT_RESULTS, at most MAX_RESULTS) tools `caller` may see that match
        `tool_filter`: an intent's match first, then the ranked ones. InvalidRequestError for a query over
        MAX_QUERY_CHARACTERS or a negative page_size; an empty query finds nothing."""
        if len(query) > MAX_QUERY_CHARACTERS:
            raise InvalidRequestError(
                f"query is {len(query)} characters long; at most {MAX_QUERY_CHARACTERS} are searched: write the "
                "need in a sentence or a few words")
        if page_size < 0:
            raise InvalidRequestError(f"page_size must not be negative (got {page_size}); use 0 for the default of "
                                      f"{DEFAULT_RESULTS}, at most {MAX_RESULTS}")
        size = min(page_size or DEFAULT_RESULTS, MAX_RESULTS)
        snapshot = self._registry.snapshot
        generation = generation_seen(self._registry, caller)
        text = query.strip()
        if not text:
            return SearchResults((), generation)
        sees = _seen_by(caller, tool_filter)
        searching = self._searching(snapshot)
        tools = snapshot.tools()
        hits: list[SearchHit] = []
        routed = searching.routes.route(text, tools, sees)
        if routed is not None:
            hits.append(routed)
        routed_name = routed.tool.spec.name if routed is not None else None

        def admits(name: str) -> bool:
            return name != routed_name and sees(tools[name].spec)

        for name, score in searching.index.top(text, size - len(hits), admits):
            hits.append(SearchHit(tools[name], score))
        return SearchResults(tuple(hits), generation)


def _seen_by(caller: Caller, tool_filter: ToolFilter) -> Callable[[ToolSpec], bool]:
    """Whether a tool is one the caller may see and the filter keeps: hidden tools are never candidates."""
    matches = tool_filter.predicate()
    permissions = caller.permissions
    if permissions.unrestricted:
        return matches
    return lambda spec: matches(spec) and permissions.may_see(spec)
