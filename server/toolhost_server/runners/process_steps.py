"""Loops of short blocking steps (reading /proc, writing cgroup files) with pauses between them, written once as
a generator and run either from the event loop, which the pauses yield to, or in place, when the loop cannot be
yielded to (a call's stop being cancelled by the loop's shutdown)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Generator
from typing import TypeAlias

# Yields the pause before its next step, in seconds; returns whether it got where it was going.
Steps: TypeAlias = Generator[float, None, bool]


async def run_steps(steps: Steps) -> bool:
    """Run `steps`, each pause an asyncio.sleep (0: just let the loop run other work)."""
    try:
        pause = next(steps)
        while True:
            await asyncio.sleep(pause)
            pause = next(steps)
    except StopIteration as done:
        return bool(done.value)


def run_steps_blocking(steps: Steps, longest_pause: float) -> bool:
    """Run `steps` without yielding, each pause a sleep of at most `longest_pause`."""
    try:
        pause = next(steps)
        while True:
            if pause > 0:
                time.sleep(min(pause, longest_pause))
            pause = next(steps)
    except StopIteration as done:
        return bool(done.value)
