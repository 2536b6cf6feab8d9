"""Hostile arguments from a client nobody here wrote (the official MCP TypeScript SDK's), over /mcp and over
`toolhost mcp`: what it sends is refused or delivered intact, and the connection goes on serving.

The tool echoes its argument back as structured output, so that any truncation, re-encoding or substitution
on the way (JSON-RPC, the bridge's gRPC, the pipeline, the audit record) shows in the answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from helpers.auth import Tokens, auth_file_text
from helpers.catalogs import write_tool
from helpers.mcp_http import serving_mcp
from helpers.mcp_typescript import TypeScriptMcpClient
from helpers.servers import RunningServer, ServerFactory

# Small, so that a body over it is cheap to send; the same limit binds /mcp bodies and gRPC messages.
MAX_MESSAGE_BYTES = 64 * 1024

ECHO_NAME = """
name: ts_echo_name
description: Returns its argument and its length.
runner: {type: python, entrypoint: "test_security_mcp_typescript:echo_name"}
output_schema: {type: object, properties: {name: {type: string}, length: {type: integer}}}
parameters: [{name: name, type: string, required: true}]
"""


def echo_name(name: str) -> dict[str, Any]:
    """Entrypoint test_security_mcp_typescript:echo_name."""
    return {"name": name, "length": len(name)}


@pytest.fixture
def tokens() -> Tokens:
    return Tokens.generate()


@pytest.fixture
async def server(start_server: ServerFactory, tmp_path: Path, tokens: Tokens) -> RunningServer:
    write_tool(tmp_path / "catalog", "ts_echo_name", ECHO_NAME)
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text(auth_file_text(tokens, agent_calls='["ts_*"]'))
    return await start_server(catalog_dirs=[tmp_path / "catalog"], auth_file=auth_file,
                              max_message_bytes=MAX_MESSAGE_BYTES)


@pytest.fixture(params=["http", "stdio"])
async def agent(request: pytest.FixtureRequest, server: RunningServer, tokens: Tokens,
                tmp_path: Path) -> AsyncIterator[TypeScriptMcpClient]:
    """The TypeScript client with the agent's token, connected over /mcp or over `toolhost mcp`."""
    if request.param == "http":
        async with serving_mcp(server) as mcp:
            client = await TypeScriptMcpClient.http(mcp.url, tokens.agent)
            try:
                await client.connect()
                yield client
            finally:
                await client.stop()
    else:
        token_file = tmp_path / "agent-token"
        token_file.write_text(tokens.agent)
        client = await TypeScriptMcpClient.toolhost_mcp(server.target, token_file)
        try:
            await client.connect()
            yield client
        finally:
            await client.stop()


async def still_serving(agent: TypeScriptMcpClient) -> None:
    result = await agent.result("call", name="ts_echo_name", arguments={"name": "after"})
    assert result["structuredContent"] == {"name": "after", "length": 5}, result


@pytest.mark.parametrize("value", [
    "a\x00b",                       # NUL: a C string would end here
    "\u202etxt.exe\u2066",          # bidirectional overrides
    "\x1b]52;c;ZXZpbA==\x07",       # a terminal's clipboard escape
    "\U0001f600\ufeff\ufffd",       # outside the BMP, a BOM, the replacement character
], ids=["nul", "bidi", "osc52", "astral-bom"])
async def test_odd_characters_in_arguments_arrive_unchanged(agent, value):
    result = await agent.result("call", name="ts_echo_name", arguments={"name": value})
    assert result["isError"] is False, result
    assert result["structuredContent"] == {"name": value, "length": len(value)}


async def test_arguments_over_the_message_limit_are_refused_and_the_connection_goes_on(agent):
    reply = await agent.reply(agent.send("call", name="ts_echo_name",
                                         arguments={"name": "x" * (MAX_MESSAGE_BYTES + 1)}))
    if agent.transport == "http":
        # /mcp refuses the body before the SDK parses it. (Whether the client still reads the explanation
        # depends on how much of the body it had sent when the server answered: not asserted.)
        error = agent.expect_error(reply)
        assert (error["type"], error["code"]) == ("StreamableHTTPError", 413), error
    else:
        # The bridge forwards it; the server's gRPC limit refuses it, and the host is told.
        result = agent.expect_result(reply)
        assert result["isError"] is True
        assert result["content"][0]["text"].startswith("RESOURCE_EXHAUSTED: "), result
        assert "raise max_message_bytes" in result["content"][0]["text"], result
    await still_serving(agent)


async def test_a_lone_surrogate_is_not_run_and_the_connection_goes_on(agent):
    # JSON.stringify writes "\ud800" as an escape: valid JSON syntax, but no Unicode string. The SDK's parser
    # refuses it: /mcp answers 400 with a JSON-RPC parse error; `toolhost mcp` drops the line, which carries
    # no id the answer could name, so the host waits for its own timeout (aborted here).
    bad = agent.send("call", name="ts_echo_name", arguments={"name": "\ud800"})
    await still_serving(agent)
    await agent.reply(agent.send("abort", call=bad))  # refused if the call was answered already
    reply = await agent.reply(bad)
    if agent.transport == "http":
        error = agent.expect_error(reply)
        assert (error["type"], error["code"]) == ("StreamableHTTPError", 400), error
        assert "-32700" in error["message"]
    else:
        assert not reply["ok"] or reply["result"]["isError"] is True, reply
