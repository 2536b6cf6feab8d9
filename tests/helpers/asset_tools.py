"""The asset tools called over gRPC, and an inventory put in a running server's store through its own AssetTable."""

from __future__ import annotations

import asyncio
from typing import Any

from google.protobuf.json_format import MessageToDict

from toolhost_server.assets.model import Asset

from helpers.calls import call
from helpers.servers import RunningServer


async def add_assets(server: RunningServer, *assets: Asset) -> None:
    """Store `assets` in the server's inventory (the same table, on the same database, that its tools read)."""
    table = server.toolhost.asset_table

    def create_all() -> None:
        for asset in assets:
            table.create(asset)

    await asyncio.to_thread(create_all)


async def asset_tool(server: RunningServer, tool: str, **arguments: Any) -> tuple[str, dict[str, Any]]:
    """The text and structured output of an asset tool call that must succeed."""
    response = await call(server, tool, arguments)
    assert response.success, response.error
    assert not response.truncated and not response.redacted
    structured: dict[str, Any] = MessageToDict(response.structured_output)
    return response.output, structured


async def search_all(server: RunningServer, page_size: int = 100, **filters: str) -> list[str]:
    """The names asset_search lists for `filters`, page after page until it gives no next_page_token; each page's
    total must be the count of the same filters."""
    _, counted = await asset_tool(server, "asset_count", **filters)
    names: list[str] = []
    token = ""
    while True:
        _, page = await asset_tool(server, "asset_search", page_size=page_size, page_token=token, **filters)
        assert page["total"] == counted["count"]
        assert len(page.get("assets", [])) <= page_size
        names += [asset["name"] for asset in page.get("assets", [])]
        token = page["next_page_token"]
        assert page.get("assets") or not token, "a next page after an empty one would never end"
        if not token:
            return names
