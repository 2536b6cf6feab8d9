"""Every call has a W3C trace id, with tracing off too: in its response, its audit record and its log lines, the
caller's when it sent a `traceparent`, and the same one on the far side of a remote hop. Tracing off makes no span
objects for it. (With tracing on the ids are the spans': tests/test_tracing.py.)"""

from __future__ import annotations

import json
import logging
import re
import secrets
from collections.abc import Iterator

import grpc
import pytest
from google.protobuf import json_format
from opentelemetry import trace

import toolhost
from toolhost.v1 import tool_service_pb2
from toolhost_server.telemetry import UntracedCall, current_trace_ids

from helpers.calls import call
from helpers.catalogs import remote_tool, write_tool
from helpers.servers import RunningServer

# The process's log ring outlives each test: every test queries by trace ids of its own.
CALLER_TRACE_ID = secrets.token_hex(16)
CALLER_SPAN_ID = "00f067aa0ba902b7"
TRACE_ID = re.compile(r"[0-9a-f]{32}")


@pytest.fixture(autouse=True)
def tracing_off_and_info_logging(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    for variable in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER"):
        monkeypatch.delenv(variable, raising=False)
    caplog.set_level(logging.INFO)  # the audit lines are INFO records
    yield


def traceparent(trace_id: str = CALLER_TRACE_ID, span_id: str = CALLER_SPAN_ID, flags: str = "01") -> str:
    return f"00-{trace_id}-{span_id}-{flags}"


def trace_ids_seen_by_the_tool() -> dict[str, object]:
    """A tool's view from inside a call: the log lines' ids, and whether any span is current."""
    trace_id, span_id = current_trace_ids()
    logging.getLogger("toolhost.test.trace").warning("inside the call")
    return {"trace_id": trace_id, "span_id": span_id, "span": trace.get_current_span() is not trace.INVALID_SPAN}


async def audit_and_lines(server: RunningServer, trace_id: str) -> list[toolhost.LogEntry]:
    async with toolhost.AsyncClient(server.target, timeout=30) as client:
        return [entry async for entry in client.query_logs(trace_id=trace_id, source="memory")]


async def test_without_a_traceparent_each_call_gets_a_new_random_trace_id_in_response_audit_and_logs(
        start_server, tmp_path):
    write_tool(tmp_path, "inside", "name: inside\ndescription: Reports its trace ids.\n"
               "runner: {type: python, entrypoint: 'test_trace_ids:trace_ids_seen_by_the_tool'}\n")
    server = await start_server(catalog_dirs=[tmp_path])
    assert not server.toolhost.tracing.enabled

    first = await call(server, "inside")
    second = await call(server, "echo", text="x")
    assert first.success and second.success
    for response in (first, second):
        assert TRACE_ID.fullmatch(response.trace_id) and response.trace_id != "0" * 32, response.trace_id
    assert first.trace_id != second.trace_id

    # Inside the call, log lines carry the trace id (no span id: no span exists), and no span was made.
    inside = json_format.MessageToDict(first.structured_output)
    assert inside == {"trace_id": first.trace_id, "span_id": "", "span": False}

    entries = await audit_and_lines(server, first.trace_id)
    audit = [entry for entry in entries if "audit" in entry.fields]
    assert [(a.fields["audit"]["call_id"], a.fields["audit"]["trace_id"]) for a in audit] == [
        (first.call_id, first.trace_id)]
    assert any(entry.message == "inside the call" for entry in entries)
    # Outside a call, lines carry no trace id.
    assert current_trace_ids() == ("", "")


async def test_the_callers_traceparent_names_the_trace_in_unary_and_streamed_calls(start_server):
    server = await start_server()
    trace_id = secrets.token_hex(16)
    metadata = (("traceparent", traceparent(trace_id)),)
    response = await call(server, "echo", text="x", metadata=metadata)
    assert response.success and response.trace_id == trace_id
    streamed = [event async for event in server.stub.StreamCallTool(
        tool_service_pb2.StreamCallToolRequest(name="echo", arguments_json='{"text": "y"}'), metadata=metadata)]
    assert streamed[-1].result.trace_id == trace_id
    audit = [entry.fields["audit"] for entry in await audit_and_lines(server, trace_id)
             if "audit" in entry.fields]
    assert sorted(record["call_id"] for record in audit) == sorted([response.call_id, streamed[-1].result.call_id])

    # A refused call has its trace id in the audit record too.
    refused_trace_id = secrets.token_hex(16)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call(server, "no_such_tool", metadata=(("traceparent", traceparent(trace_id=refused_trace_id)),))
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    audit = [entry.fields["audit"] for entry in await audit_and_lines(server, refused_trace_id)
             if "audit" in entry.fields]
    assert [(record["tool"], record["outcome"]) for record in audit] == [("no_such_tool", "TOOL_NOT_FOUND")]


@pytest.mark.parametrize("header", [
    "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # all-zero trace id
    f"00-{CALLER_TRACE_ID}-0000000000000000-01",                 # all-zero parent id
    f"ff-{CALLER_TRACE_ID}-{CALLER_SPAN_ID}-01",                 # the forbidden version
    f"00-{CALLER_TRACE_ID}-{CALLER_SPAN_ID}-01-extra",           # version 00 has exactly four fields
    f"00-{CALLER_TRACE_ID.upper()}-{CALLER_SPAN_ID}-01",         # upper case
    f"00-{CALLER_TRACE_ID[:-1]}-{CALLER_SPAN_ID}-01",            # too short
    "garbage",
])
async def test_a_malformed_traceparent_starts_a_new_trace(start_server, header):
    server = await start_server()
    response = await call(server, "echo", text="x", metadata=(("traceparent", header),))
    assert response.success and TRACE_ID.fullmatch(response.trace_id)
    assert response.trace_id != CALLER_TRACE_ID and response.trace_id != "0" * 32


async def test_a_forwarded_call_carries_the_same_trace_id_on_both_toolhosts(start_server, tmp_path):
    worker_dir, front_dir = tmp_path / "worker", tmp_path / "front"
    write_tool(worker_dir, "inside", "name: inside\ndescription: Reports its trace ids.\n"
               "runner: {type: python, entrypoint: 'test_trace_ids:trace_ids_seen_by_the_tool'}\n")
    worker = await start_server(catalog_dirs=[worker_dir])
    write_tool(front_dir, "remote_inside", remote_tool("remote_inside", worker.target, "inside"))
    front = await start_server(catalog_dirs=[front_dir])

    caller_trace_id = secrets.token_hex(16)
    for metadata in ((), (("traceparent", traceparent(caller_trace_id)),)):
        response = await call(front, "remote_inside", metadata=metadata)
        assert response.success, response.error
        if metadata:
            assert response.trace_id == caller_trace_id
        # The worker ran the tool in the same trace, and both audit records say so (the two servers of this
        # test share the process's log ring: each one's record is there once).
        assert json.loads(response.output)["trace_id"] == response.trace_id
        audit = [entry.fields["audit"] for entry in await audit_and_lines(worker, response.trace_id)
                 if "audit" in entry.fields]
        assert sorted(record["tool"] for record in audit) == ["inside", "remote_inside"]


def test_the_forwarded_traceparent_has_the_trace_a_new_span_id_and_the_callers_sampled_flag():
    for flags, sampled in (("01", True), ("00", False), ("03", True)):
        call = UntracedCall.from_headers({"traceparent": traceparent(flags=flags), "tracestate": "vendor=1"})
        assert (call.trace_id, call.sampled) == (CALLER_TRACE_ID, sampled)
        headers = call.forward_headers()
        version, trace_id, span_id, forwarded_flags = headers["traceparent"].split("-")
        assert (version, trace_id, forwarded_flags) == ("00", CALLER_TRACE_ID, "01" if sampled else "00")
        assert re.fullmatch(r"[0-9a-f]{16}", span_id) and span_id not in (CALLER_SPAN_ID, "0" * 16)
        assert headers["tracestate"] == "vendor=1"
        assert call.forward_headers()["traceparent"] != headers["traceparent"]  # a new span id each time
    # A trace this server started is not sampled (nothing records it) and has no state to pass on.
    started = UntracedCall.from_headers({})
    assert started.forward_headers().keys() == {"traceparent"}
    assert started.forward_headers()["traceparent"].endswith("-00")
