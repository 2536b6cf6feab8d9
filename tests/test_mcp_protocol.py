"""What tools/list and tools/call say over MCP, whatever the transport: the SDK's own client, connected in memory to
the one Server both transports serve (mcp/protocol_server.py), answered by a real server's registry and pipeline.

The transports have their own tests (test_mcp_http.py, test_mcp_stdio.py); these pin the mapping of toolhost's
tools and results to MCP's types in both protocol eras: the handshake era (2025-11-25, what most hosts speak)
and the sessionless one (2026-07-28).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.subscriptions import SubscriptionLost
from mcp.shared.exceptions import MCPError

from toolhost_server.auth import ANONYMOUS
from toolhost_server.mcp.backend import CallArguments, CallOutcome, ProgressReport, ToolPage
from toolhost_server.mcp.local_backend import PAGE_SIZE, LocalBackend
from toolhost_server.mcp.protocol_server import (
    CALL_ID_META_KEY,
    TRACE_ID_META_KEY,
    WRAPPED_RESULT_KEY,
    build_mcp_server,
)

from helpers.catalogs import write_tool
from helpers.otlp import otlp_receiver

ERAS = ["legacy", "auto"]  # the SDK client's modes: 2025-11-25 by initialize; 2026-07-28 by discovery


def numbers(count: int) -> list[int]:
    """A structured output that is a JSON array, not an object."""
    return list(range(count))


def record(name: str) -> dict[str, Any]:
    return {"name": name, "length": len(name)}


def silent_record() -> Any:
    from toolhost_server.tools.base import ToolOutput
    return ToolOutput(text="", structured={"quiet": True})


NUMBERS_TOOL = """
name: numbers
display_name: Number List
description: The numbers below count.
runner: {type: python, entrypoint: "test_mcp_protocol:numbers"}
output_schema: {type: array, items: {type: integer}}
annotations: {read_only: true, idempotent: true}
parameters: [{name: count, type: integer, required: true, minimum: 0}]
"""

RECORD_TOOL = """
name: record
description: A record about a name.
runner: {type: python, entrypoint: "test_mcp_protocol:record"}
output_schema:
  type: object
  properties: {name: {type: string}, length: {type: integer}}
annotations: {destructive: true, open_world: true}
parameters: [{name: name, type: string, required: true}]
"""

SILENT_TOOL = """
name: silent
description: Structured output and no text.
runner: {type: python, entrypoint: "test_mcp_protocol:silent_record"}
"""


@pytest.fixture
async def served(start_server, tmp_path):
    write_tool(tmp_path, "numbers", NUMBERS_TOOL)
    write_tool(tmp_path, "record", RECORD_TOOL)
    write_tool(tmp_path, "silent", SILENT_TOOL)
    for index in range(PAGE_SIZE + 5):
        write_tool(tmp_path, f"gen_{index:03d}", f"name: gen_{index:03d}\ndescription: Generated.\n"
                   "runner: {type: python, entrypoint: 'test_mcp_protocol:numbers'}\n"
                   "parameters: [{name: count, type: integer, required: true}]\n")
    server = await start_server(catalog_dirs=[tmp_path])
    return build_mcp_server(lambda ctx: LocalBackend(server.toolhost, ANONYMOUS), version="test")


async def every_tool(client: Client) -> tuple[dict[str, types.Tool], int]:
    """Every tool by name, following the cursors, and how many pages that took."""
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


@pytest.mark.parametrize("mode", ERAS)
async def test_tools_list_pages_through_every_tool_with_title_and_all_four_hints(served, mode):
    async with Client(served, mode=mode) as client:
        tools, pages = await every_tool(client)
    assert pages == 2
    assert {f"gen_{i:03d}" for i in range(PAGE_SIZE + 5)} <= tools.keys()
    numbers_tool = tools["numbers"]
    assert numbers_tool.title == "Number List"
    assert numbers_tool.input_schema["required"] == ["count"]
    hints = numbers_tool.annotations
    assert hints is not None
    # Every hint is sent, false ones too: an absent destructive or open-world hint means true in MCP.
    assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint) == (
        True, False, True, False)
    wire = numbers_tool.model_dump(by_alias=True, exclude_none=True)["annotations"]
    assert set(wire) >= {"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}
    record_hints = tools["record"].annotations
    assert record_hints is not None
    assert (record_hints.destructive_hint, record_hints.open_world_hint, record_hints.read_only_hint) == (
        True, True, False)
    assert tools["record"].output_schema == {"type": "object",
                                             "properties": {"name": {"type": "string"},
                                                            "length": {"type": "integer"}}}


async def test_an_output_schema_that_is_not_an_object_is_only_offered_to_the_sessionless_era(served):
    async with Client(served, mode="legacy") as client:
        legacy, _ = await every_tool(client)
    async with Client(served) as client:
        modern, _ = await every_tool(client)
    assert legacy["numbers"].output_schema is None
    assert modern["numbers"].output_schema == {"type": "array", "items": {"type": "integer"}}


async def test_a_structured_array_is_wrapped_for_the_handshake_era_and_sent_as_is_after(served):
    async with Client(served, mode="legacy") as client:
        legacy = await client.call_tool("numbers", {"count": 3})
    async with Client(served) as client:
        modern = await client.call_tool("numbers", {"count": 3})
    assert legacy.structured_content == {WRAPPED_RESULT_KEY: [0, 1, 2]}
    assert modern.structured_content == [0, 1, 2]
    for result in (legacy, modern):
        assert not result.is_error
        assert json.loads(result.content[0].text) == [0, 1, 2]  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ERAS)
async def test_structured_output_without_text_is_also_sent_as_its_json_text(served, mode):
    async with Client(served, mode=mode) as client:
        result = await client.call_tool("silent", {})
    assert result.structured_content == {"quiet": True}
    assert result.content[0].text == '{"quiet":true}'  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ERAS)
async def test_a_call_with_no_arguments_is_checked_as_an_empty_object(served, mode):
    async with Client(served, mode=mode) as client:
        result = await client.call_tool("record")
    assert result.is_error
    assert result.content[0].text.splitlines() == [  # type: ignore[union-attr]
        "INVALID_ARGUMENTS: the arguments do not match the input schema of tool 'record' (tools/list shows it)",
        "/name: required argument is missing"]


@pytest.mark.parametrize("mode", ERAS)
async def test_a_cursor_the_server_did_not_issue_is_invalid_params(served, mode):
    async with Client(served, mode=mode) as client:
        with pytest.raises(MCPError) as raised:
            await client.list_tools(cursor="forged")
    assert raised.value.error.code == types.INVALID_PARAMS
    # MCP's word once, and how to recover: not gRPC's page_token.
    message = raised.value.error.message
    assert message.count("cursor") == 1 and "page_token" not in message
    assert "list again from the first page" in message


class FailingBackend:
    """A backend whose every answer fails with a text the caller must not see."""

    async def list_tools(self, cursor: str) -> ToolPage:
        raise RuntimeError(f"listing broke at {HIDDEN_DETAIL}")

    async def call(self, request: CallArguments, progress: ProgressReport | None) -> CallOutcome:
        raise RuntimeError(f"call broke at {HIDDEN_DETAIL}")

    async def tool_changes(self) -> AsyncIterator[None]:
        raise RuntimeError(f"watch broke at {HIDDEN_DETAIL}")
        yield


HIDDEN_DETAIL = "/srv/secret/internal-path"


@pytest.mark.parametrize("mode", ERAS)
async def test_a_failure_inside_the_server_is_masked_on_every_method_and_logged(mode, caplog):
    """The handshake era would send an unexpected exception's text to the client: every handler masks it."""
    server = build_mcp_server(lambda ctx: FailingBackend(), version="test")
    errors = []
    async with Client(server, mode=mode) as client:
        for attempt in (client.list_tools(), client.call_tool("anything", {})):
            with pytest.raises(MCPError) as raised:
                await attempt
            errors.append(raised.value.error)
        if mode != "legacy":  # subscriptions/listen is the sessionless era's; it fails after the acknowledgement
            with pytest.raises(SubscriptionLost) as lost:
                async with client.listen(tools_list_changed=True) as stream:
                    async for _ in stream:
                        pass
            assert isinstance(lost.value.__cause__, MCPError)
            errors.append(lost.value.__cause__.error)
    assert len(errors) == (2 if mode == "legacy" else 3)
    for error in errors:
        assert error.code == types.INTERNAL_ERROR and HIDDEN_DETAIL not in error.message
        assert "the server's log has the details" in error.message
    logged = [record for record in caplog.records if record.exc_info and HIDDEN_DETAIL in str(record.exc_info[1])]
    assert len(logged) == len(errors)


def traceparent(trace_id: str, span_id: str) -> str:
    return f"00-{trace_id}-{span_id}-01"


@pytest.mark.parametrize("mode", ERAS)
async def test_a_result_names_its_call_and_the_callers_trace_when_tracing_is_off(served, mode, monkeypatch):
    trace_id = secrets.token_hex(16)
    async with Client(served, mode=mode) as client:
        result = await client.call_tool("record", {"name": "x"},
                                        meta={"traceparent": traceparent(trace_id, secrets.token_hex(8))})
        other = await client.call_tool("record", {"name": "y"})
    assert result.meta is not None and other.meta is not None
    assert result.meta[TRACE_ID_META_KEY] == trace_id
    assert len(result.meta[CALL_ID_META_KEY]) == 32
    assert other.meta[TRACE_ID_META_KEY] != trace_id
    assert other.meta[CALL_ID_META_KEY] != result.meta[CALL_ID_META_KEY]


async def test_with_tracing_on_the_callers_traceparent_parents_the_calls_span(start_server, monkeypatch):
    for variable in ("OTEL_TRACES_EXPORTER", "OTEL_TRACES_SAMPLER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                     "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(variable, raising=False)
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    async with otlp_receiver() as (collector, endpoint):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        server = await start_server()
        mcp_server = build_mcp_server(lambda ctx: LocalBackend(server.toolhost, ANONYMOUS), version="test")
        async with Client(mcp_server, mode="legacy") as client:
            result = await client.call_tool("echo", {"text": "a"}, meta={"traceparent": traceparent(trace_id, span_id)})
        assert result.meta is not None and result.meta[TRACE_ID_META_KEY] == trace_id
        spans = await collector.trace(trace_id, 1)
    assert [(s.name, s.parent_id) for s in spans] == [("execute_tool echo", span_id)]
