"""route_inspector and log_inspector's narrowing arguments under attack, on real servers: a canary credential
(credentials_dir) and a canary metrics token are absent from every output of route_inspector, in every format and
for every narrowing argument; hostile `service` and `source` values (huge, NUL, globs, paths, odd Unicode) get
a short refusal that echoes at most a bounded part of them, never a listing they were not meant to match."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import grpc
import pytest
from google.protobuf import json_format

from toolhost.v1 import tool_service_pb2
from toolhost_server.web.server import create_http_server

from helpers.servers import RunningServer

FORMATS = (tool_service_pb2.OUTPUT_FORMAT_UNSPECIFIED, tool_service_pb2.OUTPUT_FORMAT_JSON,
           tool_service_pb2.OUTPUT_FORMAT_PRETTY, tool_service_pb2.OUTPUT_FORMAT_TEXT)
HOSTILE = ("x" * 256, "ToolService\x00", "toolhost.v1.*", "*", "../../etc/passwd", "%s%n",
           "\uff2c\uff4f\uff47Service", "toolhost.v1.ToolService ", "")  # one fullwidth "Log"


async def call(server: RunningServer, name: str, arguments: dict[str, object],
               output_format: int = tool_service_pb2.OUTPUT_FORMAT_UNSPECIFIED) -> tool_service_pb2.CallToolResponse:
    return await server.stub.CallTool(tool_service_pb2.CallToolRequest(
        name=name, arguments_json=json.dumps(arguments), output_format=output_format))


async def test_no_canary_in_any_output_of_route_inspector(start_server, tmp_path: Path):
    canary = f"cn{secrets.token_hex(12)}"
    metrics_canary = f"mt{secrets.token_hex(20)}"
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "canary.password").write_text(canary)
    (tmp_path / "metrics_token").write_text(metrics_canary)
    server: RunningServer = await start_server(
        credentials_dir=str(credentials), http_address="127.0.0.1:0",
        metrics_token_file=str(tmp_path / "metrics_token"))
    core = server.toolhost
    http = create_http_server(core.config, core.metrics, lambda: True, core.surface)
    await http.start()
    try:
        services = sorted({m.service for m in core.surface.grpc_methods()})
        narrowings: list[dict[str, object]] = [{}, {"kind": "grpc"}, {"kind": "http"},
                                               *({"service": s} for s in services)]
        seen = []
        for arguments in narrowings:
            for output_format in FORMATS:
                response = await call(server, "route_inspector", arguments, output_format)
                assert response.success, (arguments, response.error)
                everything = response.output + json_format.MessageToJson(response)
                assert canary not in everything and metrics_canary not in everything, arguments
                seen.append(response.output)
        # The outputs were about something: the routes and the token-guarded /metrics are there.
        assert any("/metrics" in text and "metrics_token" in text for text in seen)
    finally:
        await http.stop()


@pytest.mark.parametrize("service", HOSTILE)
async def test_hostile_service_names_match_nothing_and_are_not_echoed_whole(start_server, service):
    server: RunningServer = await start_server()
    response = await call(server, "route_inspector", {"service": service})
    if service == "":
        assert response.success  # empty: no narrowing
        return
    assert not response.success and response.error.code == "NOT_FOUND", response.error
    assert len(response.error.message) < 600
    assert "x" * 201 not in response.error.message


async def test_a_service_name_over_the_limit_is_refused_before_the_tool_runs(start_server):
    server: RunningServer = await start_server()
    with pytest.raises(Exception, match="INVALID_ARGUMENT") as refused:
        await call(server, "route_inspector", {"service": "x" * 100_000})
    assert "x" * 300 not in str(refused.value)


FULLWIDTH_MEMORY = "\uff4d\uff45\uff4d\uff4f\uff52\uff59"


@pytest.mark.parametrize("source", ["memory\x00", "*", "../file", FULLWIDTH_MEMORY, "Memory", "files"])
async def test_hostile_log_sources_are_refused_before_the_tool_runs_naming_the_readers(start_server, source):
    server: RunningServer = await start_server()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call(server, "log_inspector", {"source": source})
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert 'is not one of "memory", "file" or "database"' in refused.value.details()
    assert len(refused.value.details()) < 600


async def test_a_log_source_over_the_limit_is_refused_before_the_tool_runs(start_server):
    server: RunningServer = await start_server()
    with pytest.raises(Exception, match="INVALID_ARGUMENT"):
        await call(server, "log_inspector", {"source": "m" * 10_000})
