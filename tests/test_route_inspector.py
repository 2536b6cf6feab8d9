"""route_inspector against real servers: the gRPC methods it reports are those the live server answers (as its
reflection service lists them), with the bound addresses; every registered RPC, called as each kind of caller,
is refused exactly as its reported right says; the HTTP routes are the live app's, and its listener's real port."""

from __future__ import annotations

import dataclasses
import json
import logging
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pool, message_factory
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

import toolhost
from toolhost.v1 import log_service_pb2, tool_service_pb2
from toolhost_server.api.log_service import LogService
from toolhost_server.api.server import GrpcServer, create_toolhost
from toolhost_server.auth import hash_token
from toolhost_server.config import Config
from toolhost_server.introspection.surface import GrpcMethod
from toolhost_server.web.server import HttpServer, create_http_server

from helpers.auth import Tokens
from helpers.servers import RunningServer, ServerProcess
from helpers.waiting import HANG_GUARD_SECONDS, within

ROLES = ("agent", "toolsmith", "admin")


def rights_auth_file(path: Path, tokens: dict[str, str]) -> Path:
    """Roles that differ only in the rights RPCs require: a plain caller, a tool manager, an admin."""
    token_lines = "".join(f"  - {{name: {role}-token, sha256: {hash_token(tokens[role])}, roles: [{role}]}}\n"
                          for role in ROLES)
    path.write_text(f"""\
roles:
  agent:
    call: {{tools: ["echo"]}}
  toolsmith:
    manage_tools: true
  admin:
    admin: true
    call: {{tools: ["*"]}}
tokens:
{token_lines}""")
    return path


def generated_tokens() -> dict[str, str]:
    return dict(zip(ROLES, dataclasses.astuple(Tokens.generate()), strict=True))


async def inspect(client: toolhost.AsyncClient, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool("route_inspector", arguments)
    assert result.success, result.error
    output: dict[str, Any] = result.structured_output
    assert json.loads(result.output) == output  # the text is the JSON of the structured output
    return output


def methods_of(output: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["full_name"]: m for service in output["services"] for m in service["methods"]}


async def reflected_services(channel: grpc.aio.Channel) -> set[str]:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    call = stub.ServerReflectionInfo()
    await call.write(reflection_pb2.ServerReflectionRequest(list_services=""))
    response = await within(call.read(), "reflection's list of services")
    call.cancel()
    return {service.name for service in response.list_services_response.service}


async def test_it_reports_the_methods_the_live_server_answers_with_their_types_and_bound_address(start_server):
    server: RunningServer = await start_server()
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS) as client:
        output = await inspect(client)
    methods = methods_of(output)
    # The services are those the server answers for (reflection reads the server's own registration list).
    assert {s["service"] for s in output["services"]} == await reflected_services(server.channel)
    pool = descriptor_pool.Default()
    for service_name in ("toolhost.v1.ToolService", "toolhost.v1.LogService", "toolhost.v1.UserToolService"):
        descriptor = pool.FindServiceByName(service_name)
        assert {m for m in methods if m.startswith(service_name + "/")} == \
            {f"{service_name}/{m.name}" for m in descriptor.methods}
    assert methods["toolhost.v1.ToolService/CallTool"] == {
        "service": "toolhost.v1.ToolService", "method": "CallTool", "full_name": "toolhost.v1.ToolService/CallTool",
        "request_type": "toolhost.v1.CallToolRequest", "response_type": "toolhost.v1.CallToolResponse",
        "streaming": "unary", "required_right": "authenticated"}
    assert methods["toolhost.v1.ToolService/StreamCallTool"]["streaming"] == "server"
    assert methods["grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"]["streaming"] == "bidi"
    assert methods["grpc.health.v1.Health/Check"]["required_right"] == "none"
    assert methods["toolhost.v1.ToolService/Reload"]["required_right"] == "admin"
    summary = output["summary"]
    assert summary["method_count"] == len(methods) and summary["service_count"] == len(output["services"])
    assert sum(entry["count"] for entry in summary["right_counts"]) == len(methods)
    # No HTTP listener on this in-process server, and no auth file: both said in words.
    assert output["routes"] == []
    assert any("http_address" in note for note in summary["notes"])
    assert any("no auth_file" in note for note in summary["notes"])
    # The address is the port the listener got, not the configured 0.
    assert {"kind": "grpc", "address": f"127.0.0.1:{server.port}", "tls": False} in [
        dataclasses.asdict(a) for a in server.toolhost.surface.addresses()]


async def test_narrowing_by_service_and_kind(start_server):
    server: RunningServer = await start_server()
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS) as client:
        by_full_name = await inspect(client, service="toolhost.v1.LogService")
        assert [s["service"] for s in by_full_name["services"]] == ["toolhost.v1.LogService"]
        assert set(methods_of(by_full_name)) == {"toolhost.v1.LogService/QueryLogs", "toolhost.v1.LogService/TailLogs"}
        assert await inspect(client, service="LogService") == by_full_name
        assert (await inspect(client, kind="http"))["services"] == []
        assert (await inspect(client, kind="grpc"))["summary"]["method_count"] > 20

        unknown = await client.call_tool("route_inspector", service="toolhost.v1.ToolServce")
        assert not unknown.success and unknown.error.code == "NOT_FOUND"
        assert "toolhost.v1.ToolService" in unknown.error.message
        mixed = await client.call_tool("route_inspector", service="LogService", kind="http")
        assert not mixed.success and mixed.error.code == "INVALID_ARGUMENT"
        with pytest.raises(toolhost.InvalidArgumentError, match='"grpc" or "http"'):
            await client.call_tool("route_inspector", kind="websocket")


# --- the reported right is the enforced one -----------------------------------------------------------------

# Requests whose first answer comes at once for a caller that is allowed (an empty TailLogs would wait for a
# new record); every other method gets its empty request.
FIRST_ANSWER_REQUESTS: dict[str, Any] = {
    "toolhost.v1.LogService/TailLogs": log_service_pb2.TailLogsRequest(backlog=1),
    "toolhost.v1.ToolService/CallTool": tool_service_pb2.CallToolRequest(name="echo", arguments_json='{"text": "x"}'),
    "grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo":
        reflection_pb2.ServerReflectionRequest(list_services=""),
}


def _message_class(full_name: str) -> Any:
    return message_factory.GetMessageClass(descriptor_pool.Default().FindMessageTypeByName(full_name))


async def first_answer(channel: grpc.aio.Channel, method: GrpcMethod, token: str) -> grpc.StatusCode:
    """OK when the method answers the caller (a response, or a status other than a refusal), else the code."""
    request = FIRST_ANSWER_REQUESTS.get(method.full_name) or _message_class(method.request_type)()
    response_class = _message_class(method.response_type)
    kwargs = {"request_serializer": type(request).SerializeToString,
              "response_deserializer": response_class.FromString}
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    path = f"/{method.full_name}"
    try:
        if method.streaming == "unary":
            await within(channel.unary_unary(path, **kwargs)(request, metadata=metadata), method.full_name)
            return grpc.StatusCode.OK
        if method.streaming == "server":
            call = channel.unary_stream(path, **kwargs)(request, metadata=metadata)
        else:
            call = channel.stream_stream(path, **kwargs)(metadata=metadata)
            await call.write(request)
        try:
            if await within(call.read(), method.full_name) is grpc.aio.EOF:
                return await call.code()
            return grpc.StatusCode.OK
        finally:
            call.cancel()
    except grpc.aio.AioRpcError as exc:
        return exc.code()


async def test_every_registered_rpc_refuses_exactly_the_callers_its_reported_right_excludes(start_server, tmp_path):
    tokens = generated_tokens()
    server: RunningServer = await start_server(auth_file=rights_auth_file(tmp_path / "auth.yaml", tokens))
    logging.getLogger("toolhost.test").warning("a record for TailLogs' backlog")
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS, token=tokens["admin"],
                                    insecure_token_ok=True) as admin:
        reported = methods_of(await inspect(admin))
    # The test's list is the server's own registration, so an RPC added later is checked without editing this.
    registered = server.toolhost.surface.grpc_methods()
    assert {m.full_name for m in registered} == set(reported) and len(registered) > 20
    refused = {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED}
    outcomes: dict[str, dict[str, grpc.StatusCode]] = {}
    for method in registered:
        right = reported[method.full_name]["required_right"]
        codes = {caller: await first_answer(server.channel, method, tokens.get(caller, ""))
                 for caller in ("anonymous", *ROLES)}
        outcomes[method.full_name] = codes
        expected = {
            "anonymous": grpc.StatusCode.UNAUTHENTICATED if right != "none" else None,
            "agent": grpc.StatusCode.PERMISSION_DENIED if right in ("manage_tools", "manage_assets", "admin") else None,
            # A tool manager does not manage the asset inventory (tests/test_asset_service.py has a role that does).
            "toolsmith": grpc.StatusCode.PERMISSION_DENIED if right in ("manage_assets", "admin") else None,
            "admin": None,
        }
        got = {caller: code if code in refused else None for caller, code in codes.items()}
        assert got == expected, (method.full_name, right, codes)
    assert {"none", "authenticated", "manage_tools", "manage_assets", "admin"} == \
        {m["required_right"] for m in reported.values()}


async def test_callers_without_the_admin_role_do_not_see_the_tool(start_server, tmp_path):
    tokens = generated_tokens()
    server: RunningServer = await start_server(auth_file=rights_auth_file(tmp_path / "auth.yaml", tokens))
    for role in ("agent", "toolsmith"):
        async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS, token=tokens[role],
                                        insecure_token_ok=True) as client:
            assert "route_inspector" not in [tool.name async for tool in client.list_tools()]
            with pytest.raises(toolhost.NotFoundError):
                await client.call_tool("route_inspector")
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS, token=tokens["admin"],
                                    insecure_token_ok=True) as admin:
        tool = await admin.get_tool("route_inspector")
        assert tool.requires_admin and tool.annotations.read_only and tool.annotations.idempotent
        assert tool.category == "diagnostics" and "introspection" in tool.tags
        # With an auth file, no note says every caller has every right.
        output = await inspect(admin)
        assert not any("no auth_file" in note for note in output["summary"]["notes"])


# --- HTTP ------------------------------------------------------------------------------------------------------

@pytest.fixture
async def http_servers() -> AsyncIterator[list[HttpServer]]:
    started: list[HttpServer] = []
    yield started
    for http in started:
        await http.stop()


def http_status(url: str, token: str = "") -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=HANG_GUARD_SECONDS) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.parametrize("with_token", [False, True])
async def test_http_routes_are_the_live_apps_with_the_right_each_enforces(start_server, http_servers, tmp_path,
                                                                          with_token):
    import asyncio

    token = "metrics-token-" + "x" * 40
    settings: dict[str, Any] = {"http_address": "127.0.0.1:0"}
    if with_token:
        (tmp_path / "metrics_token").write_text(token)
        settings["metrics_token_file"] = str(tmp_path / "metrics_token")
    server: RunningServer = await start_server(**settings)
    toolhost_core = server.toolhost
    http = create_http_server(toolhost_core.config, toolhost_core.metrics, lambda: True, toolhost_core.surface)
    http_servers.append(http)
    port = await http.start()
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS) as client:
        output = await inspect(client, kind="http")
    routes = {route["path"]: route for route in output["routes"]}
    assert set(routes) == {"/metrics", "/healthz", "/readyz"}
    assert routes["/healthz"]["methods"] == ["GET", "HEAD"]
    assert {"kind": "http", "address": f"127.0.0.1:{port}", "tls": False} in [
        dataclasses.asdict(a) for a in toolhost_core.surface.addresses()]
    assert output["summary"]["route_count"] == 3 and output["services"] == []
    # What each route reports is what it does to a caller without a token.
    for path, route in routes.items():
        status = await asyncio.to_thread(http_status, f"http://127.0.0.1:{port}{path}")
        assert (status == 401) == (route["required_right"] == "metrics_token"), (path, status, route)
    assert routes["/metrics"]["required_right"] == ("metrics_token" if with_token else "none")
    if with_token:
        assert await asyncio.to_thread(http_status, f"http://127.0.0.1:{port}/metrics", token) == 200


async def test_toolhost_serve_records_both_listeners_and_the_http_routes():
    """The real `toolhost serve` wiring (serve.py): the HTTP app's routes and both bound ports."""
    process = ServerProcess()
    try:
        port = await process.start()
        http_port = int((await process.wait_for_log(rb"serving HTTP .* on 127\.0\.0\.1:(\d+)")).group(1))
        async with toolhost.AsyncClient(process.target, timeout=HANG_GUARD_SECONDS) as client:
            output = await inspect(client)
            only_http = await inspect(client, kind="http")
        routes = {route["path"]: route for route in output["routes"]}
        assert set(routes) == {"/mcp", "/metrics", "/healthz", "/readyz", "/ai/tools/list", "/ai/tools/search",
                               "/ai/tools/execute", "/ai/tools/reload", "/openapi.json"}
        assert (routes["/mcp"]["methods"], routes["/mcp"]["required_right"]) == (["POST"], "authenticated")
        assert routes["/ai/tools/reload"]["required_right"] == "admin"
        assert "toolhost.v1.ToolService/CallTool" in methods_of(output)
        assert output["addresses"] == [{"kind": "grpc", "address": f"127.0.0.1:{port}", "tls": False},
                                       {"kind": "http", "address": f"127.0.0.1:{http_port}", "tls": False}]
        assert only_http["addresses"] == output["addresses"][1:]
    finally:
        await process.stop()


async def test_a_servicer_method_without_a_declared_right_stops_the_build(tmp_path, monkeypatch):
    """A new RPC cannot be served, and so reported, without saying which right it needs."""
    monkeypatch.delattr(LogService.QueryLogs, "required_right")
    core = create_toolhost(dataclasses.replace(Config(), grpc_address="127.0.0.1:0", data_dir=str(tmp_path),
                                               watch_catalog=False))
    try:
        with pytest.raises(LookupError, match=r"LogService\.QueryLogs declares no required right"):
            GrpcServer(core)
    finally:
        await core.close()
