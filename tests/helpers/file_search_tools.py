"""The file search tools' servers and roots: `serve(start_server, root)` starts a server with those search roots
and waits until its index has been built, and `roots_over(root)` is the search service of those roots, not started
(its root_of and roots, against which search.arguments checks scopes)."""

from __future__ import annotations

from pathlib import Path

from toolhost_server.sanitize import Redactor
from toolhost_server.search.service import SearchService

from helpers.servers import RunningServer, ServerFactory
from helpers.waiting import within


def roots_over(*roots: Path) -> SearchService:
    return SearchService([str(root) for root in roots], data_dir=Path("/nonexistent"), exclude=(),
                         max_text_bytes=1024, rescan_seconds=3600.0, redactor=Redactor(), watch=False)


def search_service(server: RunningServer) -> SearchService:
    service = server.toolhost.search
    assert service is not None, "the server has no search roots"
    return service


async def indexed(server: RunningServer) -> None:
    """Wait until every root's first build has finished (the index's own event, not a delay)."""
    service = search_service(server)

    async def built() -> None:
        seen = service.generation
        while not all(status.state != "building" for status in service.status()):
            seen = await service.changed(seen)

    await within(built(), "the search index's first build")


async def serve(start_server: ServerFactory, *roots: Path, **overrides: object) -> RunningServer:
    """A server whose search roots are `roots`, once its index has been built."""
    server = await start_server(search_roots=tuple(str(root) for root in roots), **overrides)
    await indexed(server)
    return server
