"""Shared fixtures: a real toolhost server on 127.0.0.1 port 0, built in-process from a Config; and the markers
that let the unit tests run alone (`pytest -m "not server and not slow"`). Helpers are in the helpers package."""

from __future__ import annotations

import toolhost_server  # noqa: F401  -  first, so its gRPC settings apply before grpc loads (see its __init__)

# isort: split

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from toolhost.v1 import tool_service_pb2_grpc
from toolhost_server.api.server import GrpcServer, create_toolhost
from toolhost_server.config import Config

from helpers.servers import TEST_ENTRYPOINT_MODULES, RunningServer, ServerFactory

# A throwaway PostgreSQL server (the `postgres_cluster` and `postgres_url` fixtures).
pytest_plugins = ["postgres_cluster"]

# Fixtures that start a real toolhost server (in-process, or the cluster the store's tests use, which is slow):
# a test using one, directly or through another fixture, gets the marker.
SERVER_FIXTURES = frozenset({"start_server"})
SLOW_FIXTURES = frozenset({"postgres_cluster"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if used & SERVER_FIXTURES:
            item.add_marker(pytest.mark.server)
        if used & SLOW_FIXTURES:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
async def start_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ServerFactory]:
    """`await start_server(catalog_dirs=(...), ...)` starts a server with those Config fields (watching off
    unless asked, so tests decide when reloads happen; catalog entrypoints allowed in TEST_ENTRYPOINT_MODULES)."""
    running: list[RunningServer] = []

    async def start(**overrides: Any) -> RunningServer:
        # process_user root: many tests run this interpreter, which lives where only root may enter (/root);
        # tests/test_process_identity.py covers the unprivileged default with the system's own programs.
        fields: dict[str, Any] = {"grpc_address": "127.0.0.1:0", "watch_catalog": False, "process_user": "root",
                                  "data_dir": str(tmp_path_factory.mktemp("data")),
                                  "python_entrypoint_modules": TEST_ENTRYPOINT_MODULES}
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
