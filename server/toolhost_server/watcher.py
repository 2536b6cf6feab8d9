"""Watches catalog directories and asks for one reload per burst of changes.

A Kubernetes ConfigMap update is a burst: new `..2024_*` directory, `..data_tmp` symlink, rename over
`..data`, removal of the old directory. The debounce turns it into exactly one reload.

inotify watches a directory, not a path: when a catalog directory is replaced (`mv catalog.new catalog`, a
git checkout, rsync), or appears after the server started, the watch is set up again and the catalog
reloaded. A cheap stat of each directory once a second notices that.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import watchfiles

logger = logging.getLogger("toolhost.watcher")

Identity = tuple[int, int] | None


class CatalogWatcher:
    def __init__(
        self,
        directories: Sequence[Path],
        debounce_ms: int,
        on_change: Callable[[], Awaitable[None]],
        identity_check_seconds: float = 1.0,
    ) -> None:
        self._directories = [str(d) for d in directories]
        self._debounce_ms = debounce_ms
        self._on_change = on_change
        self._identity_check_seconds = identity_check_seconds

    async def run(self) -> None:
        if not self._directories:
            return
        logger.info("watching catalog directories for changes: %s", self._directories)
        while True:
            identities = self._identities()
            present = [d for d, identity in identities.items() if identity is not None]
            rearm = asyncio.Event()
            checker = asyncio.create_task(self._check_identities(identities, rearm))
            try:
                if present:
                    await self._watch(present, rearm)
                await rearm.wait()
            finally:
                checker.cancel()
            logger.info("a catalog directory was replaced or appeared; watching it again and reloading")
            await self._reload()

    async def _watch(self, directories: list[str], stop: asyncio.Event) -> None:
        try:
            # No filter: a ConfigMap swap shows up only as changes to hidden `..` entries.
            async for changes in watchfiles.awatch(
                *directories, watch_filter=None, debounce=self._debounce_ms, step=50, recursive=True,
                ignore_permission_denied=True, stop_event=stop,
            ):
                logger.info("catalog changed (%d file events); reloading", len(changes))
                await self._reload()
        except OSError as exc:  # the directory vanished under the watch; the identity check re-arms
            logger.warning("watching the catalog failed (%s); trying again", exc)

    async def _check_identities(self, identities: dict[str, Identity], rearm: asyncio.Event) -> None:
        while self._identities() == identities:  # noqa: ASYNC110 - polling a stat is the point
            await asyncio.sleep(self._identity_check_seconds)
        rearm.set()

    def _identities(self) -> dict[str, Identity]:
        result: dict[str, Identity] = {}
        for directory in self._directories:
            try:
                st = os.stat(directory)
            except OSError:
                result[directory] = None
            else:
                result[directory] = (st.st_dev, st.st_ino)
        return result

    async def _reload(self) -> None:
        try:
            await self._on_change()
        except Exception:  # the watcher must outlive a failed reload
            logger.exception("reload after a catalog change failed")
