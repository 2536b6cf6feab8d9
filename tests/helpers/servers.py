"""Toolhost servers for tests: one built in-process (the `start_server` fixture returns a `RunningServer`) and
`toolhost serve` as a real child process (`ServerProcess`), for tests that need signals, flags or the environment."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import grpc

from toolhost.v1 import tool_service_pb2_grpc
from toolhost_server.api.server import GrpcServer
from toolhost_server.app import Toolhost

from helpers.paths import TESTS_DIR

# python_entrypoint_modules of every test server, set as a deployment sets it: the server's own tool modules, and
# the test modules whose functions test catalogs name (catalog_functions, helpers.gates, and test modules that
# define a tool next to the test using it). Each is a whole module name: prefixes match on dotted boundaries.
TEST_ENTRYPOINT_MODULES = ("toolhost_server.tools", "catalog_functions", "helpers",
                           *sorted({path.stem for path in TESTS_DIR.rglob("test_*.py")}))


@dataclass
class RunningServer:
    """A started in-process server and a channel to it."""

    toolhost: Toolhost
    grpc_server: GrpcServer
    port: int
    channel: grpc.aio.Channel
    stub: tool_service_pb2_grpc.ToolServiceStub

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"


# The start_server fixture: `await start_server(catalog_dirs=(...), ...)` with Config fields.
ServerFactory = Callable[..., Awaitable[RunningServer]]

_LISTENING = re.compile(rb"serving gRPC on (?:127\.0\.0\.1|0\.0\.0\.0):(\d+)")  # 0.0.0.0: with --insecure


class ServerProcess:
    """A `toolhost serve` child. `start()` waits until it listens and returns its port."""

    def __init__(self, *args: str, env: Mapping[str, str] | None = None, address: str = "127.0.0.1:0") -> None:
        self.args = args
        self.address = address
        # A data directory of its own (the SQLite store), unless the test gives one.
        self.data_dir = tempfile.mkdtemp(prefix="toolhost-test-data-")
        # A free HTTP port too: the default 8010 would be shared by every server a test starts. The tests
        # directory on PYTHONPATH: catalog entrypoints such as catalog_functions:<name> import from it.
        self.env = {**os.environ, "PYTHONPATH": str(TESTS_DIR), "TOOLHOST_DATA_DIR": self.data_dir,
                    "TOOLHOST_HTTP_ADDRESS": "127.0.0.1:0",
                    "TOOLHOST_PYTHON_ENTRYPOINT_MODULES": ",".join(TEST_ENTRYPOINT_MODULES), **(env or {})}
        self.process: asyncio.subprocess.Process | None = None
        self.log = b""
        self.port = 0

    async def start(self, timeout: float = 20) -> int:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "toolhost_server.cli", "serve", "--grpc-address", self.address, *self.args,
            env=self.env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        assert self.process.stderr is not None
        async with asyncio.timeout(timeout):
            while True:
                line = await self.process.stderr.readline()
                if not line:
                    raise RuntimeError(f"server exited before listening:\n{self.log.decode()}")
                self.log += line
                found = _LISTENING.search(line)
                if found:
                    self.port = int(found.group(1))
                    return self.port

    async def wait_for_log(self, pattern: bytes, timeout: float = 10) -> re.Match[bytes]:
        """Read the log until a line matches `pattern` (a regex); the match."""
        assert self.process is not None and self.process.stderr is not None
        found = re.search(pattern, self.log)
        async with asyncio.timeout(timeout):
            while found is None:
                line = await self.process.stderr.readline()
                if not line:
                    raise RuntimeError(f"server exited before logging {pattern!r}:\n{self.log.decode()}")
                self.log += line
                found = re.search(pattern, line)
        return found

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def wait(self, timeout: float = 30) -> int:
        """Wait for the exit status, collecting the rest of the log."""
        assert self.process is not None and self.process.stderr is not None
        async with asyncio.timeout(timeout):
            self.log += await self.process.stderr.read()
            return await self.process.wait()

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        shutil.rmtree(self.data_dir, ignore_errors=True)
