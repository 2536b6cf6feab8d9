"""Functions that test catalogs run with the python runner (entrypoint "catalog_functions:<name>").

The tests directory is on sys.path under pytest; subprocess servers get it through PYTHONPATH.
"""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from toolhost_server.model import Parameter
from toolhost_server.tools.base import Tool, ToolContext, ToolOutput, ToolRaisedFailure


async def sleep_echo(seconds: float, text: str = "done") -> str:
    await asyncio.sleep(seconds)
    return text


def blocking_sleep(seconds: float) -> str:
    time.sleep(seconds)
    return "slept"


def lone_surrogates() -> ToolOutput:
    """Text and structured output holding lone surrogates, as bytes decoded with errors="surrogateescape" give."""
    broken = "name-\udcff-\ud800"
    return ToolOutput(text=f"file {broken}", structured={"names": [broken], broken: 1})


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


def leak_in_failure() -> str:
    raise ToolRaisedFailure("login failed for password=hunter2hunter2 with AKIAIOSFODNN7EXAMPLE", "LOGIN_FAILED")


def leak_in_log(text: str) -> str:
    import logging

    logging.getLogger("toolhost.tool.leak_in_log").warning("about to use api_key=%s", text)
    return "logged"


class ReportsProgress(Tool):
    """Reports progress `steps` times (from a worker thread: `run` is sync), mentioning a secret each time."""

    name = "reports_progress"
    description = "Counts to steps, reporting progress."
    parameters = (Parameter("steps", "integer", "How many steps.", required=True),)

    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> str:  # type: ignore[override]
        steps = arguments["steps"]
        for step in range(1, steps + 1):
            context.report_progress(step, steps, f"step {step} with password=hunter2hunter2")
            # A report still waiting for the reader is replaced by the next: pause so that each one is read.
            time.sleep(0.1)
        return f"counted to {steps}"


class CanaryEverywhere(Tool):
    """Puts the `canary` credential everywhere a tool can: log, progress, output, structured output, failure."""

    name = "canary_everywhere"
    description = "Leaks its credential on purpose."
    parameters = (Parameter("fail", "boolean", "Fail with the credential in the message."),)
    credentials = ("canary",)

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        token = context.credentials["canary"]["token"]
        context.logger.warning("calling the service with token %s", token)
        context.report_progress(1, 2, f"authenticated as {token}")
        if arguments.get("fail"):
            raise ToolRaisedFailure(f"the service refused {token}", "REFUSED")
        encoded = base64.b64encode(f"user:{token}".encode()).decode()
        return ToolOutput(text=f"token {token} and basic {encoded}", structured={"note": token, "basic": encoded})


class CanaryResolvedAtRun(Tool):
    """Resolves the `latecanary` credential during its call (as windows_list_directory resolves the one its
    asset names), then puts it in its log, output, structured output or failure."""

    name = "canary_resolved_at_run"
    description = "Leaks a credential it resolved itself."
    parameters = (Parameter("fail", "boolean", "Fail with the credential in the message."),)

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        assert context.services.resolve_credentials is not None
        token = (await context.services.resolve_credentials(["latecanary"]))["latecanary"]["token"]
        context.logger.warning("resolved late value %s", token)
        if arguments.get("fail"):
            raise ToolRaisedFailure(f"the service refused {token}", "REFUSED")
        return ToolOutput(text=f"late value {token}", structured={"note": token})


def canary_function(credentials: Any) -> str:
    """A function tool gets the credentials its YAML declares as the `credentials` keyword."""
    return f"function sees {credentials['canary'].token}"


def canary_in_span(credentials: Any) -> str:
    """Puts its credential into the call's span: an attribute, and an event's name and attributes."""
    from opentelemetry import trace

    token = credentials["canary"].token
    span = trace.get_current_span()
    span.set_attribute("tool.note", f"token {token}")
    span.add_event(f"used {token}", {"detail": token, "api_key": "an ordinary looking value"})
    return "noted"
