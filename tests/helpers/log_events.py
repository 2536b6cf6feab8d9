"""Waiting for a log record of this process: a handler that wakes the test's loop whenever a logger emits, so that
the test looks again only when something was logged (from any thread), never on a clock."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from helpers.waiting import within


class _Wakeup(logging.Handler):
    def __init__(self, loop: asyncio.AbstractEventLoop, emitted: asyncio.Event) -> None:
        super().__init__()
        self._loop = loop
        self._emitted = emitted

    def emit(self, record: logging.LogRecord) -> None:
        self._loop.call_soon_threadsafe(self._emitted.set)


@contextmanager
def log_wakeups(logger_name: str) -> Iterator[asyncio.Event]:
    """An Event set after each record `logger_name` emits, for `until_logged`; call inside the test's loop."""
    emitted = asyncio.Event()
    handler = _Wakeup(asyncio.get_running_loop(), emitted)
    logger = logging.getLogger(logger_name)
    logger.addHandler(handler)
    try:
        yield emitted
    finally:
        logger.removeHandler(handler)


async def until_logged(emitted: asyncio.Event, condition: Callable[[], bool], what: str) -> None:
    """Return once `condition` holds, looking again after each record; a failure naming `what` if it hangs."""
    async def wait() -> None:
        while True:
            emitted.clear()  # before the check: a record after it sets the event again
            if condition():
                return
            await emitted.wait()

    await within(wait(), what)
