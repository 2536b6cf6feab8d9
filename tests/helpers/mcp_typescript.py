"""The official MCP TypeScript SDK's client (pinned in tools/package.json), run by Node.js as a child process.

tests/mcp_ts/driver.mjs does what a request line asks (connect, list, call, abort, close) and writes back what
the SDK returned or threw, one JSON line each, and events (progress, tools_list_changed) as they happen. The
tests assert on those records; the script decides nothing.

Node.js and tools/node_modules are requirements of `make test` (README, Requirements; `make tools` runs
`npm ci --prefix tools`). Missing, they fail the test with the command that fixes it: never a skip.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from helpers.paths import TESTS_DIR
from helpers.waiting import within

ROOT = TESTS_DIR.parent
SCRIPTS = TESTS_DIR / "mcp_ts"
DRIVER = SCRIPTS / "driver.mjs"
SDK_FROM_TOOLS = SCRIPTS / "sdk_from_tools.mjs"
SDK_PACKAGE = "@modelcontextprotocol/sdk"
# The SDK's own floor is 18; the resolve hook sdk_from_tools.mjs registers needs module.register (20.6).
MINIMUM_NODE = (20, 6)

JsonObject = dict[str, Any]


def pinned_sdk_version() -> str:
    """The SDK version tools/package-lock.json pins."""
    lock = json.loads((ROOT / "tools/package-lock.json").read_text())
    return str(lock["packages"][f"node_modules/{SDK_PACKAGE}"]["version"])


def node_program() -> str:
    """The `node` on PATH, checked to be new enough, with the pinned SDK installed in tools/node_modules; a test
    failure that says how to get them otherwise."""
    node = shutil.which("node")
    if node is None:
        pytest.fail(f"node is not on PATH: the TypeScript MCP client tests need Node.js {MINIMUM_NODE[0]}+ "
                    "with npm (README, Requirements); install it, then `make tools`")
    version = node_version(node)
    if version < MINIMUM_NODE:
        pytest.fail(f"{node} is Node.js {'.'.join(map(str, version))}; the TypeScript MCP client tests need "
                    f"{'.'.join(map(str, MINIMUM_NODE))} or later (README, Requirements)")
    installed = ROOT / "tools/node_modules" / SDK_PACKAGE / "package.json"
    wanted = pinned_sdk_version()
    found = json.loads(installed.read_text())["version"] if installed.exists() else None
    if found != wanted:
        pytest.fail(f"{SDK_PACKAGE} {wanted} is not installed in tools/node_modules (found {found}): "
                    "run `make tools` (npm ci --prefix tools)")
    return node


@functools.cache
def node_version(node: str) -> tuple[int, ...]:
    """`node --version` as numbers: (20, 20, 2)."""
    printed = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout
    return tuple(int(part) for part in printed.strip().lstrip("v").split(".")[:3])


class DriverError(AssertionError):
    """The driver answered a request with an error where the test expected a result."""


class TypeScriptMcpClient:
    """One driver.mjs process: `await TypeScriptMcpClient.http(url, token)` or `.stdio(argv)`, then
    `await client.result("connect")`. Requests may overlap: `send` returns an id and `reply(id)` awaits it."""

    def __init__(self, process: asyncio.subprocess.Process, transport: str) -> None:
        self._process = process
        self.transport = transport  # "http" or "stdio"
        self._ids = itertools.count(1)
        self._replies: dict[int, asyncio.Future[JsonObject]] = {}
        self.events: asyncio.Queue[JsonObject] = asyncio.Queue()
        self.stderr = b""
        # What `connect` learned: protocolVersion, sessionId, serverInfo, capabilities.
        self.connection: JsonObject = {}
        self._reader = asyncio.create_task(self._read_stdout())
        self._stderr_reader = asyncio.create_task(self._read_stderr())

    @classmethod
    async def http(cls, url: str, token: str | None = None) -> TypeScriptMcpClient:
        """A client of the streamable HTTP endpoint `url`, sending `Authorization: Bearer token` when given."""
        env = {key: value for key, value in os.environ.items() if key != "MCP_BEARER_TOKEN"}
        if token is not None:
            env["MCP_BEARER_TOKEN"] = token
        return await cls._start(["http", url], env)

    @classmethod
    async def stdio(cls, argv: Sequence[str], env: Mapping[str, str] | None = None) -> TypeScriptMcpClient:
        """A client that starts `argv` and speaks MCP on its stdin and stdout, as a host does; `env` is the
        child's whole environment (this process's by default)."""
        return await cls._start(["stdio", *argv], dict(env if env is not None else os.environ))

    @classmethod
    async def toolhost_mcp(cls, target: str, token_file: Path) -> TypeScriptMcpClient:
        """A client that starts `toolhost mcp --target TARGET --token-file FILE`, as a host configured with that
        command does."""
        return await cls.stdio([sys.executable, "-m", "toolhost_server.cli", "mcp", "--target", target,
                                "--token-file", str(token_file)])

    @classmethod
    async def _start(cls, arguments: list[str], env: dict[str, str]) -> TypeScriptMcpClient:
        process = await asyncio.create_subprocess_exec(
            node_program(), "--import", str(SDK_FROM_TOOLS), str(DRIVER), *arguments, cwd=SCRIPTS, env=env,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            limit=64 * 1024 * 1024)
        return cls(process, arguments[0])

    async def connect(self) -> JsonObject:
        """Connect (the handshake); what it learned, also kept as `connection`."""
        self.connection = dict(await self.result("connect"))
        return self.connection

    def send(self, op: str, **fields: Any) -> int:
        """Ask the driver for `op`; the request's id, for `reply`."""
        assert self._process.stdin is not None
        request_id = next(self._ids)
        self._replies[request_id] = asyncio.get_running_loop().create_future()
        self._process.stdin.write(json.dumps({"id": request_id, "op": op, **fields}).encode() + b"\n")
        return request_id

    async def reply(self, request_id: int) -> JsonObject:
        """The driver's reply to request `request_id`: {"ok": true, "result": ...} or {"ok": false, "error": ...}."""
        return await within(self._replies[request_id], f"the TypeScript client's reply to request {request_id}")

    async def result(self, op: str, **fields: Any) -> Any:
        """What the SDK returned for `op`; DriverError with what it threw instead."""
        return self.expect_result(await self.reply(self.send(op, **fields)))

    async def error(self, op: str, **fields: Any) -> JsonObject:
        """What the SDK threw for `op` (name, type, code, message, data); DriverError if it returned."""
        return self.expect_error(await self.reply(self.send(op, **fields)))

    def expect_result(self, reply: JsonObject) -> Any:
        if not reply["ok"]:
            raise DriverError(f"the TypeScript client failed: {reply['error']}\nits stderr:\n"
                              f"{self.stderr.decode(errors='replace')}")
        return reply["result"]

    @staticmethod
    def expect_error(reply: JsonObject) -> JsonObject:
        if reply["ok"]:
            raise DriverError(f"the TypeScript client succeeded where an error was expected: {reply['result']}")
        return dict(reply["error"])

    async def event(self, kind: str) -> JsonObject:
        """The next event of `kind` (others before it are dropped)."""
        async def next_of_kind() -> JsonObject:
            while True:
                event = await self.events.get()
                if event["event"] == kind:
                    return event

        return await within(next_of_kind(), f"a {kind} event from the TypeScript client")

    async def stop(self) -> None:
        """End the driver: stdin closed, then killed if it does not exit by itself."""
        if self._process.returncode is None:
            assert self._process.stdin is not None
            with contextlib.suppress(ConnectionError):
                self._process.stdin.close()
            try:
                await within(self._process.wait(), "the TypeScript client's exit", seconds=10)
            except AssertionError:
                self._process.kill()
                await self._process.wait()
        await asyncio.gather(self._reader, self._stderr_reader, return_exceptions=True)

    async def _read_stdout(self) -> None:
        assert self._process.stdout is not None
        async for line in self._process.stdout:
            message = json.loads(line)
            if "event" in message:
                self.events.put_nowait(message)
                continue
            future = self._replies.get(message.get("id"))
            if future is not None and not future.done():
                future.set_result(message)
        # The driver exited: nothing still waiting will be answered.
        for request_id, future in self._replies.items():
            if not future.done():
                future.set_exception(DriverError(
                    f"the TypeScript client exited (status {await self._process.wait()}) before answering "
                    f"request {request_id}; its stderr:\n{self.stderr.decode(errors='replace')}"))

    async def _read_stderr(self) -> None:
        assert self._process.stderr is not None
        async for line in self._process.stderr:
            self.stderr += line
