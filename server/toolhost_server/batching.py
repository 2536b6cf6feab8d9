"""Hands items to a blocking writer in batches, in a worker thread, off the path of whoever produces them.

The audit trail and the database log handler both need this: a producer that must never wait for a database,
a bounded queue that drops the oldest items (and counts them) when the database cannot keep up, and a
background task on the event loop that drains the queue in batches.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Generic, TypeVar

from .event_waits import wait_set

Item = TypeVar("Item")

# A database that is down would otherwise add a traceback to the log every flush.
_FAILURE_LOG_INTERVAL_SECONDS = 60.0


class BatchRejected(Exception):
    """Raised by a writer that refused a batch for what one of its items holds (a value the database cannot
    store), not because the destination is unavailable: the BatchWriter then writes the batch in halves, so
    that only the offending items are lost, not every caller's records that shared the batch."""


class BatchWriter(Generic[Item]):
    """Collects items and writes them with `write` (blocking; called in a worker thread) in batches of at most
    `batch_size`, at least every `flush_seconds`, or sooner once a batch is full::

        writer = BatchWriter(table.append, what="audit records", logger=logger)
        writer.start()            # on the event loop, before the first add()
        writer.add(record)        # from any thread; never blocks
        await writer.close()      # writes what is still waiting

    An exception of `write` is logged (once a minute at most) and its batch counted in `failed`; a BatchRejected
    one is retried in halves down to the single items it refuses, which alone are counted. Items beyond
    `max_waiting` push the oldest waiting ones out; they are counted in `dropped`.
    """

    def __init__(
        self,
        write: Callable[[Sequence[Item]], None],
        *,
        what: str,
        logger: logging.Logger,
        batch_size: int = 500,
        flush_seconds: float = 1.0,
        max_waiting: int = 50_000,
    ) -> None:
        self._write = write
        self._what = what
        self._logger = logger
        self._batch_size = batch_size
        self._flush_seconds = flush_seconds
        self._waiting: deque[Item] = deque(maxlen=max_waiting)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0
        """Items that never reached `write` because too many were waiting."""
        self.failed = 0
        """Items in batches that `write` raised for."""
        self._last_failure_logged = -math.inf

    @property
    def started(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        """Start the background task on the running event loop."""
        if self._task is None:
            self._loop = asyncio.get_running_loop()
            self._wake = asyncio.Event()
            self._task = asyncio.create_task(self._drain(), name=f"batch-writer-{self._what}")

    def add(self, item: Item) -> None:
        """Queue `item`. Thread-safe and never blocking; ignored before start() and after close()."""
        if self._loop is None:
            return
        with self._lock:
            full = len(self._waiting) == self._waiting.maxlen
            if full:
                self.dropped += 1
            self._waiting.append(item)
            waiting = len(self._waiting)
        if full and (self.dropped == 1 or self.dropped % 10_000 == 0):
            self._logger.warning("the %s store falls behind: %d dropped so far (the log has them)",
                                 self._what, self.dropped)
        if waiting >= self._batch_size:
            self._wake_soon()

    def _wake_soon(self) -> None:
        loop, wake = self._loop, self._wake
        if loop is None or wake is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        # asyncio.Event is not thread-safe: from another thread the loop must set it.
        if running is loop:
            wake.set()
        else:
            loop.call_soon_threadsafe(wake.set)

    async def _drain(self) -> None:
        assert self._wake is not None
        while True:
            await wait_set(self._wake, self._flush_seconds)
            self._wake.clear()
            await self._write_waiting()

    def _take_batch(self) -> list[Item]:
        with self._lock:
            return [self._waiting.popleft() for _ in range(min(self._batch_size, len(self._waiting)))]

    async def _write_waiting(self) -> None:
        while batch := self._take_batch():
            await self._write_batch(batch)

    async def _write_batch(self, batch: list[Item]) -> None:
        try:
            await asyncio.to_thread(self._write, batch)
        except BatchRejected:
            if len(batch) > 1:
                middle = len(batch) // 2
                await self._write_batch(batch[:middle])
                await self._write_batch(batch[middle:])
            else:
                self._failed(batch)
        except Exception:
            self._failed(batch)

    def _failed(self, batch: list[Item]) -> None:
        self.failed += len(batch)
        now = time.monotonic()
        if now - self._last_failure_logged >= _FAILURE_LOG_INTERVAL_SECONDS:
            self._last_failure_logged = now
            self._logger.exception("writing %s to the database failed (%d so far); they are in the log only",
                                   self._what, self.failed)

    async def close(self) -> None:
        """Stop the background task after writing what is waiting; later add()s are ignored."""
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._write_waiting()
        self._loop = None
