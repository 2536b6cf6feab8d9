"""Reloads the registry: one load at a time, off the event loop, then an atomic swap on it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .catalog.loader import LoadResult, ToolLoader
from .daemon_threads import run_in_daemon_thread
from .registry import CatalogProblem, PreparedSwap, RegisteredTool, Registry

# Adds the tools kept outside the catalog files (the user tools) to a load's tools: what to serve, and the
# problems to report (a user tool whose name a loaded tool took). Called in the loader's thread.
Supplement = Callable[[Mapping[str, RegisteredTool]], tuple[dict[str, RegisteredTool], list[CatalogProblem]]]

logger = logging.getLogger("toolhost.registry")


@dataclass(frozen=True, slots=True)
class ReloadReport:
    """What a reload did (the fields of ReloadResponse)."""

    success: bool
    generation: int
    tools: tuple[str, ...]
    missing_required: tuple[str, ...]
    catalog_dirs: tuple[str, ...]
    problems: tuple[CatalogProblem, ...]
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()


class Reloader:
    """Owns the loader and serialises reloads, whoever asks (the Reload RPC, the file watcher, start-up)."""

    def __init__(self, loader: ToolLoader, registry: Registry,
                 observe: Callable[[ReloadReport], None] | None = None) -> None:
        self._loader = loader
        self._registry = registry
        self._observe = observe  # told of every reload's report (the metrics)
        self._lock = asyncio.Lock()
        self.reload_count = 0
        self.supplement: Supplement | None = None
        # The last good load's tools, before the supplement: what `refresh` builds on without reading files.
        self._loaded: Mapping[str, RegisteredTool] | None = None

    @property
    def loaded_names(self) -> frozenset[str]:
        """The names of the built-in and catalog tools of the last good load (served or shadowing)."""
        return frozenset(self._loaded or ())

    async def refresh(self) -> None:
        """Serve the supplement's tools again on the last load, without reading the catalog (a user tool
        changed). Waits for a reload in progress; nothing before the first load."""
        async with self._lock:
            loaded = self._loaded
            if loaded is None or self.supplement is None:
                return
            tools, _ = self.supplement(loaded)
            self._registry.swap(tools)

    async def reload(self, trigger: str) -> ReloadReport:
        """Load and swap. Shielded: a caller that gives up (a Reload RPC past its deadline) does not stop a
        reload half-way, and the next reload waits for it, so two loads never run at once."""
        return await asyncio.shield(self._reload(trigger))

    async def _reload(self, trigger: str) -> ReloadReport:
        async with self._lock:
            report = await self._load_and_swap(trigger)
        if self._observe is not None:
            self._observe(report)
        return report

    async def _load_and_swap(self, trigger: str) -> ReloadReport:
        self.reload_count += 1
        dirs = tuple(str(d) for d in self._loader.catalog_dirs)
        logger.info("[ToolRegistry] Reloading (%s) with catalog dirs: %s", trigger, list(dirs))
        for directory in dirs:
            logger.info("[ToolRegistry] Scanning catalog directory: %s", directory)
        # YAML parsing, and building the next generation, is CPU work: a thread keeps the loop serving calls
        # meanwhile. Only the swap itself happens on the loop.
        result, prepared = await run_in_daemon_thread(self._load_and_prepare, name="catalog-load")
        for problem in result.problems:
            where = f"{problem.file}:{problem.line}" if problem.line else problem.file
            logger.error("[ToolRegistry] %s: %s", where, problem.reason)
        if result.tools is None:
            snapshot = self._registry.snapshot
            logger.error("[ToolRegistry] Reload failed; still serving generation %d", snapshot.generation)
            return ReloadReport(False, snapshot.generation, snapshot.names, (), dirs, tuple(result.problems))
        logger.info("[ToolRegistry] Loaded %d YAML tools", result.catalog_count)
        change = self._registry.commit(prepared) if prepared is not None else None
        snapshot = self._registry.snapshot
        for name in result.missing_required:
            logger.error("[ToolRegistry] Required tool '%s' not found in registry!", name)
        logger.info("[ToolRegistry] Registry loaded with %d tools (generation %d): %s",
                    len(snapshot), snapshot.generation, _names_for_log(snapshot.names))
        return ReloadReport(
            success=True,
            generation=snapshot.generation,
            tools=snapshot.names,
            missing_required=tuple(result.missing_required),
            catalog_dirs=dirs,
            problems=tuple(result.problems),
            added=change.added if change else (),
            removed=change.removed if change else (),
            changed=change.changed if change else (),
        )

    def _load_and_prepare(self) -> tuple[LoadResult, PreparedSwap | None]:
        """In the loader thread: the load, and the next generation built from it (not yet serving)."""
        result = self._loader.load()
        if result.tools is None:
            return result, None
        self._loaded = result.tools
        tools = result.tools
        if self.supplement is not None:
            tools, problems = self.supplement(result.tools)
            result.problems.extend(problems)
        return result, self._registry.prepare(tools)


LOGGED_NAMES = 100


def _names_for_log(names: tuple[str, ...]) -> str:
    """The served names in a log message: all of them as a list up to LOGGED_NAMES, else the first ones and
    how many more. A catalog of thousands of tools must not make each reload log a line of 100 KB and more."""
    if len(names) <= LOGGED_NAMES:
        return str(list(names))
    return f"{str(list(names[:LOGGED_NAMES]))[:-1]}, ... and {len(names) - LOGGED_NAMES} more]"
