"""Hostile requests to the surfaces of user tools (UserToolService, the tool-management tools): NUL bytes,
huge values, names that look like paths or other tools, hostile masks. (A schema nested past protobuf's depth
limit never reaches the server's code: the decoder refuses it.) Each is refused with INVALID_ARGUMENT (or the
tool's failure) and nothing is stored; the server keeps serving."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import field_mask_pb2

import toolhost
from toolhost.v1 import user_tool_service_pb2 as pb
from toolhost.v1 import user_tool_service_pb2_grpc

from helpers.waiting import HANG_GUARD_SECONDS

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
