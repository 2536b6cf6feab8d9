"""The search every surface asks (SearchTools, GET /ai/tools/search, the search_tools tool, the CLI)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable

from ..auth import Caller, generation_seen
from ..errors import InvalidRequestError
from ..listing import ToolFilter, matching_tools
from ..registry import Registry, Snapshot
from .index import RankedIndex, Visible
from .intents import IntentRoutes
from .results import DEFAULT_RESULTS, MAX_QUERY_CHARACTERS, MAX_RESULTS, SearchHit, SearchResults


class _SnapshotSearch:
    """What one snapshot is searched with: its intents, compiled, its ranked index, and the views of it that
    recent searches ranked in (one per filter and set of rights)."""

    # As Snapshot caches the names of a filter: a view of 10,000 tools is 10 KB.
    _VIEW_CACHE_SIZE = 128

    def __init__(self, snapshot: Snapshot, previous: _SnapshotSearch | None) -> None:
        self.snapshot = snapshot
        self.routes: IntentRoutes = IntentRoutes(snapshot, previous.routes if previous is not None else None)
        self.index: RankedIndex = RankedIndex((tool.spec for tool in snapshot.tools().values()),
                                 previous.index if previous is not None else None)
        self._views: OrderedDict[Hashable, Visible] = OrderedDict()

    def visible(self, caller: Caller, tool_filter: ToolFilter) -> Visible:
        """The tools `caller` may see that `tool_filter` keeps, which a search ranks among."""
        rights = caller.permissions
        if rights.unrestricted and tool_filter.key() == _NO_FILTER:
            return self.index.everything
        key = (tool_filter.key(), None if rights.unrestricted else rights)
        view = self._views.get(key)
        if view is None:
            view = self.index.visible(tool.spec.name for tool in matching_tools(self.snapshot, tool_filter, caller))
            self._views[key] = view
            if len(self._views) > self._VIEW_CACHE_SIZE:
                self._views.popitem(last=False)
        else:
            self._views.move_to_end(key)
        return view


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
        searching = self._searching(snapshot)
        tools = snapshot.tools()
        index = searching.index
        # Hidden tools are never candidates, nor are their intents tried: what the caller sees is decided once.
        visible = searching.visible(caller, tool_filter)
        hits: list[SearchHit] = []
        sees = None if visible.members is None else lambda name: index.shows(visible, name)
        routed = searching.routes.route(text, tools, sees)
        if routed is not None:
            hits.append(routed)
        routed_name = routed.tool.spec.name if routed is not None else ""

        for name, score in index.top(text, size - len(hits), visible, routed_name):
            hits.append(SearchHit(tools[name], score))
        return SearchResults(tuple(hits), generation)


_NO_FILTER = ToolFilter().key()
