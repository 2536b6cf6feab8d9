"""Security review findings on a request's own text (issue 16: items 2, 3, 11, 15 and 17), against a real server.

What a caller sends as a tool name, call id or argument key is written to log lines, audit rows, spans and
metrics: a control character there forges log lines or (a NUL) makes PostgreSQL refuse a whole batch, a lone
surrogate breaks every later reader of the record, and unbounded nesting exhausted the decoder's recursion.
Each is refused with INVALID_ARGUMENT before any of that, and nothing of it reaches the records.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import uuid
from collections.abc import Iterator

import grpc
import pytest
from google.protobuf import json_format
from prometheus_client import generate_latest

import toolhost
from toolhost.v1 import log_service_pb2, log_service_pb2_grpc, tool_service_pb2

from helpers.catalogs import write_tool
from helpers.servers import RunningServer

OPEN_TOOL = ("name: open_args\ndescription: Takes any arguments.\n"
             "runner: {type: python, entrypoint: 'test_security_request_input:accept'}\ninput_schema: {type: object}\n")


def accept(**arguments: object) -> dict[str, object]:
    """What the tool was given: its argument keys, and the script argument when there is one."""
    return {"keys": sorted(arguments), "script": arguments.get("script")}


@pytest.fixture(autouse=True)
def info_logging(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.INFO)  # the audit lines are INFO records in the memory ring
    yield


@pytest.fixture
async def server(start_server, tmp_path) -> RunningServer:
    write_tool(tmp_path, "open_args", OPEN_TOOL)
    return await start_server(catalog_dirs=[tmp_path])


async def refused(server: RunningServer, request: tool_service_pb2.CallToolRequest) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await server.stub.CallTool(request)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    return caught.value


async def all_log_records(server: RunningServer) -> list[toolhost.LogEntry]:
    """Every record of the memory ring, through QueryLogs: it must answer, whatever the ring holds."""
    async with toolhost.AsyncClient(server.target, timeout=30) as client:
        return [entry async for entry in client.query_logs(source="memory", page_size=1000)]


def audit_records(entries: list[toolhost.LogEntry], **matching: str) -> list[dict[str, object]]:
    """The audit records among `entries` whose fields have the given values (the ring is the process's, shared by
    every test: each test finds its own call by a value of its own)."""
    return [entry.fields["audit"] for entry in entries if "audit" in entry.fields
            and all(entry.fields["audit"].get(key) == value for key, value in matching.items())]


# (A lone surrogate cannot reach a name: protobuf strings are UTF-8, which has none. JSON text can carry one.)
@pytest.mark.parametrize(("name", "recorded"), [
    ("echo\x00", "echo\\u0000"), ("ec\nho", "ec\\u000aho"), ("echo\u2028", "echo\\u2028"), ("echo\x85", "echo\\u0085")])
async def test_a_tool_name_with_a_control_character_is_refused_and_recorded_escaped(server, name, recorded):
    call_id = f"name-{uuid.uuid4().hex}"
    error = await refused(server, tool_service_pb2.CallToolRequest(
        name=name, arguments_json='{"text": "x"}', call_id=call_id))
    assert "a tool name is printable text" in error.details()
    # The refusal is recorded, with the name escaped: no control character reaches a log line or a row.
    [record] = audit_records(await all_log_records(server), call_id=call_id)
    assert (record["outcome"], record["tool"]) == ("INVALID_REQUEST", recorded)


@pytest.mark.parametrize("call_id", ["a\x00b", "line\nforged", "x" * 129, "spaces are out", "ü"])
async def test_a_call_id_outside_the_allowed_form_is_refused_and_recorded_under_a_new_one(server, call_id):
    trace_id = uuid.uuid4().hex
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await server.stub.CallTool(tool_service_pb2.CallToolRequest(
            name="echo", arguments_json='{"text": "x"}', call_id=call_id),
            metadata=(("traceparent", f"00-{trace_id}-00f067aa0ba902b7-01"),))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "call_id must be at most 128 characters" in (caught.value.details() or "")
    [record] = audit_records(await all_log_records(server), trace_id=trace_id)
    assert record["outcome"] == "INVALID_REQUEST"
    assert record["call_id"] != call_id and re.fullmatch(r"[0-9a-f]{32}", str(record["call_id"]))


async def test_a_call_id_in_the_allowed_form_is_kept(server):
    call_id = "Agent-7.step_3:" + "x" * 113
    response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(
        name="echo", arguments_json='{"text": "x"}', call_id=call_id))
    assert response.success and response.call_id == call_id and len(call_id) == 128


@pytest.mark.parametrize(("arguments_json", "why"), [
    ('{"\\u0000": 1}', "a control character (U+0000)"), ('{"a\\nb": 1}', "a control character (U+000A)"),
    ('{"\\udc80": 1}', "a lone UTF-16 surrogate (U+DC80)"),
    ('{"outer": {"in\\u001bner": 1}}', "a control character (U+001B)"),
    ('{"text": "\\ud800"}', "the argument /text holds a lone UTF-16 surrogate"),
    ('{"list": ["fine", "\\udfff"]}', "the argument /list/1 holds a lone UTF-16 surrogate"),
])
async def test_control_characters_in_keys_and_lone_surrogates_anywhere_are_refused_and_logs_stay_readable(
        server, arguments_json, why):
    call_id = f"keys-{uuid.uuid4().hex}"
    error = await refused(server, tool_service_pb2.CallToolRequest(
        name="open_args", arguments_json=arguments_json, call_id=call_id))
    assert why in (error.details() or "")
    # QueryLogs, TailLogs and log_inspector read the ring afterwards (a lone surrogate there made them INTERNAL),
    # the refusal's own record among what they read.
    [record] = audit_records(await all_log_records(server), call_id=call_id)
    assert record["outcome"] == "INVALID_REQUEST"
    stub = log_service_pb2_grpc.LogServiceStub(server.channel)
    tail = stub.TailLogs(log_service_pb2.TailLogsRequest(backlog=50))
    assert (await anext(aiter(tail))).record.message
    tail.cancel()
    inspector = await server.stub.CallTool(tool_service_pb2.CallToolRequest(
        name="log_inspector", arguments_json='{"limit": 1000}'))
    assert inspector.success, inspector.error


async def test_control_characters_in_string_values_are_arguments_like_any_other(server):
    response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(
        name="open_args", arguments_json=json.dumps({"script": "line one\nline two\ttab"})))
    assert response.success
    assert json_format.MessageToDict(response.structured_output)["script"] == "line one\nline two\ttab"


def nested(depth: int) -> dict[str, object]:
    value: dict[str, object] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


async def test_arguments_nested_up_to_the_limit_run_and_deeper_are_refused_naming_it(server):
    response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(
        name="open_args", arguments_json=json.dumps(nested(64))))
    assert response.success, response.error
    error = await refused(server, tool_service_pb2.CallToolRequest(
        name="open_args", arguments_json=json.dumps(nested(65))))
    assert "nested more than 64 levels" in error.details()
    # Deep enough to exhaust the JSON decoder's recursion: still a clear refusal, never INTERNAL.
    error = await refused(server, tool_service_pb2.CallToolRequest(
        name="open_args", arguments_json="[" * 100_000 + "]" * 100_000))
    assert "nested more than 64 levels" in error.details()


def varint(number: int) -> bytes:
    out = bytearray()
    while True:
        out.append((number & 0x7F) | (0x80 if number > 0x7F else 0))
        number >>= 7
        if not number:
            return bytes(out)


def deep_struct_request(depth: int) -> bytes:
    """A CallToolRequest whose `arguments` Struct nests `depth` levels, encoded by hand: the Python protobuf
    runtime refuses to build one deeper than its limit, but any other client can send these bytes."""
    struct = b""
    for _ in range(depth):
        value = b"\x2a" + varint(len(struct)) + struct            # Value.struct_value (5)
        entry = b"\x0a\x01a\x12" + varint(len(value)) + value       # map entry: key "a", value
        struct = b"\x0a" + varint(len(entry)) + entry             # Struct.fields (1)
    return b"\x0a\x09open_args\x12" + varint(len(struct)) + struct  # name (1), arguments (2)


async def test_struct_arguments_nested_beyond_what_protobuf_decodes_are_invalid_not_internal(server):
    call = server.channel.unary_unary("/toolhost.v1.ToolService/CallTool")
    shallow = tool_service_pb2.CallToolResponse.FromString(await call(deep_struct_request(10)))
    assert shallow.success, shallow.error
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(deep_struct_request(200))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "Messages may nest at most 100 levels" in caught.value.details()


def deep_output() -> dict[str, object]:
    return nested(40)


def not_a_number() -> dict[str, float]:
    return {"ratio": float("nan")}


@pytest.mark.parametrize(("entrypoint", "why"), [
    ("deep_output", "nested more than 32 levels"), ("not_a_number", "NaN or an infinity")])
async def test_structured_output_a_response_cannot_carry_is_invalid_output_not_internal(
        start_server, tmp_path, entrypoint, why):
    write_tool(tmp_path, "odd", f"name: odd\ndescription: Returns an odd value.\n"
               f"runner: {{type: python, entrypoint: 'test_security_request_input:{entrypoint}'}}\n")
    server = await start_server(catalog_dirs=[tmp_path])
    response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(name="odd"))
    assert not response.success and response.error.code == "INVALID_OUTPUT"
    assert why in response.error.message


async def test_a_forged_deeply_nested_page_token_is_invalid_not_internal(server):
    token = base64.urlsafe_b64encode(b"[" * 100_000 + b"]" * 100_000).decode().rstrip("=")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await server.stub.ListTools(tool_service_pb2.ListToolsRequest(page_token=token))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    stub = log_service_pb2_grpc.LogServiceStub(server.channel)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.QueryLogs(log_service_pb2.QueryLogsRequest(page_token=token))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def raise_with_code(code: str) -> str:
    from toolhost_server.tools.base import ToolRaisedFailure

    raise ToolRaisedFailure("the tool chose this code", code)


@pytest.mark.parametrize("code", ["sk_live_51Hsecretvalue", "lower", "WITH SPACE", "A" * 65, ""])
async def test_a_failure_code_a_tool_raises_that_is_no_identifier_becomes_tool_exception(start_server, tmp_path, code):
    write_tool(tmp_path, "coded", "name: coded\ndescription: Fails with a code of its choosing.\n"
               "runner: {type: python, entrypoint: 'test_security_request_input:raise_with_code'}\n"
               "parameters: [{name: code, type: string}]\n")
    server = await start_server(catalog_dirs=[tmp_path])
    response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(
        name="coded", arguments_json=json.dumps({"code": code})))
    assert not response.success and response.error.code == "TOOL_EXCEPTION"
    assert response.error.message == "the tool chose this code"
    exposition = generate_latest(server.toolhost.metrics.registry).decode()
    assert 'outcome="TOOL_EXCEPTION"' in exposition
    if code:
        assert code not in exposition
    kept = await server.stub.CallTool(tool_service_pb2.CallToolRequest(
        name="coded", arguments_json=json.dumps({"code": "QUOTA_EXCEEDED"})))
    assert kept.error.code == "QUOTA_EXCEEDED"
