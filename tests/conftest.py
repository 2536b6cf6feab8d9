"""Shared fixtures: a real toolhost server on 127.0.0.1 port 0, built in-process from a Config."""

from __future__ import annotations

import toolhost_server  # noqa: F401  -  first, so its gRPC settings apply before grpc loads (see its __init__)

# isort: split

import asyncio
import dataclasses
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest

from toolhost.v1 import tool_service_pb2_grpc
from toolhost_server.api.server import GrpcServer, create_toolhost
from toolhost_server.app import Toolhost
from toolhost_server.config import Config

# A throwaway PostgreSQL server (the `postgres_cluster` and `postgres_url` fixtures).
pytest_plugins = ["postgres_cluster"]

REPO_ROOT = Path(__file__).resolve().parent.parent
TOOLS_BIN = REPO_ROOT / ".tools" / "bin"

T = TypeVar("T")


@dataclass
class RunningServer:
    """A started server and a channel to it."""

    toolhost: Toolhost
    grpc_server: GrpcServer
    port: int
    channel: grpc.aio.Channel
    stub: tool_service_pb2_grpc.ToolServiceStub

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"


ServerFactory = Callable[..., Awaitable[RunningServer]]


@pytest.fixture
async def start_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ServerFactory]:
    """`await start_server(catalog_dirs=(...), ...)` starts a server with those Config fields (watching off
    unless asked, so tests decide when reloads happen)."""
    running: list[RunningServer] = []

    async def start(**overrides: Any) -> RunningServer:
        # process_user root: many tests run this interpreter, which lives where only root may enter (/root);
        # tests/test_process_identity.py covers the unprivileged default with the system's own programs.
        fields: dict[str, Any] = {"grpc_address": "127.0.0.1:0", "watch_catalog": False, "process_user": "root",
                                  "data_dir": str(tmp_path_factory.mktemp("data"))}
        fields.update(overrides)
        if "catalog_dirs" in fields:
            fields["catalog_dirs"] = tuple(str(d) for d in fields["catalog_dirs"])
        config = dataclasses.replace(Config(), **fields)
        toolhost = create_toolhost(config)
        await toolhost.start()
        server = GrpcServer(toolhost)
        port = await server.start()
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        result = RunningServer(toolhost, server, port, channel, tool_service_pb2_grpc.ToolServiceStub(channel))
        running.append(result)
        return result

    yield start
    for server in reversed(running):
        await server.channel.close()
        server.toolhost.registry.close()
        await server.grpc_server.stop(0)
        await server.toolhost.close()


def write_tool(directory: Path, name: str, body: str = "", filename: str | None = None) -> Path:
    """Write a catalog file for a python-runner echo-like tool called `name` (or with the given body)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (filename or f"{name}.yaml")
    path.write_text(body or (
        f"name: {name}\n"
        f"description: Test tool {name}.\n"
        "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:greet'}\n"
        "parameters:\n"
        "  - {name: name, type: string, required: true}\n"
    ))
    return path


def tool_binary(name: str) -> str:
    """The path of a pinned developer tool installed by `make tools` (grpcurl, grpc-health-probe, actionlint)."""
    path = TOOLS_BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} is not installed: run `make tools` (make test does it)")
    return found


def leftover_processes(marker: str) -> list[int]:
    """Pids of live processes whose environment holds `marker` (how tests find what a tool left behind)."""
    needle = marker.encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read()
            with open(f"/proc/{entry}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in environ and state != b"Z":
            found.append(int(entry))
    return found


# --- waiting for events ------------------------------------------------------------------------------------

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


# --- a python tool that runs until the test lets it finish (in-process servers only) ---------------------------


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
    """Entrypoint `conftest:gated_echo`: announces the call on its gate, waits for the release, returns `text`."""
    GATES[gate].started.set()
    await GATES[gate].release.wait()
    return text


def gated_tool(name: str, default_text: str = "done") -> str:
    """A catalog file for a tool running gated_echo, with `gate` required and `text` defaulting to default_text."""
    return (f"name: {name}\ndescription: Answers when the test releases its gate.\n"
            "runner: {type: python, entrypoint: 'conftest:gated_echo'}\n"
            f"parameters: [{{name: gate, type: string, required: true}}, "
            f"{{name: text, type: string, default: {default_text}}}]\n")
