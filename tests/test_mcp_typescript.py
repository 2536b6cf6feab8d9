"""A client nobody here wrote: the official MCP TypeScript SDK's (@modelcontextprotocol/sdk, pinned in
tools/package.json), run by Node.js against /mcp (streamable HTTP with a bearer token) and against
`toolhost mcp --target` (stdio, the process a host starts), as an MCP host would use it.

The TypeScript SDK speaks only the handshake era (2025-11-25); the SDK's own Python client covers both eras
(test_mcp_http.py, test_mcp_stdio.py). tests/mcp_ts/driver.mjs reports what the SDK returned or threw; the
assertions are here.

What differs by transport, and why:
- list_changed is tested over stdio only. Stateless streamable HTTP has no channel for a message the server
  starts in the handshake era: that would need the standalone GET stream of a session, and /mcp keeps no
  sessions (so any worker or replica can answer). /mcp therefore answers GET with 405, which this client
  takes as "no stream offered", and does not advertise tools.listChanged, so a host re-lists on its own. The
  2026-07-28 era has subscriptions/listen for it, which this client does not speak.
- A 401 is an HTTP answer; over stdio the bridge's own token (--token-file) decides what the host sees.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import toolhost
from toolhost_server.mcp.local_backend import PAGE_SIZE
from toolhost_server.model import Parameter
from toolhost_server.tools.base import Tool, ToolContext, ToolRaisedFailure

from helpers.auth import Tokens, auth_file_text
from helpers.catalogs import write_tool
from helpers.held_calls import held_tool, new_hold
from helpers.mcp_http import serving_mcp
from helpers.mcp_typescript import TypeScriptMcpClient, node_program
from helpers.servers import RunningServer, ServerFactory
from helpers.waiting import within

HANDSHAKE_VERSION = "2025-11-25"
# More tools than one tools/list page holds, so that a host must follow nextCursor.
GENERATED = [f"ts_gen_{index:03d}" for index in range(PAGE_SIZE + 5)]
HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


def record(name: str) -> dict[str, Any]:
    """Entrypoint test_mcp_typescript:record: a structured output that its output schema describes."""
    return {"name": name, "length": len(name)}


def refuse() -> str:
    """Entrypoint test_mcp_typescript:refuse: a tool that fails with a code of its own."""
    raise ToolRaisedFailure("the service refused the request; try again later", "SERVICE_REFUSED")


@dataclass
class Stage:
    """A call of ReportsThenWaits: it reports progress 1 of 2, then returns once `release` is set."""

    release: asyncio.Event = field(default_factory=asyncio.Event)


STAGES: dict[str, Stage] = {}


class ReportsThenWaits(Tool):
    """Entrypoint test_mcp_typescript:ReportsThenWaits: one progress report, then waits for the test, so that the
    report is seen while the call is running."""

    name = "ts_progress"
    description = "Reports progress, then waits for the test."
    parameters = (Parameter("stage", "string", "The Stage's key in STAGES.", required=True),)

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> str:
        context.report_progress(1, 2, "halfway")
        await STAGES[arguments["stage"]].release.wait()
        return "released"


CATALOG = {
    "ts_record": """
name: ts_record
display_name: Name Record
description: A record about a name.
runner: {type: python, entrypoint: "test_mcp_typescript:record"}
output_schema:
  type: object
  properties: {name: {type: string}, length: {type: integer}}
  required: [name, length]
annotations: {read_only: true, idempotent: true}
parameters:
  - {name: name, type: string, required: true, max_length: 20}
""",
    "ts_refuse": """
name: ts_refuse
description: Always refused by its service.
runner: {type: python, entrypoint: "test_mcp_typescript:refuse"}
""",
    "ts_progress": """
name: ts_progress
description: Reports progress, then waits for the test.
runner: {type: python, entrypoint: "test_mcp_typescript:ReportsThenWaits"}
parameters: [{name: stage, type: string, required: true}]
""",
    "ts_held": held_tool("ts_held"),
    # Outside the agent's rights (its token calls ts_* only): hidden from it, so "unknown" to it.
    "secret_tool": "name: secret_tool\ndescription: Only for admins.\ncategory: testing\n"
                   "runner: {type: python, entrypoint: 'test_mcp_typescript:refuse'}\n",
}


@pytest.fixture
def tokens() -> Tokens:
    return Tokens.generate()


@pytest.fixture
async def server(start_server: ServerFactory, tmp_path: Path, tokens: Tokens) -> RunningServer:
    """A server whose auth file lets the agent token list and call ts_* only."""
    catalog = tmp_path / "catalog"
    for name, body in CATALOG.items():
        write_tool(catalog, name, body)
    for name in GENERATED:
        write_tool(catalog, name)
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text(auth_file_text(tokens, agent_calls='["ts_*"]'))
    return await start_server(catalog_dirs=[catalog], auth_file=auth_file)


async def stdio_client(server: RunningServer, token: str, tmp_path: Path) -> TypeScriptMcpClient:
    """The TypeScript client starting `toolhost mcp` for `server` with `token`."""
    token_file = tmp_path / f"token-{uuid.uuid4().hex}"
    token_file.write_text(token)
    return await TypeScriptMcpClient.toolhost_mcp(server.target, token_file)


@pytest.fixture(params=["http", "stdio"])
async def agent(request: pytest.FixtureRequest, server: RunningServer, tokens: Tokens,
                tmp_path: Path) -> AsyncIterator[TypeScriptMcpClient]:
    """The TypeScript client, connected with the agent's token over /mcp or over `toolhost mcp`."""
    if request.param == "http":
        async with serving_mcp(server) as mcp:
            client = await TypeScriptMcpClient.http(mcp.url, tokens.agent)
            try:
                await client.connect()
                yield client
            finally:
                await client.stop()
    else:
        client = await stdio_client(server, tokens.agent, tmp_path)
        try:
            await client.connect()
            yield client
        finally:
            await client.stop()


async def list_everything(client: TypeScriptMcpClient) -> list[dict[str, Any]]:
    """Every page of tools/list, following nextCursor as a host does; the pages."""
    pages = [await client.result("list")]
    while pages[-1].get("nextCursor"):
        pages.append(await client.result("list", cursor=pages[-1]["nextCursor"]))
    return pages


async def names_over_grpc(server: RunningServer, token: str) -> list[str]:
    """What ListTools shows the same token: the MCP listing must be this, no more and no less."""
    async with toolhost.AsyncClient(server.target, token=token, insecure_token_ok=True) as client:
        return [tool.name async for tool in client.list_tools()]


def text_of(result: Mapping[str, Any]) -> str:
    assert [item["type"] for item in result["content"]] == ["text"], result
    return str(result["content"][0]["text"])


# --- both transports -------------------------------------------------------------------------------------------


async def test_the_pinned_sdk_negotiates_the_handshake_era(agent):
    assert agent.connection["protocolVersion"] == HANDSHAKE_VERSION
    assert agent.connection["serverInfo"]["name"] == "toolhost"
    assert "tools" in agent.connection["capabilities"]


async def test_lists_every_page_of_the_tools_the_token_sees(agent, server, tokens):
    pages = await list_everything(agent)
    assert len(pages) >= 2, "the listing fit one page: the test no longer proves nextCursor is followed"
    listed = [tool["name"] for page in pages for tool in page["tools"]]
    assert listed == await names_over_grpc(server, tokens.agent)
    assert "secret_tool" not in listed
    assert set(GENERATED) | {"ts_record", "ts_refuse", "ts_progress", "ts_held"} <= set(listed)
    tools = {tool["name"]: tool for page in pages for tool in page["tools"]}
    described = tools["ts_record"]
    assert described["title"] == "Name Record"
    assert described["inputSchema"]["properties"]["name"]["type"] == "string"
    assert described["inputSchema"]["required"] == ["name"]
    assert described["outputSchema"]["required"] == ["name", "length"]
    # All four hints on the wire: MCP's defaults for absent ones are the unsafe ones.
    assert {hint: described["annotations"][hint] for hint in HINTS} == {
        "readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}
    assert all(isinstance(tool["annotations"][hint], bool) for tool in tools.values() for hint in HINTS)


async def test_a_cursor_the_server_did_not_issue_is_invalid_params(agent):
    error = await agent.error("list", cursor="not-a-cursor")
    assert (error["type"], error["code"]) == ("McpError", -32602), error
    assert "list again from the first page" in error["message"]


async def test_a_call_returns_text_and_structured_content_that_fits_the_output_schema(agent):
    # Listed first: the SDK then checks structuredContent against the tool's outputSchema itself.
    await list_everything(agent)
    result = await agent.result("call", name="ts_record", arguments={"name": "Ada"})
    assert result["isError"] is False
    assert result["structuredContent"] == {"name": "Ada", "length": 3}
    # The text is the same value as JSON, for hosts that show only text.
    assert json.loads(text_of(result)) == {"name": "Ada", "length": 3}


async def test_a_tool_that_failed_is_is_error_with_its_code_and_message(agent):
    result = await agent.result("call", name="ts_refuse", arguments={})
    assert result["isError"] is True
    assert text_of(result) == "SERVICE_REFUSED: the service refused the request; try again later"
    assert "structuredContent" not in result


async def test_arguments_that_fail_the_schema_are_is_error_naming_each_field(agent):
    result = await agent.result("call", name="ts_record", arguments={"name": "x" * 21, "extra": True})
    assert result["isError"] is True
    lines = text_of(result).splitlines()
    assert lines[0].startswith("INVALID_ARGUMENTS: "), lines
    violations = lines[1:]
    assert any(line.startswith("/name: ") for line in violations), violations
    assert any("extra" in line for line in violations), violations
    missing = await agent.result("call", name="ts_record", arguments={})
    assert missing["isError"] is True
    assert any("name" in line for line in text_of(missing).splitlines()[1:]), missing


async def test_a_hidden_tool_is_an_unknown_tool_in_the_same_words(agent):
    hidden = await agent.error("call", name="secret_tool", arguments={})
    unknown = await agent.error("call", name="secret_toox", arguments={})
    for error in (hidden, unknown):
        assert (error["type"], error["code"]) == ("McpError", -32602), error
    assert hidden["message"].replace("secret_tool", "NAME") == unknown["message"].replace("secret_toox", "NAME")
    assert "secret_tool" in hidden["message"]
    # The hidden tool's description and parameters are nowhere in the answer.
    assert "admins" not in str(hidden)


async def test_progress_reaches_onprogress_while_the_tool_runs(agent):
    key = uuid.uuid4().hex
    STAGES[key] = Stage()
    call = agent.send("call", name="ts_progress", arguments={"stage": key}, progress=True)
    event = await agent.event("progress")
    # The tool is still waiting for its release: this report came during the call, not with its result.
    assert event["call"] == call
    assert event["progress"]["progress"] == 1
    assert event["progress"]["total"] == 2
    assert event["progress"]["message"] == "halfway"
    STAGES[key].release.set()
    result = agent.expect_result(await agent.reply(call))
    assert (result["isError"], text_of(result)) == (False, "released")


@pytest.mark.parametrize("progress", [False, True], ids=["plain", "with-progress-token"])
async def test_aborting_a_call_stops_the_tool_on_the_server(agent, progress):
    # With a progress token the server streams the call (StreamCallTool behind the bridge), without one not.
    name, hold = new_hold()
    call = agent.send("call", name="ts_held", arguments={"hold": name}, progress=progress)
    await within(hold.started.wait(), "the held tool's start")
    await agent.result("abort", call=call, reason="the user pressed stop")
    # The SDK rejects the call at once with the abort's reason (as McpError RequestTimeout) and posts
    # notifications/cancelled; nothing else tells the server.
    error = agent.expect_error(await agent.reply(call))
    assert (error["type"], error["code"]) == ("McpError", -32001), error
    assert error["message"].endswith("the user pressed stop"), error
    # The client is still connected: only the cancellation it sent can have stopped the tool.
    await within(hold.stopped.wait(), "the held tool to stop after the client aborted its call")
    assert hold.cancelled
    result = await agent.result("call", name="ts_record", arguments={"name": "after"})
    assert result["structuredContent"] == {"name": "after", "length": 5}


# --- HTTP only -------------------------------------------------------------------------------------------------


async def test_over_http_the_session_is_stateless_and_list_changed_is_not_offered(server, tokens):
    async with serving_mcp(server) as mcp:
        client = await TypeScriptMcpClient.http(mcp.url, tokens.agent)
        try:
            connection = await client.result("connect")
        finally:
            await client.stop()
    assert connection["sessionId"] is None
    assert not connection["capabilities"]["tools"].get("listChanged")


@pytest.mark.parametrize("token", [None, "wrong-token"], ids=["no-token", "wrong-token"])
async def test_without_a_valid_token_connecting_fails_with_401(server, token):
    async with serving_mcp(server) as mcp:
        client = await TypeScriptMcpClient.http(mcp.url, token)
        try:
            error = await client.error("connect")
        finally:
            await client.stop()
    assert (error["type"], error["code"]) == ("StreamableHTTPError", 401), error
    if token is not None:
        assert token not in error["message"]


async def test_over_http_the_tools_a_token_sees_are_its_own(server, tokens):
    async with serving_mcp(server) as mcp:
        admin = await TypeScriptMcpClient.http(mcp.url, tokens.admin)
        try:
            await admin.result("connect")
            listed = [tool["name"] for page in await list_everything(admin) for tool in page["tools"]]
            refused = await admin.result("call", name="secret_tool", arguments={})
        finally:
            await admin.stop()
    assert "secret_tool" in listed
    assert listed == await names_over_grpc(server, tokens.admin)
    assert text_of(refused).startswith("SERVICE_REFUSED: ")


# --- stdio only ------------------------------------------------------------------------------------------------


async def test_over_stdio_a_reload_that_adds_a_visible_tool_sends_list_changed(server, tokens, tmp_path):
    client = await stdio_client(server, tokens.agent, tmp_path)
    try:
        connection = await client.result("connect")
        assert connection["capabilities"]["tools"].get("listChanged") is True
        before = [tool["name"] for page in await list_everything(client) for tool in page["tools"]]
        assert "ts_added" not in before
        write_tool(Path(server.toolhost.config.catalog_dirs[0]), "ts_added")
        async with toolhost.AsyncClient(server.target, token=tokens.admin, insecure_token_ok=True) as admin:
            await admin.reload()
        await client.event("tools_list_changed")
        after = [tool["name"] for page in await list_everything(client) for tool in page["tools"]]
        assert sorted(after) == sorted([*before, "ts_added"])
    finally:
        await client.stop()


def test_without_node_the_tests_fail_instead_of_skipping(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pytest.fail.Exception, match="node is not on PATH"):
        node_program()
