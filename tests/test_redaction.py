"""Redaction on the call path and in logs, through a real server."""

from __future__ import annotations

import json
import sys
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

import toolhost
from toolhost.v1 import tool_service_pb2, tool_service_pb2_grpc
from toolhost_server.tools.base import ToolOutput

from helpers.calls import call
from helpers.catalogs import add_tool, write_tool
from helpers.servers import ServerProcess

SECRETS = ("hunter2hunter2", "ghp_abcdefghijklmnop", "s3cretpass", "AKIAIOSFODNN7EXAMPLE", "sk-live-0123456789")


def python_tool(name: str, function: str, parameters: str = "") -> str:
    return (f"name: {name}\ndescription: Leaks on purpose.\n"
            f"runner: {{type: python, entrypoint: 'catalog_functions:{function}'}}\n{parameters}")


def assert_no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, secret


async def test_outputs_and_structured_output_are_redacted_and_ordinary_fields_survive(start_server, tmp_path):
    write_tool(tmp_path, "leak", python_tool("leak", "leak"))
    server = await start_server(catalog_dirs=[tmp_path])
    response = await call(server, "leak")
    assert response.success and response.redacted
    assert_no_secret(response.output)
    assert_no_secret(str(response.structured_output))
    structured = json_format.MessageToDict(response.structured_output)
    config = structured["config"]
    assert config["DB_PASSWORD"] == "[REDACTED]" and config["githubToken"] == "[REDACTED]"
    assert config["max_tokens"] == 512 and config["token_count"] == 37 and config["primary_key"] == "id"
    assert structured["note"] == "connect with postgres://app:[REDACTED]@db:5432/app"


async def test_process_output_and_stderr_are_redacted(start_server, tmp_path):
    write_tool(tmp_path, "shout", "name: shout\ndescription: Prints secrets.\nrunner: {type: script, script: "
               '"#!/bin/sh\\necho Authorization: Bearer sk-live-0123456789\\necho password=hunter2hunter2 >&2\\n"}\n')
    server = await start_server(catalog_dirs=[tmp_path])
    response = await call(server, "shout")
    assert response.redacted
    assert response.output.strip() == "Authorization: Bearer [REDACTED]"
    assert response.stderr.strip() == "password=[REDACTED]"


async def test_error_messages_are_redacted(start_server, tmp_path):
    write_tool(tmp_path, "oops", python_tool("oops", "leak_in_failure"))
    server = await start_server(catalog_dirs=[tmp_path])
    response = await call(server, "oops")
    assert not response.success and response.redacted and response.error.code == "LOGIN_FAILED"
    assert_no_secret(response.error.message)
    assert "password=[REDACTED]" in response.error.message


async def test_an_unexpected_exception_reaches_the_caller_as_a_generic_message(start_server, tmp_path):
    write_tool(tmp_path, "oops", python_tool("oops", "leak_in_error"))
    server = await start_server(catalog_dirs=[tmp_path])
    response = await call(server, "oops")
    assert not response.success and response.error.code == "TOOL_EXCEPTION"
    assert "login failed" not in response.error.message and "RuntimeError" not in response.error.message
    assert response.call_id in response.error.message


async def test_a_clean_result_is_not_marked_redacted(start_server):
    server = await start_server()
    response = await call(server, "echo", {"text": "max_tokens=512 and nothing secret"})
    assert response.output == "max_tokens=512 and nothing secret" and not response.redacted


async def test_configured_keys_are_redacted_too(start_server, tmp_path):
    write_tool(tmp_path, "leak", python_tool("leak", "leak"))
    server = await start_server(catalog_dirs=[tmp_path], redact_keys=("primary_key",))
    response = await call(server, "leak")
    assert json_format.MessageToDict(response.structured_output)["config"]["primary_key"] == "[REDACTED]"


@pytest.mark.server
async def test_the_servers_log_lines_are_redacted(tmp_path):
    write_tool(tmp_path, "leak_in_log", python_tool(
        "leak_in_log", "leak_in_log", "parameters: [{name: text, type: string, required: true}]\n"))
    write_tool(tmp_path, "oops", python_tool("oops", "leak_in_error"))
    server = ServerProcess("--catalog-dir", str(tmp_path))
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.target) as channel:
            stub = tool_service_pb2_grpc.ToolServiceStub(channel)
            await stub.CallTool(tool_service_pb2.CallToolRequest(
                name="leak_in_log", arguments_json=json.dumps({"text": "sk-live-0123456789"})))
            await stub.CallTool(tool_service_pb2.CallToolRequest(name="oops"))
        assert server.process is not None
        server.process.terminate()
        assert await server.wait() == 0
    finally:
        await server.stop()
    log = server.log.decode()
    assert "about to use api_key=[REDACTED]" in log  # the tool's log line was written, without its secret
    assert "RuntimeError" in log                      # and the exception's traceback, without its secrets
    assert_no_secret(log)


# --- JSON output stays JSON -------------------------------------------------------------------------------

# Secret keys holding JSON literals, which a bare [REDACTED] would turn into text that no longer parses.
LITERALS: dict[str, Any] = {
    "metrics_token": 8675309123, "password": True, "client_secret": False, "refresh_token": None,
    "nested": [{"api_key": -271.82818e-3, "count": 3}], "max_tokens": 512,
}
REDACTED_LITERALS: dict[str, Any] = {
    "metrics_token": "[REDACTED]", "password": "[REDACTED]", "client_secret": "[REDACTED]",
    "refresh_token": "[REDACTED]", "nested": [{"api_key": "[REDACTED]", "count": 3}], "max_tokens": 512,
}
# The same again as JSON text inside a string: in the tool's own JSON text its keys read \"metrics_token\".
JSON_DOCUMENT: dict[str, Any] = {**LITERALS, "body": json.dumps(LITERALS)}


def json_document() -> ToolOutput:
    """Its own text is the JSON of its structured output."""
    return ToolOutput(text=json.dumps(JSON_DOCUMENT, indent=2), structured=JSON_DOCUMENT)


def assert_redacted_document(text: str) -> None:
    document = json.loads(text)
    assert json.loads(document.pop("body")) == REDACTED_LITERALS
    assert document == REDACTED_LITERALS
    assert "8675309123" not in text and "271" not in text


async def test_json_output_with_literals_under_secret_keys_stays_json_in_every_format(start_server, tmp_path):
    write_tool(tmp_path, "json_document", "name: json_document\ndescription: Writes JSON with secret keys.\n"
               "runner: {type: python, entrypoint: 'test_redaction:json_document'}\n")
    server = await start_server(catalog_dirs=[tmp_path])
    formats = {"TEXT": tool_service_pb2.OUTPUT_FORMAT_TEXT, "PRETTY": tool_service_pb2.OUTPUT_FORMAT_PRETTY,
               "JSON": tool_service_pb2.OUTPUT_FORMAT_JSON}
    for label, output_format in formats.items():
        response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(
            name="json_document", output_format=output_format))  # type: ignore[arg-type]
        assert response.success and response.redacted, label
        assert_redacted_document(response.output)
        structured = json_format.MessageToJson(response.structured_output)
        assert_redacted_document(structured)


async def test_a_streamed_json_output_stays_json_chunk_by_chunk(start_server, tmp_path):
    # A process writes the document in pieces that split keys and values: what streams out must still parse.
    text = json.dumps(JSON_DOCUMENT)
    pieces = [text[i:i + 7] for i in range(0, len(text), 7)]
    script = f"import sys\nfor piece in {pieces!r}:\n    sys.stdout.write(piece); sys.stdout.flush()\n"
    add_tool(tmp_path, "json_pieces", {"type": "process", "argv": [sys.executable, "-c", script]})
    server = await start_server(catalog_dirs=[tmp_path])
    async with toolhost.AsyncClient(server.target, timeout=30) as client:
        events = [event async for event in client.stream_call("json_pieces")]
    result = events[-1]
    assert isinstance(result, toolhost.ToolResult) and result.success and result.redacted
    streamed = "".join(event.text for event in events if isinstance(event, toolhost.OutputChunk))
    assert_redacted_document(streamed)
    assert_redacted_document(result.output)
