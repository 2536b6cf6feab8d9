"""Shared fixtures: a real toolhost server on 127.0.0.1 port 0, built in-process from a Config."""

from __future__ import annotations

import toolhost_server  # noqa: F401  -  first, so its gRPC settings apply before grpc loads (see its __init__)

# isort: split

import dataclasses
import os
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
