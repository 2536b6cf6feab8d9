"""Waiting for an asyncio.Event with a time limit, without losing a cancellation.

Python 3.11's `asyncio.wait_for(event.wait(), seconds)` swallows a cancellation that arrives once the event is
set but before the waiting task has run again: the task goes on as if nothing had asked it to stop, and
whoever cancelled it and awaits it (a close() at shutdown) waits forever. asyncio.timeout does not.
"""

from __future__ import annotations

import asyncio


async def wait_set(event: asyncio.Event, seconds: float) -> bool:
    """Wait until `event` is set, at most `seconds`; whether it is set."""
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        return event.is_set()
    return True
