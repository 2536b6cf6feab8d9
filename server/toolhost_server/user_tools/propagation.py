"""Brings the changes other servers make to the shared store's user tools into this server's registry.

On PostgreSQL a thread LISTENs on the channel every change NOTIFYs (table.CHANGES_CHANNEL) and wakes the
refresh at once; after each (re)connection it refreshes too, for what changed while it was not listening.
While it cannot listen (SQLite, or a lost connection) the tools' state is polled every POLL_SECONDS instead,
and a refresh follows when it moved. A refresh that fails, whatever the reason, is logged (once per outage) and
tried again after a back-off that doubles up to MAX_BACKOFF_SECONDS: the sync never stops following.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Hashable

import psycopg
from sqlalchemy import URL

from ..store.errors import StoreError
from .serving import UserToolServing
from .table import CHANGES_CHANNEL, UserToolTable

logger = logging.getLogger("toolhost.user_tools")

POLL_SECONDS = 2.0
# The longest wait before trying a failed refresh again.
MAX_BACKOFF_SECONDS = 30.0
# Between attempts to listen again after the connection broke (the polling covers the gap).
RECONNECT_SECONDS = 5.0
# How often the listening thread looks up from waiting to see whether it must stop.
_WAKE_SECONDS = 0.5


class UserToolSync:
    """Runs from `start()` (on the event loop) to `close()`."""

    def __init__(self, table: UserToolTable, serving: UserToolServing) -> None:
        self._table = table
        self._serving = serving
        self._wake = asyncio.Event()
        self._stop = threading.Event()
        self._listening = False
        self._task: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None
        self._state: Hashable | None = None
        self._failures = 0  # refreshes failed in a row

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        url = self._table.store.url
        if url.get_backend_name() == "postgresql":
            self._thread = threading.Thread(target=self._listen, args=(url, loop), name="user-tools-listen",
                                            daemon=True)
            self._thread.start()
        self._task = asyncio.create_task(self._run(), name="user-tools-sync")

    async def close(self) -> None:
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)

    async def _run(self) -> None:
        while True:
            if self._failures:
                timeout: float | None = min(POLL_SECONDS * 2 ** (self._failures - 1), MAX_BACKOFF_SECONDS)
            else:
                timeout = None if self._listening else POLL_SECONDS
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
            notified = self._wake.is_set()
            self._wake.clear()
            await self._follow(notified)

    async def _follow(self, notified: bool) -> None:
        """One step: refresh when told to, when the state moved, or when the last refresh failed."""
        try:
            if notified or self._failures or await self._state_moved():
                await self._serving.refresh()
        except Exception as exc:  # anything: a task that ends here would stop following for good
            if not self._failures:  # once per outage, not at every attempt
                if isinstance(exc, StoreError):
                    logger.warning("user tools: cannot read the store, serving the tools read last: %s", exc)
                else:
                    logger.exception("user tools: refreshing them failed, serving the tools read last")
            self._failures += 1
            return
        if self._failures:
            logger.info("user tools: refreshing them works again")
        self._failures = 0

    async def _state_moved(self) -> bool:
        state = await asyncio.to_thread(self._table.state)
        moved = state != self._state
        self._state = state
        return moved

    def _listen(self, url: URL, loop: asyncio.AbstractEventLoop) -> None:
        conninfo = url.set(drivername="postgresql").render_as_string(hide_password=False)
        while not self._stop.is_set():
            try:
                with psycopg.connect(conninfo, autocommit=True, connect_timeout=10,
                                     application_name="toolhost-user-tools") as connection:
                    connection.execute(f"LISTEN {CHANGES_CHANNEL}")
                    self._listening = True
                    # What changed while nobody listened: refresh now.
                    loop.call_soon_threadsafe(self._wake.set)
                    while not self._stop.is_set():
                        for _ in connection.notifies(timeout=_WAKE_SECONDS, stop_after=1):
                            loop.call_soon_threadsafe(self._wake.set)
            except (psycopg.Error, OSError) as exc:
                if not self._stop.is_set():
                    logger.warning("user tools: not listening for other servers' changes (polling every %ss "
                                   "instead): %s", POLL_SECONDS, exc)
            except RuntimeError:  # the event loop closed under the thread: the server is gone
                return
            finally:
                self._listening = False
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(self._wake.set)  # back to polling
            self._stop.wait(RECONNECT_SECONDS)
