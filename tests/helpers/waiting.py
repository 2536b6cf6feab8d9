"""Waiting for events, with a hang guard that names what did not happen instead of a bound on how fast it must."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

# How long a wait for an event may take before the test fails: a hang guard, not a speed requirement. Generous,
# so that a loaded machine never fails a test, and below pytest-timeout (120 s) so that the failure names what
# did not happen.
HANG_GUARD_SECONDS = 60.0


async def within(awaitable: Awaitable[T], what: str, seconds: float = HANG_GUARD_SECONDS) -> T:
    """The result of `awaitable`; a failure naming `what` if it hangs for `seconds`."""
    try:
        async with asyncio.timeout(seconds):
            return await awaitable
    except TimeoutError:
        raise AssertionError(f"{what}: still waiting after {seconds:g} s (the hang guard)") from None


async def until(condition: Callable[[], bool], what: str, seconds: float = HANG_GUARD_SECONDS,
                interval: float = 0.01) -> None:
    """Check `condition` every `interval` until it holds: only for a state that no event announces (a process
    gone from /proc, a file a worker thread removes). A failure naming `what` if it never holds."""
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(interval)

    await within(poll(), what, seconds)


async def eventually(predicate: Callable[[], bool], what: str = "") -> None:
    """`until` with the hang guard, `what` defaulting to the predicate's name."""
    await until(predicate, what or getattr(predicate, "__name__", "the condition"))
