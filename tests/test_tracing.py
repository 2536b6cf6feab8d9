"""Tracing: spans of real calls, exported over OTLP/gRPC to a receiver started here, redacted on the way.

The servers under test read the OTEL_* variables the `receiver` fixture sets, as a deployed server would.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, StatusCode

from toolhost.v1 import tool_service_pb2
from toolhost_server.sanitize import LearningRedactor, Redactor
from toolhost_server.telemetry import RedactingSpanExporter, Tracing, TracingConfigError

from helpers.catalogs import write_tool
from helpers.otlp import ExportedSpan, otlp_receiver
from helpers.servers import ServerProcess

CLIENT_TRACE_ID = secrets.token_hex(16)
CLIENT_SPAN_ID = secrets.token_hex(8)
TRACEPARENT = f"00-{CLIENT_TRACE_ID}-{CLIENT_SPAN_ID}-01"
# Argument values and outputs that must appear in no span.
ARGUMENT_VALUE = "argument-value-" + secrets.token_hex(6)


@pytest.fixture
async def receiver(monkeypatch):
    for variable in ("OTEL_TRACES_EXPORTER", "OTEL_TRACES_SAMPLER", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
                     "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(variable, raising=False)
    async with otlp_receiver() as (collector, endpoint):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # export within 50 ms rather than 5 s
        yield collector


def one(spans: list[ExportedSpan], name: str) -> ExportedSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, (name, [s.name for s in spans])
    return found[0]


def process_tool(directory, name: str, argv: list[str]) -> None:
    write_tool(directory, name, f"name: {name}\ndescription: Runs {argv[0]}.\n"
               f"runner: {json.dumps({'type': 'process', 'argv': argv})}\n"
               "parameters: [{name: text, type: string}]\n")


async def test_a_call_is_a_server_span_with_an_execute_tool_child(receiver, start_server, caplog):
    server = await start_server()
    with caplog.at_level(logging.INFO, logger="toolhost.audit"):
        response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(
            name="echo", arguments_json=json.dumps({"text": ARGUMENT_VALUE}), call_id="call-1"))
    assert response.success and response.output == ARGUMENT_VALUE
    assert len(response.trace_id) == 32 and int(response.trace_id, 16)

    spans = await receiver.trace(response.trace_id, 2)
    rpc = one(spans, "toolhost.v1.ToolService/CallTool")
    assert rpc.kind == Span.SPAN_KIND_SERVER and rpc.parent_id == "" and rpc.service == "toolhost"
    assert rpc.attributes == {"rpc.system": "grpc", "rpc.service": "toolhost.v1.ToolService", "rpc.method": "CallTool",
                              "rpc.grpc.status_code": 0}
    tool = one(spans, "execute_tool echo")
    assert tool.kind == Span.SPAN_KIND_INTERNAL and tool.parent_id == rpc.span_id
    assert tool.status_code == Status.STATUS_CODE_UNSET
    attributes = tool.attributes
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["gen_ai.tool.name"] == "echo" and attributes["gen_ai.tool.type"] == "function"
    assert attributes["gen_ai.tool.call.id"] == "call-1"
    assert attributes["toolhost.outcome"] == "OK" and "error.type" not in attributes
    assert attributes["toolhost.argument_keys"] == ["text"]
    assert attributes["toolhost.arguments.size_bytes"] == len(json.dumps({"text": ARGUMENT_VALUE}))
    assert attributes["toolhost.output.size_bytes"] == len(ARGUMENT_VALUE)
    assert attributes["toolhost.truncated"] is False and attributes["toolhost.redacted"] is False
    # Keys and sizes, never the value (nor the output, which is the value here).
    assert all(ARGUMENT_VALUE.encode() not in raw for raw in receiver.raw)

    audit = [r.audit for r in caplog.records if hasattr(r, "audit")]
    assert [a["trace_id"] for a in audit] == [response.trace_id]


async def test_a_client_traceparent_is_honoured_in_unary_and_streamed_calls(receiver, start_server):
    server = await start_server()
    metadata = (("traceparent", TRACEPARENT),)
    response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(name="echo", arguments_json='{"text": "a"}'),
                                          metadata=metadata)
    assert response.trace_id == CLIENT_TRACE_ID
    streamed = [message async for message in server.stub.StreamCallTool(
        tool_service_pb2.StreamCallToolRequest(name="echo", arguments_json='{"text": "b"}'), metadata=metadata)]
    assert streamed[-1].result.trace_id == CLIENT_TRACE_ID

    spans = await receiver.trace(CLIENT_TRACE_ID, 4)
    for method in ("CallTool", "StreamCallTool"):
        rpc = one(spans, f"toolhost.v1.ToolService/{method}")
        assert rpc.parent_id == CLIENT_SPAN_ID
        children = [s for s in spans if s.parent_id == rpc.span_id]
        assert [s.name for s in children] == ["execute_tool echo"]


async def test_a_call_the_client_did_not_sample_makes_no_spans_and_keeps_its_trace_id(receiver, start_server):
    server = await start_server()
    unsampled = secrets.token_hex(16)
    response = await server.stub.CallTool(
        tool_service_pb2.CallToolRequest(name="echo", arguments_json='{"text": "a"}'),
        metadata=(("traceparent", f"00-{unsampled}-{CLIENT_SPAN_ID}-00"),))
    assert response.success and response.trace_id == unsampled
    # A sampled call after it: once its spans arrived, the unsampled call's would have too.
    await server.stub.CallTool(tool_service_pb2.CallToolRequest(name="echo", arguments_json='{"text": "b"}'),
                               metadata=(("traceparent", TRACEPARENT),))
    spans = await receiver.wait_for(lambda spans: sum(s.trace_id == CLIENT_TRACE_ID for s in spans) >= 2)
    assert not [s for s in spans if s.trace_id == unsampled]


async def test_failures_set_the_error_code_and_status(receiver, start_server, tmp_path):
    process_tool(tmp_path, "fails", ["false"])
    server = await start_server(catalog_dirs=[tmp_path])
    failed = await server.stub.CallTool(tool_service_pb2.CallToolRequest(name="fails"))
    assert not failed.success and failed.error.code == "NON_ZERO_EXIT"
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await server.stub.CallTool(tool_service_pb2.CallToolRequest(
            name="echo", arguments_json=json.dumps({"text": 12345, ARGUMENT_VALUE: "x"})),
            metadata=(("traceparent", TRACEPARENT),))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    spans = await receiver.trace(failed.trace_id, 3)
    tool = one(spans, "execute_tool fails")
    assert tool.status_code == Status.STATUS_CODE_ERROR and tool.status_message == "NON_ZERO_EXIT"
    assert tool.attributes["error.type"] == "NON_ZERO_EXIT" and tool.attributes["toolhost.exit_code"] == 1
    process = one(spans, "process false")
    assert process.parent_id == tool.span_id and process.status_code == Status.STATUS_CODE_ERROR
    assert process.attributes["process.exit.code"] == 1 and process.attributes["process.pid"] > 0
    assert process.attributes["toolhost.process.killed"] is False

    spans = await receiver.trace(CLIENT_TRACE_ID, 2)
    rpc = one(spans, "toolhost.v1.ToolService/CallTool")
    # A caller's mistake: its code on the server span, but not an error of the server.
    assert rpc.attributes["rpc.grpc.status_code"] == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert rpc.status_code == Status.STATUS_CODE_UNSET and rpc.events == []
    tool = one(spans, "execute_tool echo")
    assert tool.attributes["error.type"] == "INVALID_ARGUMENTS" and tool.status_code == Status.STATUS_CODE_ERROR
    assert tool.attributes["toolhost.argument_keys"] == sorted([ARGUMENT_VALUE, "text"])  # keys are fine
    assert "12345" not in str(spans)  # the refused value is in the error message, not in the spans


async def test_a_call_through_a_remote_toolhost_is_one_trace_down_to_the_subprocess(receiver, start_server, tmp_path):
    process_tool(tmp_path / "worker", "say", ["printf", "%s", "{text}"])
    worker = await start_server(catalog_dirs=[tmp_path / "worker"])
    write_tool(tmp_path / "front", "remote_say", "name: remote_say\ndescription: Forwards.\n"
               f"runner: {{type: remote, target: '{worker.target}', tool: say}}\ninput_schema: {{type: object}}\n")
    front = await start_server(catalog_dirs=[tmp_path / "front"])

    response = await front.stub.CallTool(tool_service_pb2.CallToolRequest(
        name="remote_say", arguments_json=json.dumps({"text": ARGUMENT_VALUE})),
        metadata=(("traceparent", TRACEPARENT),))
    assert response.success and response.output == ARGUMENT_VALUE and response.trace_id == CLIENT_TRACE_ID

    spans = await receiver.trace(CLIENT_TRACE_ID, 5)
    front_rpc, worker_rpc = sorted((s for s in spans if s.name == "toolhost.v1.ToolService/CallTool"),
                                   key=lambda s: s.parent_id != CLIENT_SPAN_ID)
    front_tool = one(spans, "execute_tool remote_say")
    worker_tool = one(spans, "execute_tool say")
    process = one(spans, "process printf")
    # client -> front server span -> execute_tool -> (remote runner) worker server span -> execute_tool -> process
    assert front_rpc.parent_id == CLIENT_SPAN_ID
    assert front_tool.parent_id == front_rpc.span_id and front_tool.attributes["toolhost.runner"] == "remote"
    assert worker_rpc.parent_id == front_tool.span_id
    assert worker_tool.parent_id == worker_rpc.span_id and worker_tool.attributes["toolhost.runner"] == "process"
    assert process.parent_id == worker_tool.span_id
    assert process.attributes["process.executable.name"] == "printf"
    assert process.attributes["toolhost.process.stdout_bytes"] == len(ARGUMENT_VALUE)
    assert all(ARGUMENT_VALUE.encode() not in raw for raw in receiver.raw)  # not in argv, output or attributes


async def test_health_checks_make_no_spans(receiver, start_server):
    server = await start_server()
    health = health_pb2_grpc.HealthStub(server.channel)
    for _ in range(3):
        await health.Check(health_pb2.HealthCheckRequest())
    response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(name="echo", arguments_json='{"text": "x"}'))
    await receiver.trace(response.trace_id, 2)
    await asyncio.to_thread(server.toolhost.tracing.flush)  # the health checks' spans, had there been any
    assert {s.attributes.get("rpc.service") for s in receiver.spans} == {"toolhost.v1.ToolService", None}


async def test_a_credential_a_tool_puts_in_its_span_is_redacted_on_export(
        receiver, start_server, tmp_path, monkeypatch):
    canary = "canary-" + secrets.token_hex(12)
    monkeypatch.setenv("TOOLHOST_CRED_CANARY_TOKEN", canary)
    write_tool(tmp_path, "span_leak", "name: span_leak\ndescription: Puts its credential in its span.\n"
               "credentials: [canary]\nrunner: {type: python, entrypoint: 'catalog_functions:canary_in_span'}\n")
    server = await start_server(catalog_dirs=[tmp_path])
    response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(name="span_leak"))
    assert response.success and response.output == "noted"

    tool = one(await receiver.trace(response.trace_id, 2), "execute_tool span_leak")
    assert tool.attributes["tool.note"] == "token [REDACTED]"
    assert tool.events == [("used [REDACTED]", {"detail": "[REDACTED]", "api_key": "[REDACTED]"})]
    assert all(canary.encode() not in raw for raw in receiver.raw)


async def test_tracing_is_off_without_otel_settings_and_the_call_keeps_the_callers_trace_id(start_server, monkeypatch):
    for variable in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER"):
        monkeypatch.delenv(variable, raising=False)
    server = await start_server()
    assert not server.toolhost.tracing.enabled
    response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(name="echo", arguments_json='{"text": "x"}'),
                                          metadata=(("traceparent", TRACEPARENT),))
    assert response.success and response.trace_id == CLIENT_TRACE_ID  # tests/test_trace_ids.py has the rest


@pytest.mark.server
async def test_an_otlp_protocol_it_cannot_speak_stops_the_start_naming_the_variable(tmp_path):
    server = ServerProcess("--watch-catalog", "false", env={
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
    with pytest.raises(RuntimeError, match=r"OTEL_EXPORTER_OTLP_PROTOCOL='http/protobuf' is not supported"):
        await server.start()
    assert await server.wait() == 1
    await server.stop()


def test_an_unknown_exporter_is_refused(monkeypatch):
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    with pytest.raises(TracingConfigError, match="OTEL_TRACES_EXPORTER='zipkin'"):
        Tracing.from_environment(LearningRedactor(Redactor()))


def test_the_redacting_exporter_hides_secrets_everywhere_in_a_span_and_copies_only_those_with_one():
    learning = LearningRedactor(Redactor())
    exported = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(RedactingSpanExporter(exported, learning)))
    tracer = provider.get_tracer("test")
    secret = "learned-" + secrets.token_hex(8)
    with tracer.start_as_current_span("clean", attributes={"note": "nothing to hide", "count": 3}):
        pass
    clean_context = exported.get_finished_spans()[0].context
    # The value is learned while the span is open, as a call's credentials are: export still catches it.
    with tracer.start_as_current_span(f"span {secret}", links=[Link(clean_context, {"why": secret})]) as span:
        learning.learn([secret])
        span.set_attributes({"note": f"uses {secret}", "db.password": "hunter2hunter2", "list": ["a", secret],
                             "count": 3, "header": "Bearer abcdefghijklmnopqrstuvwxyz0123"})
        span.add_event(f"event {secret}", {"detail": secret})
        span.set_status(StatusCode.ERROR, f"failed with {secret}")

    clean, dirty = exported.get_finished_spans()
    assert clean.attributes == {"note": "nothing to hide", "count": 3} and clean.context == clean_context
    assert dirty.name == "span [REDACTED]"
    assert dict(dirty.attributes) == {"note": "uses [REDACTED]", "db.password": "[REDACTED]",
                                      "list": ("a", "[REDACTED]"), "count": 3, "header": "Bearer [REDACTED]"}
    assert [(e.name, dict(e.attributes)) for e in dirty.events] == [("event [REDACTED]", {"detail": "[REDACTED]"})]
    assert dirty.status.description == "failed with [REDACTED]" and dirty.status.status_code == StatusCode.ERROR
    assert [dict(link.attributes) for link in dirty.links] == [{"why": "[REDACTED]"}]
    assert dirty.context.trace_id != 0 and dirty.context == span.get_span_context()  # same ids, only text changed
    provider.shutdown()
