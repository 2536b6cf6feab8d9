"""`toolhost mcp` on stdio: the real command, started by the SDK's own stdio client (both protocol eras) or under
raw pipes, bridging to a real server through its gRPC API with the bridge's token.

The server runs in this process, so the tools below (catalog entrypoints `test_mcp_stdio:...`) share their
events with the tests: a test waits for what happens on the server, never for time.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.subscriptions import SubscriptionLost
from mcp.shared.exceptions import MCPError

import toolhost
from toolhost_server.mcp.backend import unknown_tool_message
from toolhost_server.tools.base import Tool, ToolContext, ToolOutput

from helpers.auth import Tokens, auth_file_text, write_catalog
from helpers.catalogs import write_tool
from helpers.certificates import CertificateAuthority

ERAS = ["legacy", "auto"]  # the SDK client's modes: 2025-11-25 by initialize; 2026-07-28 by discovery
PAGE = 100  # ListTools' default page, which is the bridge's tools/list page
BRIDGE = [sys.executable, "-m", "toolhost_server.cli", "mcp"]
WAIT = 60  # seconds: a bound on waiting for an event, so that a broken bridge fails instead of hanging


# --- tools the server runs for these tests -----------------------------------------------------------------


@dataclass
class Gate:
    started: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)


GATES: dict[str, Gate] = {}


def new_gate() -> tuple[str, Gate]:
    name = uuid.uuid4().hex
    GATES[name] = Gate()
    return name, GATES[name]


def record(name: str) -> dict[str, Any]:
    return {"name": name, "length": len(name)}


def noisy(text: str) -> str:
    """Writes to this process's stdout, from Python and from a child, while it serves a call."""
    print(f"tool print {text}", flush=True)
    subprocess.run(["echo", f"child print {text}"], check=True)
    return f"quiet {text}"


async def hang(gate: str) -> str:
    """Runs until cancelled, and says so on its gate."""
    GATES[gate].started.set()
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        GATES[gate].cancelled.set()
        raise
    return "never"


class Stepper(Tool):
    """Reports half its progress, then waits for the test to release its gate (which the test does when the
    progress reached it)."""

    name = "stepper"
    description = "Reports progress, then waits."

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:  # type: ignore[override]
        gate = GATES[arguments["gate"]]
        context.report_progress(1, 2, "half way")
        await gate.release.wait()
        return ToolOutput(text="stepped")


TOOLS = {
    "record": """
name: record
display_name: A Record
description: A record about a name.
runner: {type: python, entrypoint: "test_mcp_stdio:record"}
output_schema: {type: object, properties: {name: {type: string}, length: {type: integer}}}
annotations: {read_only: true, idempotent: true}
parameters: [{name: name, type: string, required: true}]
""",
    "fails": """
name: fails
description: Fails with its message.
runner: {type: python, entrypoint: "catalog_functions:fail"}
parameters: [{name: message, type: string, required: true}]
""",
    "noisy": """
name: noisy
description: Prints to stdout while it runs.
runner: {type: python, entrypoint: "test_mcp_stdio:noisy"}
parameters: [{name: text, type: string, required: true}]
""",
    "hang": """
name: hang
description: Runs until cancelled.
runner: {type: python, entrypoint: "test_mcp_stdio:hang"}
parameters: [{name: gate, type: string, required: true}]
""",
    "stepper": """
name: stepper
description: Reports progress, then waits.
runner: {type: python, entrypoint: "test_mcp_stdio:Stepper"}
parameters: [{name: gate, type: string, required: true}]
""",
}


def write_test_tools(directory: Path, generated: int = 0) -> Path:
    for name, body in TOOLS.items():
        write_tool(directory, name, body)
    for index in range(generated):
        write_tool(directory, f"gen_{index:03d}")
    return directory


# --- the bridge --------------------------------------------------------------------------------------------


class BridgeLog:
    """The bridge's stderr, read as it comes (a full pipe would stop the bridge), one line at a time."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._changed = asyncio.Condition()

    async def read(self, fd: int) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                    os.fdopen(fd, "rb"))
        try:
            while line := await reader.readline():
                async with self._changed:
                    self.lines.append(line.decode("utf-8", "replace"))
                    self._changed.notify_all()
        finally:
            transport.close()

    async def wait_for(self, pattern: str) -> str:
        """The first line (so far or to come) that matches the regex `pattern`."""
        async with asyncio.timeout(WAIT), self._changed:
            while True:
                found = next((line for line in self.lines if re.search(pattern, line)), None)
                if found is not None:
                    return found
                await self._changed.wait()

    @property
    def text(self) -> str:
        return "".join(self.lines)


class Received:
    """Every notification and transport error the client was handed, in order."""

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self._changed = asyncio.Condition()

    async def add(self, message: Any) -> None:
        async with self._changed:
            self.messages.append(message)
            self._changed.notify_all()

    async def wait_for_list_changes(self, count: int) -> None:
        async with asyncio.timeout(WAIT), self._changed:
            await self._changed.wait_for(lambda: self.list_changes() >= count)

    def list_changes(self) -> int:
        return sum(isinstance(m, types.ToolListChangedNotification) for m in self.messages)


@dataclass
class Bridge:
    client: Client
    log: BridgeLog
    received: Received


@asynccontextmanager
async def bridge(target: str, *options: str, mode: str = "legacy") -> AsyncIterator[Bridge]:
    """`toolhost mcp --target TARGET OPTIONS...` under the SDK's stdio client, logging at debug level."""
    received = Received()
    read_fd, write_fd = os.pipe()
    log = BridgeLog()
    parameters = StdioServerParameters(command=BRIDGE[0], args=[*BRIDGE[1:], "--target", target, "--log-level",
                                                                "debug", *options])
    with os.fdopen(write_fd, "w") as errlog:
        transport = stdio_client(parameters, errlog=errlog)
        client = Client(transport, mode=mode, cache=None, message_handler=received.add)  # type: ignore[arg-type]
        reading = asyncio.create_task(log.read(read_fd))
        try:
            async with client:
                errlog.close()  # the bridge holds its own copy: the pipe ends when the bridge does
                yield Bridge(client, log, received)
        finally:
            await reading


async def every_tool(client: Client) -> tuple[dict[str, types.Tool], int]:
    tools: dict[str, types.Tool] = {}
    cursor = None
    pages = 0
    while True:
        page = await client.list_tools(cursor=cursor)
        pages += 1
        tools.update((tool.name, tool) for tool in page.tools)
        if not page.next_cursor:
            return tools, pages
        cursor = page.next_cursor


async def grpc_suggestions(target: str, name: str, token: str | None = None) -> list[str]:
    """The close names the server suggests over gRPC to this token for a tool it does not see."""
    async with toolhost.AsyncClient(target, token=token, insecure_token_ok=True) as client:
        with pytest.raises(toolhost.NotFoundError) as raised:
            await client.call_tool(name, {})
    return [s for s in raised.value.metadata["suggestions"].split(",") if s]


@pytest.fixture
async def served(start_server, tmp_path):
    return await start_server(catalog_dirs=[write_test_tools(tmp_path / "catalog", generated=PAGE + 5)])


@dataclass
class Secured:
    """A server with the roles of helpers.auth, its catalog directory and the token files of each role."""

    server: Any
    catalog: Path
    tokens: Tokens
    agent_token_file: Path
    admin_token_file: Path

    async def reload(self) -> None:
        async with toolhost.AsyncClient(self.server.target, token=self.tokens.admin,
                                        insecure_token_ok=True) as admin:
            assert (await admin.reload()).success


@pytest.fixture
async def secured(start_server, tmp_path):
    tokens = Tokens.generate()
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text(auth_file_text(tokens))
    catalog = write_catalog(tmp_path / "catalog")
    files = []
    for role in ("agent", "admin"):
        files.append(tmp_path / f"{role}.token")
        files[-1].write_text(getattr(tokens, role) + "\n")
    server = await start_server(catalog_dirs=[catalog], auth_file=str(auth_file))
    return Secured(server, catalog, tokens, *files)


# --- tools/list and tools/call -----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ERAS)
async def test_tools_list_follows_the_servers_pages_with_titles_schemas_and_every_hint(served, mode):
    async with bridge(served.target, mode=mode) as b:
        tools, pages = await every_tool(b.client)
    assert pages == 2
    assert {f"gen_{i:03d}" for i in range(PAGE + 5)} <= tools.keys()
    assert set(TOOLS) <= tools.keys()
    record_tool = tools["record"]
    assert record_tool.title == "A Record"
    assert record_tool.input_schema["required"] == ["name"]
    assert record_tool.output_schema is not None and record_tool.output_schema["type"] == "object"
    hints = record_tool.annotations
    assert hints is not None
    assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint) == (
        True, False, True, False)


@pytest.mark.parametrize("mode", ERAS)
async def test_a_cursor_the_server_did_not_issue_is_invalid_params(served, mode):
    async with bridge(served.target, mode=mode) as b:
        with pytest.raises(MCPError) as raised:
            await b.client.list_tools(cursor="forged")
    assert raised.value.error.code == types.INVALID_PARAMS
    assert "list again from the first page" in raised.value.error.message


@pytest.mark.parametrize("mode", ERAS)
async def test_a_call_answers_with_its_text_and_structured_content(served, mode):
    async with bridge(served.target, mode=mode) as b:
        result = await b.client.call_tool("record", {"name": "ada"})
    assert not result.is_error
    assert result.structured_content == {"name": "ada", "length": 3}
    assert json.loads(result.content[0].text) == {"name": "ada", "length": 3}  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ERAS)
async def test_a_tool_that_failed_is_an_error_result_with_its_code_and_message(served, mode):
    async with bridge(served.target, mode=mode) as b:
        result = await b.client.call_tool("fails", {"message": "the disk is full"})
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith("TOOL_EXCEPTION: ")


@pytest.mark.parametrize("mode", ERAS)
async def test_arguments_that_fail_the_schema_are_an_error_result_listing_each_field(served, mode):
    async with bridge(served.target, mode=mode) as b:
        missing = await b.client.call_tool("record", {})
        wrong = await b.client.call_tool("record", {"name": 5})
    assert missing.is_error and wrong.is_error
    assert missing.content[0].text.splitlines() == [  # type: ignore[union-attr]
        "INVALID_ARGUMENTS: the arguments do not match the input schema of tool 'record' (tools/list shows it)",
        "/name: required argument is missing"]
    lines = wrong.content[0].text.splitlines()  # type: ignore[union-attr]
    assert lines[0].startswith("INVALID_ARGUMENTS: ") and lines[1].startswith("/name: ")


@pytest.mark.parametrize("mode", ERAS)
async def test_an_unknown_tool_is_invalid_params_suggesting_close_names(served, mode):
    async with bridge(served.target, mode=mode) as b:
        with pytest.raises(MCPError) as raised:
            await b.client.call_tool("recrod", {"name": "x"})
    assert raised.value.error.code == types.INVALID_PARAMS
    suggestions = await grpc_suggestions(served.target, "recrod")
    assert "record" in suggestions
    assert raised.value.error.message == unknown_tool_message("recrod", suggestions)


@pytest.mark.parametrize("mode", ERAS)
async def test_a_token_sees_and_calls_only_its_tools_and_a_hidden_tool_is_an_unknown_one(secured, mode):
    async with toolhost.AsyncClient(secured.server.target, token=secured.tokens.agent,
                                    insecure_token_ok=True) as agent:
        expected = {tool.name async for tool in agent.list_tools()}
    suggestions = await grpc_suggestions(secured.server.target, "secret_tool", secured.tokens.agent)
    assert "secret_tool" not in expected and "echo_one" in expected
    async with bridge(secured.server.target, "--token-file", str(secured.agent_token_file), mode=mode) as b:
        tools, _ = await every_tool(b.client)
        with pytest.raises(MCPError) as raised:
            await b.client.call_tool("secret_tool", {"name": "x"})
        greeted = await b.client.call_tool("echo_one", {"name": "ada"})
    assert set(tools) == expected
    assert raised.value.error.code == types.INVALID_PARAMS
    assert raised.value.error.message == unknown_tool_message("secret_tool", suggestions)
    assert not greeted.is_error and "ada" in greeted.content[0].text  # type: ignore[union-attr]


async def test_without_a_token_each_request_fails_saying_how_to_send_one(secured):
    async with bridge(secured.server.target) as b:
        with pytest.raises(MCPError) as raised:
            await b.client.list_tools()
    assert raised.value.error.code == types.INTERNAL_ERROR
    assert f"the toolhost server at {secured.server.target} refused" in raised.value.error.message
    assert "--token-file" in raised.value.error.message


async def test_the_bridge_speaks_tls_to_a_server_that_serves_it(start_server, tmp_path):
    ca = CertificateAuthority(tmp_path / "pki")
    pair = ca.issue_server("server")
    server = await start_server(catalog_dirs=[write_test_tools(tmp_path / "catalog")],
                                tls_cert_file=str(pair.certificate), tls_key_file=str(pair.key))
    async with bridge(server.target, "--tls-ca", str(ca.certificate)) as b:
        result = await b.client.call_tool("record", {"name": "tls"})
    assert result.structured_content == {"name": "tls", "length": 3}
    async with bridge(server.target) as plaintext:
        with pytest.raises(MCPError) as raised:
            await plaintext.client.list_tools()
    assert "--tls" in raised.value.error.message


# --- progress and cancellation -----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ERAS)
async def test_progress_reports_reach_the_host_while_the_tool_runs(served, mode):
    gate_name, gate = new_gate()
    reports: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append((progress, total, message))
        gate.release.set()  # the tool finishes only after its report arrived here

    async with bridge(served.target, mode=mode) as b:
        result = await b.client.call_tool("stepper", {"gate": gate_name}, progress_callback=on_progress)
    assert reports == [(1, 2, "half way")]
    assert result.content[0].text == "stepped"  # type: ignore[union-attr]


@pytest.mark.parametrize("with_progress", [False, True], ids=["CallTool", "StreamCallTool"])
@pytest.mark.parametrize("mode", ERAS)
async def test_cancelling_a_call_stops_the_tool_on_the_server(served, mode, with_progress):
    gate_name, gate = new_gate()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        pass

    async with bridge(served.target, mode=mode) as b:
        async with anyio.create_task_group() as calls:
            async def call() -> None:
                await b.client.call_tool("hang", {"gate": gate_name},
                                         progress_callback=on_progress if with_progress else None)

            calls.start_soon(call)
            async with asyncio.timeout(WAIT):
                await gate.started.wait()
            calls.cancel_scope.cancel()
        async with asyncio.timeout(WAIT):
            await gate.cancelled.wait()
        # The bridge goes on serving after a cancelled call.
        after = await b.client.call_tool("record", {"name": "after"})
    assert after.structured_content == {"name": "after", "length": 5}


# --- tools/list_changed ------------------------------------------------------------------------------------

ECHO_TWO = "name: echo_two\ndescription: Visible to the agent.\ncategory: testing\n" \
           "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:greet'}\n" \
           "parameters: [{name: name, type: string, required: true}]\n"
SECRET_TWO = ECHO_TWO.replace("echo_two", "secret_two").replace("Visible to", "Hidden from")
WATCHING = r"watching the tools visible to the bridge from generation \d+"


async def test_a_handshake_era_host_is_notified_when_a_tool_it_sees_is_added_and_not_for_a_hidden_one(secured):
    async with bridge(secured.server.target, "--token-file", str(secured.agent_token_file)) as b:
        await b.log.wait_for(WATCHING)  # the bridge watches the server's tools from here on
        write_tool(secured.catalog, "secret_two", SECRET_TWO)
        await secured.reload()
        write_tool(secured.catalog, "echo_two", ECHO_TWO)
        await secured.reload()
        await b.received.wait_for_list_changes(1)
        # What the bridge heard, in order: the hidden tool's reload would come before the visible one's.
        await b.log.wait_for(r"added \['echo_two'\]")
        assert "secret_two" not in b.log.text
        tools, _ = await every_tool(b.client)
    assert "echo_two" in tools and "secret_two" not in tools
    assert b.received.list_changes() == 1


async def test_a_sessionless_host_hears_of_a_tool_it_sees_on_its_listen_stream_and_not_of_a_hidden_one(secured):
    async with bridge(secured.server.target, "--token-file", str(secured.agent_token_file), mode="auto") as b:
        async with b.client.listen(tools_list_changed=True) as events:
            await b.log.wait_for(WATCHING)
            write_tool(secured.catalog, "secret_two", SECRET_TWO)
            await secured.reload()
            write_tool(secured.catalog, "echo_two", ECHO_TWO)
            await secured.reload()
            async with asyncio.timeout(WAIT):
                event = await anext(aiter(events))
            await b.log.wait_for(r"added \['echo_two'\]")
            assert "secret_two" not in b.log.text
        assert type(event).__name__ == "ToolsListChanged"
        assert b.received.list_changes() == 0


# --- an unreachable server ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ERAS)
async def test_while_the_server_is_unreachable_the_bridge_answers_each_request_with_an_error_naming_it(mode):
    with socket_nobody_listens_on() as target:
        async with bridge(target, mode=mode) as b:
            with pytest.raises(MCPError) as listed:
                await b.client.list_tools()
            with pytest.raises(MCPError) as called:
                await b.client.call_tool("record", {"name": "x"})
    for raised in (listed, called):
        assert raised.value.error.code == types.INTERNAL_ERROR
        assert f"cannot reach a toolhost server at {target}" in raised.value.error.message
        assert "--target" in raised.value.error.message


async def test_a_listen_stream_opened_while_the_server_is_unreachable_ends_with_the_error_naming_it():
    with socket_nobody_listens_on() as target, pytest.raises(BaseExceptionGroup) as raised:
        async with bridge(target, mode="auto") as b, b.client.listen(tools_list_changed=True) as events:
            await anext(aiter(events))
    # The SDK's client reports the lost subscription (from inside its task groups), caused by the server's error.
    matched, _ = raised.value.split(SubscriptionLost)
    assert matched is not None
    lost = next(iter(_leaves(matched)))
    assert isinstance(lost.__cause__, MCPError)
    assert lost.__cause__.error.code == types.INTERNAL_ERROR
    assert f"cannot reach a toolhost server at {target}" in lost.__cause__.error.message


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    return [leaf for e in group.exceptions
            for leaf in (_leaves(e) if isinstance(e, BaseExceptionGroup) else [e])]


class socket_nobody_listens_on:
    """A loopback address bound, so no other test takes it, but not listening: connections are refused."""

    def __enter__(self) -> str:
        import socket
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{self._socket.getsockname()[1]}"

    def __exit__(self, *_: object) -> None:
        self._socket.close()


# --- stdout carries JSON-RPC only --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ERAS)
async def test_a_tool_printing_to_stdout_during_a_call_leaves_every_message_parseable(served, mode):
    async with bridge(served.target, mode=mode) as b:
        first = await b.client.call_tool("noisy", {"text": "one"})
        tools, _ = await every_tool(b.client)
        second = await b.client.call_tool("noisy", {"text": "two"})
    assert [first.content[0].text, second.content[0].text] == ["quiet one", "quiet two"]  # type: ignore[union-attr]
    assert "noisy" in tools
    assert not [m for m in b.received.messages if isinstance(m, Exception)]


async def test_the_bridges_raw_stdout_is_json_rpc_lines_while_it_logs_at_debug_level_to_stderr(served):
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "noisy", "arguments": {"text": "raw"}, "_meta": {"progressToken": 7}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "nothing_by_this_name"}},
    ]
    process = await asyncio.create_subprocess_exec(
        *BRIDGE, "--target", served.target, "--log-level", "debug", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None
    lines: list[bytes] = []
    async with asyncio.timeout(WAIT):
        for message in messages:
            process.stdin.write(json.dumps(message).encode() + b"\n")
            await process.stdin.drain()
            if "id" not in message:
                continue
            # Each request's answer, and whatever the bridge sent before it.
            while True:
                line = await process.stdout.readline()
                assert line, "the bridge closed stdout before answering"
                lines.append(line)
                if json.loads(line).get("id") == message["id"]:
                    break
        process.stdin.close()
        rest, stderr = await process.communicate()
    lines += rest.splitlines(keepends=True)
    assert process.returncode == 0
    parsed = [json.loads(line) for line in lines]
    assert all(line.endswith(b"\n") for line in lines)
    assert all(message["jsonrpc"] == "2.0" for message in parsed)
    answers = {message["id"]: message for message in parsed if "id" in message}
    assert answers[3]["result"]["content"][0]["text"] == "quiet raw"
    assert answers[4]["error"]["code"] == types.INVALID_PARAMS
    assert len(answers[2]["result"]["tools"]) == PAGE and answers[2]["result"]["nextCursor"]
    # The debug log went to stderr, none of it to stdout.
    log = stderr.decode()
    assert re.search(WATCHING, log)
    assert '"level": "DEBUG"' in log
