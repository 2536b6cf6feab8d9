"""Hands items to a blocking writer in batches, in a worker thread, off the path of whoever produces them.

The audit trail and the database log handler both need this: a producer that must never wait for a database,
a queue bounded in bytes that keeps what the database cannot take yet (it is down, or restarting) and drops the
oldest items beyond the bound (counted and logged), and a background task on the event loop that drains the
queue in batches. What `write` raises decides what becomes of a batch:

    BatchRejected        an item holds what the destination refuses: the batch is written in halves, and only
                         the refused items are lost (counted in `rejected`)
    BatchOutcomeUnknown  the connection broke while the batch was committing: it is kept and written again, so
                         it may be stored twice (counted in `uncertain`)
    BatchUnavailable     the destination cannot take it now: the batch is kept and retried after a delay that
                         doubles up to `max_retry_seconds` (each failure counted in `write_errors`)
    any other exception  the same as BatchUnavailable, but its traceback is logged (once per outage): it was
                         not expected

Delivery is therefore at least once for what fits in the bound: an item is lost only when the bound pushes it
out, when the destination refuses it, or when the writer closes with the destination still unavailable; each
case is counted and logged.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from .event_waits import wait_set

Item = TypeVar("Item")

# The default of store_buffer_bytes: what each of the store's tables may hold in memory while its database is down.
DEFAULT_MAX_WAITING_BYTES = 32 * 1024 * 1024

# A database that is down would otherwise add a line to the log at every retry, and a full buffer at every item.
_COMPLAINT_INTERVAL_SECONDS = 60.0


class BatchRejected(Exception):
    """Raised by a writer that refused a batch for what one of its items holds (a value the database cannot
    store), not because the destination is unavailable: the BatchWriter then writes the batch in halves, so
    that only the offending items are lost, not every caller's records that shared the batch."""


class BatchOutcomeUnknown(Exception):
    """Raised by a writer whose connection broke while it committed a batch: the batch may or may not have
    been stored. The BatchWriter writes it again (at least once) and counts its items as possibly duplicated."""


class BatchUnavailable(Exception):
    """Raised by a writer whose destination cannot take a batch now (a database that is down, unreachable, full
    or locked); the message says why. The BatchWriter keeps the batch and tries again later."""


# Failures whose message says all: logged without a traceback.
_EXPLAINED = (BatchUnavailable, BatchOutcomeUnknown)


@dataclass(frozen=True, slots=True)
class BatchWriterStats:
    """What a BatchWriter holds now and what it lost so far, for metrics."""

    waiting_items: int
    waiting_bytes: int
    dropped: int
    """Items pushed out, oldest first, by the bound on waiting bytes."""
    rejected: int
    """Items the destination refused for what they hold."""
    abandoned: int
    """Items still unwritten when the writer closed with the destination unavailable."""
    write_errors: int
    """Write attempts that failed and whose batch was kept for a retry."""
    uncertain: int
    """Items written again after a commit whose outcome was unknown: each may be stored twice."""


class BatchWriter(Generic[Item]):
    """Collects items and writes them with `write` (blocking; called in a worker thread) in batches of at most
    `batch_size`, at least every `flush_seconds`, or sooner once a batch is full::

        writer = BatchWriter(table.append, what="audit records", logger=logger, size_of=estimated_size)
        writer.start()            # on the event loop, before the first add()
        writer.add(record)        # from any thread; never blocks
        await writer.close()      # writes what is still waiting, or gives it up (counted) if it cannot

    `size_of` estimates the memory an item holds; the items waiting, with the batch being written, stay within
    `max_waiting_bytes`: beyond it the oldest waiting ones are dropped (counted in `dropped`). See the module's
    docstring for what each exception of `write` does.
    """

    def __init__(
        self,
        write: Callable[[Sequence[Item]], None],
        *,
        what: str,
        logger: logging.Logger,
        size_of: Callable[[Item], int],
        max_waiting_bytes: int = DEFAULT_MAX_WAITING_BYTES,
        batch_size: int = 500,
        flush_seconds: float = 1.0,
        retry_seconds: float = 0.5,
        max_retry_seconds: float = 10.0,
    ) -> None:
        self._write = write
        self._what = what
        self._logger = logger
        self._size_of = size_of
        self._max_bytes = max_waiting_bytes
        self._batch_size = batch_size
        self._flush_seconds = flush_seconds
        self._retry_seconds = retry_seconds
        self._max_retry_seconds = max_retry_seconds
        # Each item with its size, estimated once, when it is added (a tuple: the cheapest pair to make).
        self._waiting: deque[tuple[Item, int]] = deque()
        self._waiting_bytes = 0
        self._writing_bytes = 0  # the batch out of the queue while `write` runs; it counts against the bound too
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._closing: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0
        self.rejected = 0
        self.abandoned = 0
        self.write_errors = 0
        self.uncertain = 0
        self._failures_in_a_row = 0
        self._last_failure_logged = -math.inf
        self._last_drop_logged = -math.inf
        self._last_rejection_logged = -math.inf

    @property
    def started(self) -> bool:
        return self._task is not None

    @property
    def failed(self) -> int:
        """Items that will never be written for a reason other than the bound: refused, or given up at close."""
        return self.rejected + self.abandoned

    def stats(self) -> BatchWriterStats:
        with self._lock:
            waiting_items, waiting_bytes = len(self._waiting), self._waiting_bytes + self._writing_bytes
        return BatchWriterStats(waiting_items, waiting_bytes, self.dropped, self.rejected, self.abandoned,
                                self.write_errors, self.uncertain)

    def start(self) -> None:
        """Start the background task on the running event loop."""
        if self._task is None:
            self._loop = asyncio.get_running_loop()
            self._wake = asyncio.Event()
            self._closing = asyncio.Event()
            self._task = asyncio.create_task(self._drain(), name=f"batch-writer-{self._what}")

    def add(self, item: Item) -> None:
        """Queue `item`. Thread-safe and never blocking; ignored before start() and once close() began."""
        if self._loop is None:
            return
        size = self._size_of(item)
        dropped_now = 0
        with self._lock:
            if size > self._max_bytes:
                dropped_now = 1  # alone larger than the bound: it would push out everything else for nothing
            else:
                self._waiting.append((item, size))
                self._waiting_bytes += size
                while self._waiting_bytes + self._writing_bytes > self._max_bytes:
                    self._waiting_bytes -= self._waiting.popleft()[1]
                    dropped_now += 1
            self.dropped += dropped_now
            waiting = len(self._waiting)
        if dropped_now:
            self._report_drops()
        if waiting >= self._batch_size:
            self._wake_soon()

    def _report_drops(self) -> None:
        now = time.monotonic()
        if now - self._last_drop_logged >= _COMPLAINT_INTERVAL_SECONDS:
            self._last_drop_logged = now
            self._logger.warning(
                "the %s waiting for the database exceed store_buffer_bytes (%d bytes): the oldest are dropped, "
                "%d so far (the log has them; raise store_buffer_bytes to keep more through an outage)",
                self._what, self._max_bytes, self.dropped)

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
        assert self._wake is not None and self._closing is not None
        delay = self._retry_seconds
        while not self._closing.is_set():
            await wait_set(self._wake, self._flush_seconds)
            self._wake.clear()
            if self._closing.is_set():
                return  # close() writes what is left
            if await self._write_waiting():
                delay = self._retry_seconds
                continue
            # The destination is unavailable: try again after a delay, not at every wake-up, so that a database
            # coming back is not met by every replica's every batch at once; close() cuts the delay short.
            await wait_set(self._closing, delay)
            delay = min(delay * 2, self._max_retry_seconds)
            self._wake.set()

    def _take_batch(self) -> list[tuple[Item, int]]:
        with self._lock:
            batch = [self._waiting.popleft() for _ in range(min(self._batch_size, len(self._waiting)))]
            size = sum(size for _, size in batch)
            self._waiting_bytes -= size
            self._writing_bytes = size
            return batch

    def _put_back(self, unwritten: list[tuple[Item, int]]) -> None:
        """The batch's write is over; what it could not write goes back to the front, oldest first. The bound
        holds: those bytes were counted while the batch was out."""
        with self._lock:
            self._writing_bytes = 0
            self._waiting.extendleft(reversed(unwritten))
            self._waiting_bytes += sum(size for _, size in unwritten)

    async def _write_waiting(self) -> bool:
        """Write every batch waiting; False when the destination was unavailable (the rest stays queued)."""
        while batch := self._take_batch():
            unwritten = await self._write_batch(batch)
            self._put_back(unwritten)
            if unwritten:
                return False
        return True

    async def _write_batch(self, batch: list[tuple[Item, int]]) -> list[tuple[Item, int]]:
        """Write `batch`; what is left to write later because the destination is unavailable."""
        try:
            await asyncio.to_thread(self._write, [item for item, _ in batch])
        except BatchRejected:
            if len(batch) == 1:
                self._rejected_item()
                return []
            middle = len(batch) // 2
            unwritten = await self._write_batch(batch[:middle])
            if unwritten:
                return unwritten + batch[middle:]
            return await self._write_batch(batch[middle:])
        except BatchOutcomeUnknown as exc:
            self.uncertain += len(batch)
            self._logger.warning("the database connection broke while committing %d %s: they are written again "
                                 "and may be stored twice (%s)", len(batch), self._what, exc)
            self._unavailable(exc, len(batch))
            return batch
        except Exception as exc:
            self._unavailable(exc, len(batch))
            return batch
        self._available()
        return []

    def _unavailable(self, exc: Exception, batch_items: int) -> None:
        self.write_errors += 1
        self._failures_in_a_row += 1
        now = time.monotonic()
        if now - self._last_failure_logged >= _COMPLAINT_INTERVAL_SECONDS:
            self._last_failure_logged = now
            stats = self.stats()
            self._logger.error(
                "cannot write %d %s to the database: %s. They are kept and retried (failed attempts so far: %d; "
                "waiting: %d records, %d of store_buffer_bytes=%d bytes; dropped so far: %d)",
                batch_items, self._what, exc, self.write_errors, stats.waiting_items + batch_items,
                stats.waiting_bytes, self._max_bytes, self.dropped,
                exc_info=exc if self._failures_in_a_row == 1 and not isinstance(exc, _EXPLAINED) else None)

    def _available(self) -> None:
        if self._failures_in_a_row:
            self._logger.warning("writing %s to the database works again (failed attempts: %d)",
                                 self._what, self._failures_in_a_row)
            self._failures_in_a_row = 0
            self._last_failure_logged = -math.inf  # the next outage is reported at once

    def _rejected_item(self) -> None:
        self.rejected += 1
        now = time.monotonic()
        if now - self._last_rejection_logged < _COMPLAINT_INTERVAL_SECONDS:
            return
        self._last_rejection_logged = now
        self._logger.error("the database refused one of the %s for what it holds; it is lost (%d so far; the log "
                           "has it)", self._what, self.rejected)

    async def close(self) -> None:
        """Stop the background task and write what is waiting; later add()s are ignored. If the destination is
        still unavailable, what could not be written is given up, counted in `abandoned` and logged."""
        task, self._task = self._task, None
        if task is None:
            return
        assert self._closing is not None
        self._closing.set()
        self._wake_soon()
        try:
            # After the write it may be in: a batch is never written by two threads at once. asyncio.wait, not
            # await: a close() that is itself cancelled leaves the task to end on its own.
            await asyncio.wait({task})
        finally:
            self._loop = None
        if not task.cancelled() and task.exception() is not None:
            self._logger.error("the %s writer failed", self._what, exc_info=task.exception())
        if not await self._write_waiting():
            self._abandon()

    def _abandon(self) -> None:
        with self._lock:
            given_up = len(self._waiting)
            self._waiting.clear()
            self._waiting_bytes = 0
        self.abandoned += given_up
        self._logger.error("%d %s were not written: the database is still unavailable as the server stops (the "
                           "log has them)", given_up, self._what)
