"""What the asset tools (asset_count, asset_search, windows_list_directory) share: the inventory they read, when
it is served, and how its blocking table is called from a tool."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from ..store.errors import StoreError
from .base import ToolContext, ToolRaisedFailure, ToolServices

if TYPE_CHECKING:
    from ..assets.table import AssetTable

T = TypeVar("T")


def unserved_without_inventory(services: ToolServices) -> str:
    """Why an asset tool is not served, or "": a server without a store has no inventory."""
    return "" if services.assets is not None else "no store to keep the asset inventory in"


def inventory_of(context: ToolContext) -> AssetTable:
    table = context.services.assets
    if table is None:  # the tools are not served then; only a direct run (a test) can get here
        raise RuntimeError(f"{context.tool_name} was run by a server without an asset inventory")
    return table


def call_deadline(context: ToolContext) -> float:
    """When the call's time is up (time.monotonic()), for the table's reads: their statements are stopped then,
    not left running in their thread after the call has timed out."""
    return time.monotonic() + context.timeout_seconds


async def in_inventory(work: Callable[[], T], context: ToolContext) -> T:
    """`work()` in a worker thread (the table blocks); the store's failures as the tool's STORE_UNAVAILABLE."""
    try:
        return await asyncio.to_thread(work)
    except StoreError:
        # Where the store is (a path, a URL) is for the operator's log, not for the caller.
        context.logger.warning("the asset inventory failed in call %s", context.call_id, exc_info=True)
        raise ToolRaisedFailure(
            f"the server's database cannot be used now; retry later (the server log has the detail under call id "
            f"{context.call_id})", "STORE_UNAVAILABLE") from None
