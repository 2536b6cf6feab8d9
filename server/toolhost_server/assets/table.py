"""The assets table: the inventory, in the server's store (SQLite or PostgreSQL).

Blocking, every method one transaction: callers run it in a thread. Names are unique regardless of case; every
filter ignores case and is evaluated by the database (indexed), so that asset_count over 100,000 assets reads
no row into Python.

CONTRACT (to be implemented): the signatures below are what the service, the tools and the tests use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..store.database import Store
from .model import Asset, AssetFilter, ImportSummary


class AssetTable:
    """Reads and changes the inventory.

        table = AssetTable(store)
        table.create(Asset("ws-042", os="Microsoft Windows 10 Pro", tags=("finance",)))
        table.count(AssetFilter(os="windows 10"))                     # 1
        assets, next_after = table.page(AssetFilter(tag="finance"), after="", limit=100)
        table.update("WS-042", lambda asset: dataclasses.replace(asset, site="berlin"))
        table.find_host("ws-042.corp.example.com")                    # by name first, then by hostname
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    def create(self, asset: Asset) -> Asset:
        """Store a new (already validated) asset and return it with its times. AlreadyExistsError when the name
        is taken regardless of case; FailedPreconditionError at MAX_ASSETS."""
        raise NotImplementedError

    def get(self, name: str) -> Asset:
        """The asset of that name regardless of case; ResourceNotFoundError when there is none."""
        raise NotImplementedError

    def page(self, where: AssetFilter, after: str, limit: int) -> tuple[list[Asset], str]:
        """Up to `limit` matching assets sorted by lower-cased name, after the lower-cased name `after` ("" for
        the first page), and the `after` of the next page ("" when this is the last)."""
        raise NotImplementedError

    def count(self, where: AssetFilter) -> int:
        """How many assets match."""
        raise NotImplementedError

    def update(self, name: str, transform: Callable[[Asset], Asset]) -> Asset:
        """Apply `transform` to the stored asset (the caller validates its result) under a row lock and store it;
        ResourceNotFoundError when there is none. The name never changes."""
        raise NotImplementedError

    def delete(self, name: str) -> Asset:
        """Remove the asset and return it as it was; ResourceNotFoundError when there is none."""
        raise NotImplementedError

    def import_all(self, assets: Sequence[Asset], validate_only: bool = False) -> ImportSummary:
        """Create or replace (by name regardless of case) every asset in one transaction: all or none.
        FailedPreconditionError when the result would pass MAX_ASSETS. With validate_only, count and store
        nothing."""
        raise NotImplementedError

    def find_host(self, host: str) -> list[Asset]:
        """The asset named `host` (regardless of case) as a one-element list; else every asset whose hostname is
        `host` regardless of case (several: the caller says the host is ambiguous); else []."""
        raise NotImplementedError

    def close_names(self, host: str, limit: int = 5) -> list[str]:
        """Up to `limit` names and hostnames close to `host`, for an "unknown host" message."""
        raise NotImplementedError
