"""The labelled queries (helpers/tool_search_queries.py) against a server with the built-in tools, the bundled
catalog, a workspace and a search root: every seed phrase is routed by its intent with the right arguments, and
the right tool is in the top three for at least TOP3_TARGET of the needs written in words (the figure is
printed: `pytest -s` shows it)."""

from __future__ import annotations

from pathlib import Path

from toolhost_server.auth import ANONYMOUS
from toolhost_server.listing import ToolFilter
from toolhost_server.workspaces import Workspace

from helpers.servers import ServerFactory
from helpers.tool_search_queries import FREE_TEXT_QUERIES, PATTERN_QUERIES, TOP3_TARGET


async def test_labelled_queries(start_server: ServerFactory, tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    server = await start_server(workspaces=(Workspace("w", str(tmp_path / "w")),),
                                search_roots=(str(tmp_path / "root"),))
    search = server.toolhost.tool_search
    assert len(PATTERN_QUERIES) + len(FREE_TEXT_QUERIES) >= 60

    wrong_routes = []
    for query, tool, arguments in PATTERN_QUERIES:
        hits = search.search(query, ANONYMOUS, ToolFilter(), 3).hits
        first = hits[0] if hits else None
        if first is None or (first.tool.spec.name, first.arguments) != (tool, arguments) or not first.matched_intent:
            wrong_routes.append((query, [(hit.tool.spec.name, hit.arguments) for hit in hits]))
    assert wrong_routes == []

    misses = []
    for query, tools in FREE_TEXT_QUERIES:
        hits = search.search(query, ANONYMOUS, ToolFilter(), 3).hits
        assert not any(hit.matched_intent for hit in hits), query
        if not tools & {hit.tool.spec.name for hit in hits}:
            misses.append((query, sorted(tools), [hit.tool.spec.name for hit in hits]))
    found = len(FREE_TEXT_QUERIES) - len(misses)
    share = found / len(FREE_TEXT_QUERIES)
    print(f"\ntool search, labelled set: {len(PATTERN_QUERIES)}/{len(PATTERN_QUERIES)} seed phrases routed; right "
          f"tool in the top 3 for {found}/{len(FREE_TEXT_QUERIES)} needs in words ({share:.1%}, target "
          f"{TOP3_TARGET:.0%}); missed: {misses}")
    assert share >= TOP3_TARGET, misses
