"""A python tool that runs until its call is cancelled, and says when it stopped (in-process servers only: the
holds live in this process). Its catalog entrypoint is `helpers.held_calls:held`."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field


@dataclass
class Hold:
    """`started` is set when a call of `held` with this hold begins; `stopped` when that call's coroutine
    ended, `cancelled` telling whether it ended by a cancellation."""

    started: asyncio.Event = field(default_factory=asyncio.Event)
    stopped: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: bool = False


HOLDS: dict[str, Hold] = {}


def new_hold() -> tuple[str, Hold]:
    """A hold's name (the `hold` argument of `held`) and the hold."""
    name = uuid.uuid4().hex
    HOLDS[name] = Hold()
    return name, HOLDS[name]


async def held(hold: str) -> str:
    """Entrypoint `helpers.held_calls:held`: announces the call, then waits until it is cancelled."""
    state = HOLDS[hold]
    try:
        state.started.set()
        await asyncio.Event().wait()
        return "never"
    except asyncio.CancelledError:
        state.cancelled = True
        raise
    finally:
        state.stopped.set()


def held_tool(name: str) -> str:
    """A catalog file for a tool running `held`."""
    return (f"name: {name}\ndescription: Runs until its call is cancelled.\n"
            "runner: {type: python, entrypoint: 'helpers.held_calls:held'}\n"
            "parameters: [{name: hold, type: string, required: true}]\n")
