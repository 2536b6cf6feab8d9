"""Hostile requests to the surfaces of user tools (UserToolService, the tool-management tools): NUL bytes,
huge values, names that look like paths or other tools, hostile masks, output-only fields smuggled into an
update, and malformed requests from a caller without the right (which learns nothing from them). (A schema
nested past protobuf's depth limit never reaches the server's code: the decoder refuses it.) Each is refused with
INVALID_ARGUMENT (PERMISSION_DENIED without the right, or the tool's failure) and nothing is stored; the server
keeps serving. The servers run user tools as `nobody`."""

from __future__ import annotations

import math
import secrets

import grpc
import pytest
from google.protobuf import field_mask_pb2

import toolhost
from toolhost.v1 import user_tool_service_pb2 as pb
from toolhost.v1 import user_tool_service_pb2_grpc
from toolhost_server.auth import hash_token

from helpers.servers import RunningServer, ServerFactory
from helpers.waiting import HANG_GUARD_SECONDS


@pytest.fixture
def start_server(start_server: ServerFactory) -> ServerFactory:
    """conftest's start_server, with process_user nobody unless a test says otherwise."""
    async def start(**overrides) -> RunningServer:
        return await start_server(**{"process_user": "nobody", **overrides})
    return start


HOSTILE_TOOLS = {
    "nul-in-slug": pb.UserTool(slug="evil\x00tool", description="x", script="true"),
    "nul-in-script": pb.UserTool(slug="evil_tool", description="x", script="echo a\x00b"),
    "nul-in-description": pb.UserTool(slug="evil_tool", description="x\x00y", script="true"),
    "huge-slug": pb.UserTool(slug="a" * 100_000, description="x", script="true"),
    "path-slug": pb.UserTool(slug="../../etc/passwd", description="x", script="true"),
    "unicode-slug": pb.UserTool(slug="\uff45cho", description="x", script="true"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_TOOLS))
async def test_hostile_tools_are_refused_and_nothing_is_stored(start_server, name):
    server = await start_server()
    stub = user_tool_service_pb2_grpc.UserToolServiceStub(server.channel)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.CreateUserTool(pb.CreateUserToolRequest(user_tool=HOSTILE_TOOLS[name]))
    assert caught.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.ALREADY_EXISTS), \
        caught.value.details()
    assert not (await stub.ListUserTools(pb.ListUserToolsRequest())).user_tools
    # And the server still serves.
    await stub.CreateUserTool(pb.CreateUserToolRequest(user_tool=pb.UserTool(
        slug="fine_tool", description="x", script="echo fine")))


@pytest.mark.parametrize("paths", [["script\x00"], ["script"] * 10_000 + ["slug"], ["a" * 100_000], ["", "script"]])
async def test_hostile_masks_change_nothing(start_server, paths):
    server = await start_server()
    stub = user_tool_service_pb2_grpc.UserToolServiceStub(server.channel)
    await stub.CreateUserTool(pb.CreateUserToolRequest(user_tool=pb.UserTool(
        slug="kept_tool", description="x", script="echo kept")))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.UpdateUserTool(pb.UpdateUserToolRequest(
            user_tool=pb.UserTool(slug="kept_tool", script="echo changed"),
            update_mask=field_mask_pb2.FieldMask(paths=paths)))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    kept = (await stub.GetUserTool(pb.GetUserToolRequest(slug="kept_tool"))).user_tool
    assert (kept.version, kept.script) == (1, "echo kept")


async def test_tool_run_cannot_reach_a_tool_through_a_hostile_slug(start_server):
    server = await start_server()
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS) as client:
        for slug in ("tool_run", "../echo", "echo\x00", "ECHO"):
            result_or_error: object
            try:
                result_or_error = await client.call_tool("tool_run", slug=slug, arguments={"text": "x"})
            except toolhost.InvalidArgumentError as exc:
                result_or_error = exc
            if isinstance(result_or_error, toolhost.ToolResult):
                assert not result_or_error.success and result_or_error.error.code == "RESOURCE_NOT_FOUND", slug


async def test_an_empty_mask_does_not_carry_output_only_fields_into_the_tool(start_server):
    # AIP-134's "populated fields" are the mutable ones: a request that also sets enabled, version, times or
    # shadowed_by changes none of them.
    server = await start_server()
    stub = user_tool_service_pb2_grpc.UserToolServiceStub(server.channel)
    await stub.CreateUserTool(pb.CreateUserToolRequest(user_tool=pb.UserTool(
        slug="kept_tool", description="x", script="echo kept")))
    smuggled = pb.UserTool(slug="kept_tool", script="echo changed", enabled=False, version=99,
                           shadowed_by="catalog")
    smuggled.create_time.seconds = 1
    updated = (await stub.UpdateUserTool(pb.UpdateUserToolRequest(user_tool=smuggled))).user_tool
    assert (updated.script, updated.enabled, updated.version, updated.shadowed_by) == ("echo changed", True, 2, "")
    assert updated.create_time.seconds > 1


async def test_a_caller_without_the_right_cannot_probe_validation_or_names(start_server, tmp_path):
    # Were malformed requests judged before the right, a caller without it could learn which slugs exist and
    # what the server accepts. Every answer it gets is the same refusal.
    tokens = {"admin": secrets.token_urlsafe(32), "caller": secrets.token_urlsafe(32)}
    (tmp_path / "auth.yaml").write_text(
        "roles:\n  admin: {admin: true}\n  caller: {call: {tools: ['*']}}\n"
        f"tokens:\n  - {{name: admin, sha256: {hash_token(tokens['admin'])}, roles: [admin]}}\n"
        f"  - {{name: caller, sha256: {hash_token(tokens['caller'])}, roles: [caller]}}\n")
    server = await start_server(auth_file=str(tmp_path / "auth.yaml"))
    stub = user_tool_service_pb2_grpc.UserToolServiceStub(server.channel)
    admin = (("authorization", f"Bearer {tokens['admin']}"),)
    caller = (("authorization", f"Bearer {tokens['caller']}"),)
    await stub.CreateUserTool(pb.CreateUserToolRequest(user_tool=pb.UserTool(
        slug="kept_tool", description="x", script="echo kept")), metadata=admin)
    answers = set()
    for tool, paths in [
        (pb.UserTool(slug="kept_tool", script="x", timeout_seconds=math.nan), ["script", "timeout_seconds"]),
        (pb.UserTool(slug="no_such_tool", script="x"), ["script"]),
        (pb.UserTool(slug="kept_tool\x00", script="x"), ["a" * 100_000]),
        (pb.UserTool(slug="echo", description="x" * 1_000_000, script="x"), []),
    ]:
        for rpc, request in ((stub.UpdateUserTool, pb.UpdateUserToolRequest(
                user_tool=tool, update_mask=field_mask_pb2.FieldMask(paths=paths))),
                (stub.CreateUserTool, pb.CreateUserToolRequest(user_tool=tool))):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await rpc(request, metadata=caller)
            assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED, caught.value.details()
            answers.add(caught.value.details().split(" needs ")[1])
    assert len(answers) == 1, answers
    kept = (await stub.GetUserTool(pb.GetUserToolRequest(slug="kept_tool"), metadata=admin)).user_tool
    assert (kept.version, kept.script) == (1, "echo kept")
