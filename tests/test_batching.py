"""The BatchWriter behind the audit trail and the database log handler: what it does when its destination is
down (keeps and retries), full (drops the oldest, counted), refuses a row (loses only that row), or answers a
commit with a broken connection (writes again, counted), and how it closes in each case."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence

import pytest

from toolhost_server.batching import BatchOutcomeUnknown, BatchRejected, BatchUnavailable, BatchWriter

from helpers.waiting import within

logger = logging.getLogger("toolhost.test.batching")
ITEM_BYTES = 100


class Destination:
    """A destination in memory that can be down: every write while it is raises, as a database that is down
    does, and announces the attempt."""

    def __init__(self, error: type[Exception] = BatchUnavailable) -> None:
        self.error = error
        self.rows: list[str] = []
        self.down = threading.Event()
        self.attempts = 0
        self.failed_attempts = 0
        self._loop = asyncio.get_running_loop()
        self._attempted = asyncio.Condition()

    def write(self, items: Sequence[str]) -> None:
        self.attempts += 1
        failed = self.down.is_set()
        if failed:
            self.failed_attempts += 1
        asyncio.run_coroutine_threadsafe(self._announce(), self._loop)
        if failed:
            raise self.error("the destination is down")
        self.rows.extend(items)

    async def _announce(self) -> None:
        async with self._attempted:
            self._attempted.notify_all()

    async def failed_at_least(self, count: int) -> None:
        async with self._attempted:
            await within(self._attempted.wait_for(lambda: self.failed_attempts >= count),
                         f"{count} failed write attempts")

    async def holds(self, count: int) -> None:
        async with self._attempted:
            await within(self._attempted.wait_for(lambda: len(self.rows) >= count), f"{count} rows written")


def writer_for(write, **settings) -> BatchWriter[str]:
    options = {"batch_size": 10, "flush_seconds": 0.01, "retry_seconds": 0.01, "max_retry_seconds": 0.05,
               "max_waiting_bytes": 1000 * ITEM_BYTES} | settings
    return BatchWriter(write, what="test records", logger=logger, size_of=lambda item: ITEM_BYTES, **options)


@pytest.mark.parametrize("error", [BatchUnavailable, ConnectionError], ids=["announced", "unexpected"])
async def test_a_destination_that_is_down_gets_every_item_once_it_is_back(error):
    destination = Destination(error)
    destination.down.set()
    writer = writer_for(destination.write)
    writer.start()
    items = [f"item-{index}" for index in range(25)]
    for item in items[:15]:
        writer.add(item)
    await destination.failed_at_least(3)  # retried, not given up
    for item in items[15:]:
        writer.add(item)
    destination.down.clear()
    await destination.holds(len(items))
    await writer.close()
    assert destination.rows == items  # in order, each once
    stats = writer.stats()
    assert (stats.dropped, stats.rejected, stats.abandoned, stats.uncertain) == (0, 0, 0, 0)
    assert stats.write_errors == destination.failed_attempts >= 3
    assert (stats.waiting_items, stats.waiting_bytes) == (0, 0)


async def test_beyond_the_bound_the_oldest_are_dropped_counted_and_logged(caplog):
    caplog.set_level(logging.WARNING, logger=logger.name)
    destination = Destination()
    destination.down.set()
    writer = writer_for(destination.write, max_waiting_bytes=20 * ITEM_BYTES, flush_seconds=3600)
    writer.start()
    for index in range(50):
        writer.add(f"item-{index}")
    assert writer.dropped == 30
    assert writer.stats().waiting_bytes == 20 * ITEM_BYTES
    assert "exceed store_buffer_bytes" in caplog.text and "30 so far" not in caplog.text  # once a minute at most
    destination.down.clear()
    await writer.close()
    assert destination.rows == [f"item-{index}" for index in range(30, 50)]


async def test_an_item_larger_than_the_bound_is_dropped_alone():
    destination = Destination()
    writer = BatchWriter(destination.write, what="test records", logger=logger, size_of=len, max_waiting_bytes=10,
                         flush_seconds=3600)
    writer.start()
    writer.add("small")
    writer.add("x" * 11)
    await writer.close()
    assert destination.rows == ["small"] and writer.dropped == 1


async def test_close_gives_up_on_a_destination_still_down_counts_the_items_and_does_not_wait_for_the_retry(caplog):
    destination = Destination()
    destination.down.set()
    # A retry an hour away: close() must not wait for it.
    writer = writer_for(destination.write, retry_seconds=3600, max_retry_seconds=3600)
    writer.start()
    for index in range(12):
        writer.add(f"item-{index}")
    await destination.failed_at_least(1)
    await within(writer.close(), "close() with the destination down")
    assert destination.rows == [] and writer.abandoned == 12 and writer.failed == 12
    assert "12 test records were not written" in caplog.text
    writer.add("after close")  # ignored
    assert writer.stats().waiting_items == 0


async def test_close_writes_what_waits_when_the_destination_is_back_during_the_retry_delay():
    destination = Destination()
    destination.down.set()
    writer = writer_for(destination.write, retry_seconds=3600, max_retry_seconds=3600)
    writer.start()
    for index in range(12):
        writer.add(f"item-{index}")
    await destination.failed_at_least(1)
    destination.down.clear()
    await within(writer.close(), "close() during the retry delay")
    assert destination.rows == [f"item-{index}" for index in range(12)] and writer.abandoned == 0


async def test_a_refused_row_loses_only_itself_and_the_rest_of_its_batch_is_written():
    written: list[str] = []

    def write(items: Sequence[str]) -> None:
        if any(item.startswith("bad") for item in items):
            raise BatchRejected("a value the destination refuses")
        written.extend(items)

    writer = writer_for(write, batch_size=16, flush_seconds=3600)
    writer.start()
    items = [f"bad-{index}" if index in (3, 11) else f"item-{index}" for index in range(16)]
    for item in items:
        writer.add(item)
    await writer.close()
    assert sorted(written) == sorted(item for item in items if not item.startswith("bad"))
    assert (writer.rejected, writer.write_errors, writer.abandoned) == (2, 0, 0)


async def test_a_commit_whose_outcome_is_unknown_is_written_again_and_counted():
    """At least once: the batch whose commit answer was lost is written again, so it may be stored twice; the
    count says how many records may be."""
    destination = Destination()
    broken = [True]

    def write(items: Sequence[str]) -> None:
        destination.write(items)  # committed...
        if broken[0]:
            broken[0] = False
            raise BatchOutcomeUnknown("the connection broke during COMMIT")  # ...but the answer was lost

    writer = writer_for(write, batch_size=5)
    writer.start()
    for index in range(5):
        writer.add(f"item-{index}")
    await destination.holds(10)
    await writer.close()
    assert destination.rows == [f"item-{index}" for index in range(5)] * 2
    assert (writer.uncertain, writer.write_errors, writer.abandoned) == (5, 1, 0)


@pytest.mark.parametrize("size", [0, 1])
async def test_close_returns_whether_or_not_items_wait(size):
    writer = writer_for(lambda items: None)
    writer.start()
    for index in range(size):
        writer.add(str(index))
    await within(writer.close(), "close()")
    assert writer.stats().waiting_items == 0
