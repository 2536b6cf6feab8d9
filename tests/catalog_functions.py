"""Functions that test catalogs run with the python runner (entrypoint "catalog_functions:<name>").

The tests directory is on sys.path under pytest; subprocess servers get it through PYTHONPATH.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any


async def sleep_echo(seconds: float, text: str = "done") -> str:
    await asyncio.sleep(seconds)
    return text


def blocking_sleep(seconds: float) -> str:
    time.sleep(seconds)
    return "slept"


def describe(**arguments: Any) -> dict[str, Any]:
    """Each argument's value and Python type, to see exactly what a tool receives."""
    return {name: {"value": value, "type": type(value).__name__} for name, value in arguments.items()}


def fail(message: str) -> str:
    raise ValueError(message)
