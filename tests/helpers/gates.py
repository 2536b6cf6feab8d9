"""A python tool that runs until the test lets it finish (in-process servers only: the gates live in this
process). Its catalog entrypoint is `helpers.gates:gated_echo`."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field


@dataclass
class Gate:
    """`started` is set when a call of `gated_echo` with this gate begins; the call returns once `release` is."""

    started: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)


GATES: dict[str, Gate] = {}


def new_gate() -> tuple[str, Gate]:
    """A gate's name (the `gate` argument of gated_echo) and the gate."""
    name = uuid.uuid4().hex
    GATES[name] = Gate()
    return name, GATES[name]


async def gated_echo(gate: str, text: str = "done") -> str:
    """Entrypoint `helpers.gates:gated_echo`: announces the call on its gate, waits for the release, returns
    `text`."""
    GATES[gate].started.set()
    await GATES[gate].release.wait()
    return text


def gated_tool(name: str, default_text: str = "done") -> str:
    """A catalog file for a tool running gated_echo, with `gate` required and `text` defaulting to default_text."""
    return (f"name: {name}\ndescription: Answers when the test releases its gate.\n"
            "runner: {type: python, entrypoint: 'helpers.gates:gated_echo'}\n"
            f"parameters: [{{name: gate, type: string, required: true}}, "
            f"{{name: text, type: string, default: {default_text}}}]\n")
