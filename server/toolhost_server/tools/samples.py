"""Small functions that catalogs run with the python runner: the bundled example catalog's, and the tests' and
the clients' test catalogs' (a catalog may name only functions of allowed modules, see catalog.entrypoints)."""

from __future__ import annotations

import asyncio
import json
from typing import Any


def greet(name: str, excited: bool = False) -> str:
    return f"Hello, {name}{'!' if excited else '.'}"


async def nap(delay: float) -> None:
    """Sleeps for `delay` seconds and returns nothing: a call that takes as long as its caller asks."""
    await asyncio.sleep(delay)


def parse_json(s: str) -> Any:
    """The JSON value of the text `s`; text that is not JSON raises (the call fails with TOOL_EXCEPTION)."""
    return json.loads(s)


def to_text(object: Any = "") -> str:
    """`object` as text, as str() writes it (the parameter has str()'s name)."""
    return str(object)


def return_arguments(**arguments: Any) -> dict[str, Any]:
    """The arguments as the tool received them, defaults filled in: its structured output."""
    return dict(arguments)
