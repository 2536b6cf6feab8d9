"""The search every surface asks (SearchTools, GET /ai/tools/search, the search_tools tool, the CLI)."""

from __future__ import annotations

from ..auth import Caller
from ..listing import ToolFilter
from ..registry import Registry
from .results import SearchResults


class ToolSearch:
    """Searches the registry's current snapshot; keeps its index up to date as reloads swap snapshots."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry

    def search(self, query: str, caller: Caller, tool_filter: ToolFilter, page_size: int = 0) -> SearchResults:
        """At most `page_size` (0: DEFAULT_RESULTS, at most MAX_RESULTS) tools `caller` may see that match
        `tool_filter`: an intent's match first, then the ranked ones. InvalidRequestError for a query over
        MAX_QUERY_CHARACTERS or a negative page_size; an empty query finds nothing."""
        raise NotImplementedError("being built: issue 24, part search-core")
