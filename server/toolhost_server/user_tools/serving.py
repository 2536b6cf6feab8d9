"""Serves the user tools: the enabled ones join every generation of the registry, after the built-in and
catalog tools, which win a shared name (the user tool is then shadowed, and each reload reports it).

The stored tools are read into memory (`refresh`, which reads whole only the tools that changed), so that a
reload's thread merges them without the store; every change on this server, and every change another replica
announces, refreshes them and swaps a new generation in before going on.

A server whose user tools would run as its own user (identity.py) serves none of them: each reload reports
that, and why, while any is enabled in the store.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from ..catalog.builtins import unserved_builtins
from ..catalog.loader import ToolLoader
from ..registry import CatalogProblem, RegisteredTool
from ..reloading import Reloader
from ..tools.base import NO_SERVICES, ToolServices
from .records import UserToolRecord
from .table import UserToolTable
from .validation import served_spec

logger = logging.getLogger("toolhost.user_tools")


class UserToolServing:
    """The user tools this server serves, kept in step with the store. `refresh()` on the event loop."""

    def __init__(self, table: UserToolTable, loader: ToolLoader, reloader: Reloader,
                 services: ToolServices | None = None) -> None:
        self._table = table
        self._loader = loader
        self._reloader = reloader
        # Built-in names this server leaves out (no workspace: no `bash`) are taken all the same: a later start
        # with a workspace would serve the built-in, and the user tool would silently stop being served.
        self._unserved_builtins = frozenset(
            name for names in unserved_builtins(services or NO_SERVICES).values() for name in names)
        # Why no user tool is served here, or "" (ToolServices.user_tools_refusal).
        self.refusal = (services or NO_SERVICES).user_tools_refusal
        self._refusal_logged = False
        self._records: tuple[UserToolRecord, ...] = ()
        self._compiled: dict[str, tuple[UserToolRecord, RegisteredTool]] = {}
        self._shadowed: Mapping[str, str] = {}
        self._refreshing = asyncio.Lock()
        self.loaded = False  # whether the store has been read once
        reloader.supplement = self.merge

    def taken_names(self) -> frozenset[str]:
        """Names a new user tool may not take: every built-in (served or not) and every catalog tool."""
        return self._reloader.loaded_names | self._unserved_builtins

    def served_elsewhere(self) -> frozenset[str]:
        """The names of the built-in and catalog tools this server serves (those of the last load)."""
        return self._reloader.loaded_names

    def shadowed_by(self, slug: str) -> str:
        """The source ("catalog", "builtin") of the tool served under the name `slug` instead of the user tool,
        or "" when none is."""
        return self._shadowed.get(slug, "")

    async def refresh(self) -> None:
        """Read the stored tools and serve them; returns once the registry serves what was read. StoreError
        when the store cannot be read (what was served stays)."""
        async with self._refreshing:  # one read at a time, so an older read never replaces a newer one
            held = {record.slug: record for record in self._records}
            records = await asyncio.to_thread(self._table.read_changed, held)
            self._records = tuple(records)
            self.loaded = True
            await self._reloader.refresh()

    def merge(self, loaded: Mapping[str, RegisteredTool]) -> tuple[dict[str, RegisteredTool],
                                                                      list[CatalogProblem]]:
        """The Reloader's supplement: `loaded` and the enabled user tools whose names it leaves free."""
        tools = dict(loaded)
        problems: list[CatalogProblem] = []
        shadowed: dict[str, str] = {}
        compiled: dict[str, tuple[UserToolRecord, RegisteredTool]] = {}
        refused = 0
        for record in self._records:
            holder = loaded.get(record.slug)
            if holder is not None:
                # The source only: the file's path is the server's, and the tool may be hidden from the reader.
                shadowed[record.slug] = holder.spec.source.value
                problems.append(CatalogProblem(
                    holder.spec.origin, 0,
                    f"tool {record.slug!r} shadows the user tool of the same name, which is not served while it "
                    "exists; rename that tool, or delete the user tool and create it under another slug"))
                continue
            if not record.enabled:
                continue
            if self.refusal:
                refused += 1
                continue
            tool = self._compile(record)
            if tool is not None:
                compiled[record.slug] = (record, tool)
                tools[record.slug] = tool
        if refused:
            counted = "1 enabled user tool is" if refused == 1 else f"{refused} enabled user tools are"
            problems.append(CatalogProblem("user tools", 0, f"{counted} not served: {self.refusal}"))
            if not self._refusal_logged:
                self._refusal_logged = True
                logger.warning("user tools: serving none of the %d enabled: %s", refused, self.refusal)
        self._compiled = compiled
        self._shadowed = shadowed
        return tools, problems

    def _compile(self, record: UserToolRecord) -> RegisteredTool | None:
        # The same object for an unchanged tool: the registry's diff then skips it without hashing.
        cached = self._compiled.get(record.slug)
        if cached is not None and cached[0] == record:
            return cached[1]
        try:
            return self._loader.compile(served_spec(record))
        except Exception as exc:  # stored by an older release, or edited in the database: the others still serve
            logger.error("user tool %r (version %d) cannot be served: %s", record.slug, record.version, exc)
            return None
