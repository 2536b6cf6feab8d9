"""Watches catalog directories and asks for one reload per burst of changes.

A Kubernetes ConfigMap update is a burst: new `..2024_*` directory, `..data_tmp` symlink, rename over
`..data`, removal of the old directory. The debounce turns it into exactly one reload.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import watchfiles

logger = logging.getLogger("toolhost.watcher")


class CatalogWatcher:
    def __init__(
        self, directories: Sequence[Path], debounce_ms: int, on_change: Callable[[], Awaitable[None]]
    ) -> None:
        # A directory missing at start cannot be watched (inotify needs it); Reload reports it as an error.
        self._directories = [str(d) for d in directories if d.is_dir()]
        self._debounce_ms = debounce_ms
        self._on_change = on_change

    async def run(self) -> None:
        if not self._directories:
            return
        logger.info("watching catalog directories for changes: %s", self._directories)
        # No filter: a ConfigMap swap shows up only as changes to hidden `..` entries.
        async for changes in watchfiles.awatch(
            *self._directories, watch_filter=None, debounce=self._debounce_ms, step=50, recursive=True,
            ignore_permission_denied=True,
        ):
            logger.info("catalog changed (%d file events); reloading", len(changes))
            try:
                await self._on_change()
            except Exception:  # the watcher must outlive a failed reload
                logger.exception("reload after a catalog change failed")
