"""Functions that test catalogs run with the python runner (entrypoint "catalog_functions:<name>").

The tests directory is on sys.path under pytest; subprocess servers get it through PYTHONPATH.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

from toolhost_server.tools.base import ToolOutput


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


def not_json() -> ToolOutput:
    return ToolOutput(text="a set is not JSON", structured={1, 2})


async def announce_then_sleep(announce_dir: str, seconds: float, text: str = "done") -> str:
    """Leave a file in `announce_dir` when the call starts, so a test knows the server is running it."""
    Path(announce_dir, uuid.uuid4().hex).touch()
    await asyncio.sleep(seconds)
    return text


def server_is_dumpable() -> bool:
    """Asks the kernel whether the process running this tool (the server) is dumpable."""
    import ctypes

    pr_get_dumpable = 3
    return bool(ctypes.CDLL(None).prctl(pr_get_dumpable, 0, 0, 0, 0))


def leak(**_: Any) -> dict[str, Any]:
    """Returns secrets in every shape a tool might, next to ordinary fields that look a little like them."""
    return {
        "config": {"DB_PASSWORD": "hunter2hunter2", "githubToken": "ghp_abcdefghijklmnop", "max_tokens": 512,
                   "token_count": 37, "primary_key": "id"},
        "note": "connect with postgres://app:s3cretpass@db:5432/app",
    }


def leak_in_error() -> str:
    raise RuntimeError("login failed for password=hunter2hunter2 with AKIAIOSFODNN7EXAMPLE")


def leak_in_log(text: str) -> str:
    import logging

    logging.getLogger("toolhost.tool.leak_in_log").warning("about to use api_key=%s", text)
    return "logged"
