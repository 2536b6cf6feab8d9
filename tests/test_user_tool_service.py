"""UserToolService over gRPC against a real server: every RPC through the generated stub, field masks, pages,
the proto <-> record conversions, the error codes and reasons, and who may call it.

Every server here runs user tools as `nobody` (the production default for a root server): a server whose user
tools would run as its own user refuses to serve them."""

from __future__ import annotations

import logging
import math
import secrets

import grpc
import pytest
from google.protobuf import field_mask_pb2, json_format, struct_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from toolhost.v1 import tool_service_pb2, user_tool_service_pb2_grpc
from toolhost.v1 import user_tool_service_pb2 as pb
from toolhost_server.api.status import status_of
from toolhost_server.auth import hash_token
from toolhost_server.store.errors import StoreCommitUnknownError, StoreError, StoreUnavailableError

from helpers.servers import RunningServer, ServerFactory
from helpers.status import error_details

SCHEMA = {"type": "object", "properties": {"who": {"type": "string", "maxLength": 8}}, "required": ["who"]}
SERVICE = "toolhost.v1.UserToolService"


@pytest.fixture
def start_server(start_server: ServerFactory) -> ServerFactory:
    """conftest's start_server, with process_user nobody unless a test says otherwise."""
    async def start(**overrides) -> RunningServer:
        return await start_server(**{"process_user": "nobody", **overrides})
    return start


def schema_struct(schema: dict) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    json_format.ParseDict(schema, message)
    return message


def greeter(slug: str = "greet_user", script: str = 'echo "hello $TOOL_ARG_WHO"', **fields) -> pb.UserTool:
    fields.setdefault("input_schema", schema_struct(SCHEMA))
    return pb.UserTool(slug=slug, description="Greets someone.", script=script, **fields)


def stub_of(server: RunningServer) -> user_tool_service_pb2_grpc.UserToolServiceStub:
    return user_tool_service_pb2_grpc.UserToolServiceStub(server.channel)


async def call_output(server: RunningServer, name: str, **arguments) -> tool_service_pb2.CallToolResponse:
    return await server.stub.CallTool(tool_service_pb2.CallToolRequest(name=name, arguments=schema_struct(arguments)))


async def refused(rpc, request, code: grpc.StatusCode, reason: str, metadata=()) -> str:
    """The message of the refusal `rpc(request)` must be, with its code and ErrorInfo reason."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await rpc(request, metadata=metadata)
    assert caught.value.code() == code, caught.value.details()
    info, _ = error_details(caught.value)
    assert info.reason == reason, caught.value.details()
    return caught.value.details() or ""


# --- the life of a user tool --------------------------------------------------------------------------------


async def test_create_call_update_restore_delete_through_the_stub(start_server):
    server = await start_server()
    stub = stub_of(server)
    created = (await stub.CreateUserTool(pb.CreateUserToolRequest(
        user_tool=greeter(tags=["demo"], timeout_seconds=5, enabled=False, version=9, shadowed_by="x")))).user_tool
    # The server's fields are the server's: a new tool is enabled at version 1, whatever the request said.
    assert (created.slug, created.version, created.enabled, created.shadowed_by) == ("greet_user", 1, True, "")
    assert created.category == "custom" and list(created.tags) == ["demo"] and created.timeout_seconds == 5
    assert created.create_time.seconds > 0 and created.update_time == created.create_time
    # Whole numbers of the schema come back as they went (a Struct carries doubles).
    assert json_format.MessageToDict(created.input_schema) == SCHEMA
    assert (await call_output(server, "greet_user", who="ann")).output == "hello ann\n"

    got = (await stub.GetUserTool(pb.GetUserToolRequest(slug="greet_user"))).user_tool
    assert got == created

    updated = (await stub.UpdateUserTool(pb.UpdateUserToolRequest(
        user_tool=pb.UserTool(slug="greet_user", script='echo "bye $TOOL_ARG_WHO"', description="ignored"),
        update_mask=field_mask_pb2.FieldMask(paths=["script"])))).user_tool
    assert updated.version == 2 and updated.description == "Greets someone."  # the mask kept it
    assert (await call_output(server, "greet_user", who="ann")).output == "bye ann\n"  # the next call runs v2

    versions = (await stub.ListUserToolVersions(pb.ListUserToolVersionsRequest(slug="greet_user"))).versions
    assert [(v.version, v.change) for v in versions] == [(2, "update"), (1, "create")]
    assert versions[1].script == 'echo "hello $TOOL_ARG_WHO"' and versions[0].changed_by == "anonymous"

    restored = (await stub.RestoreUserToolVersion(pb.RestoreUserToolVersionRequest(
        slug="greet_user", version=1))).user_tool
    assert restored.version == 3 and restored.script == created.script
    assert (await call_output(server, "greet_user", who="ann")).output == "hello ann\n"

    disabled = await stub.SetUserToolEnabled(pb.SetUserToolEnabledRequest(slug="greet_user", enabled=False))
    assert disabled.user_tool.enabled is False and disabled.user_tool.version == 3
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call_output(server, "greet_user", who="ann")
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    await stub.SetUserToolEnabled(pb.SetUserToolEnabledRequest(slug="greet_user", enabled=True))

    deleted = (await stub.DeleteUserTool(pb.DeleteUserToolRequest(slug="greet_user"))).user_tool
    assert deleted.version == 3
    await refused(stub.GetUserTool, pb.GetUserToolRequest(slug="greet_user"), grpc.StatusCode.NOT_FOUND,
                  "RESOURCE_NOT_FOUND")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call_output(server, "greet_user", who="ann")
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_list_user_tools_pages_by_slug(start_server):
    server = await start_server()
    stub = stub_of(server)
    for slug in ("tool_c", "tool_a", "tool_b"):
        await stub.CreateUserTool(pb.CreateUserToolRequest(user_tool=greeter(slug)))
    first = await stub.ListUserTools(pb.ListUserToolsRequest(page_size=2))
    assert [t.slug for t in first.user_tools] == ["tool_a", "tool_b"] and first.next_page_token
    second = await stub.ListUserTools(pb.ListUserToolsRequest(page_size=2, page_token=first.next_page_token))
    assert [t.slug for t in second.user_tools] == ["tool_c"] and second.next_page_token == ""
    assert second.user_tools[0].script  # the list carries whole tools
    await refused(stub.ListUserTools, pb.ListUserToolsRequest(page_size=-1), grpc.StatusCode.INVALID_ARGUMENT,
                  "INVALID_REQUEST")
    await refused(stub.ListUserTools, pb.ListUserToolsRequest(page_token="not-a-token"),
                  grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PAGE_TOKEN")


async def test_an_empty_mask_changes_only_the_fields_the_request_populates(start_server):
    # AIP-134: a client that sends only a script changes only the script.
    server = await start_server()
    stub = stub_of(server)
    created = (await stub.CreateUserTool(pb.CreateUserToolRequest(user_tool=greeter(
        tags=["old"], system_prompt="old prompt", name="Greeter", category="people", timeout_seconds=7,
        credentials=[])))).user_tool
    updated = (await stub.UpdateUserTool(pb.UpdateUserToolRequest(
        user_tool=pb.UserTool(slug="greet_user", script='echo "new $TOOL_ARG_WHO"')))).user_tool
    assert updated.version == 2 and updated.script == 'echo "new $TOOL_ARG_WHO"'
    unchanged = ("name", "description", "category", "system_prompt", "input_schema", "timeout_seconds", "tags",
                 "credentials", "enabled")
    assert {f: getattr(updated, f) for f in unchanged} == {f: getattr(created, f) for f in unchanged}
    assert (await call_output(server, "greet_user", who="ann")).output == "new ann\n"
    # Several populated fields, the schema among them; the rest kept.
    again = (await stub.UpdateUserTool(pb.UpdateUserToolRequest(user_tool=pb.UserTool(
        slug="greet_user", description="Says hi.", tags=["new"], input_schema=schema_struct({"type": "object"}))))
    ).user_tool
    assert (again.description, list(again.tags), json_format.MessageToDict(again.input_schema)) == \
        ("Says hi.", ["new"], {"type": "object"})
    assert (again.system_prompt, again.name, again.timeout_seconds) == ("old prompt", "Greeter", 7)
    versions = (await stub.ListUserToolVersions(pb.ListUserToolVersionsRequest(slug="greet_user"))).versions
    assert [v.version for v in versions] == [3, 2, 1]


async def test_an_empty_mask_on_a_request_that_sets_nothing_is_refused(start_server):
    server = await start_server()
    stub = stub_of(server)
    await stub.CreateUserTool(pb.CreateUserToolRequest(user_tool=greeter()))
    message = await refused(stub.UpdateUserTool, pb.UpdateUserToolRequest(user_tool=pb.UserTool(slug="greet_user")),
                            grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST")
    assert "sets no field" in message and "update_mask" in message
    assert (await stub.GetUserTool(pb.GetUserToolRequest(slug="greet_user"))).user_tool.version == 1


async def test_a_named_field_is_cleared_and_star_replaces_every_mutable_field(start_server):
    server = await start_server()
    stub = stub_of(server)
    await stub.CreateUserTool(pb.CreateUserToolRequest(user_tool=greeter(
        tags=["old"], system_prompt="old", name="Greeter", timeout_seconds=7)))
    # Named in the mask, an empty value clears the field (an empty mask could not say so).
    cleared = (await stub.UpdateUserTool(pb.UpdateUserToolRequest(
        user_tool=pb.UserTool(slug="greet_user"), update_mask=field_mask_pb2.FieldMask(paths=["tags"])))).user_tool
    assert list(cleared.tags) == [] and cleared.system_prompt == "old"
    star = (await stub.UpdateUserTool(pb.UpdateUserToolRequest(
        user_tool=pb.UserTool(slug="greet_user", description="Star.", script="echo star",
                              input_schema=schema_struct({"type": "object"})),
        update_mask=field_mask_pb2.FieldMask(paths=["*"])))).user_tool
    assert (star.version, star.description, star.script) == (3, "Star.", "echo star")
    # Every field the request left empty is empty now (the server's defaults where it has them).
    assert (star.system_prompt, star.name, star.timeout_seconds, list(star.tags), star.category) == \
        ("", "", 0, [], "custom")
    assert star.enabled is True  # not a mutable field: untouched


@pytest.mark.parametrize(("path", "hint"), [
    ("slug", "cannot change"), ("enabled", "SetUserToolEnabled"), ("version", "set by the server"),
    ("no_such_field", "name the fields among"), ("user_tool.script", "name the fields among"),
])
async def test_a_mask_naming_what_update_does_not_change_is_refused(start_server, path, hint):
    server = await start_server()
    stub = stub_of(server)
    await stub.CreateUserTool(pb.CreateUserToolRequest(user_tool=greeter()))
    message = await refused(stub.UpdateUserTool, pb.UpdateUserToolRequest(
        user_tool=pb.UserTool(slug="greet_user", script="echo changed"),
        update_mask=field_mask_pb2.FieldMask(paths=["script", path])), grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_REQUEST")
    assert hint in message and repr(path) in message
    assert (await stub.GetUserTool(pb.GetUserToolRequest(slug="greet_user"))).user_tool.version == 1  # unchanged


# --- refusals -----------------------------------------------------------------------------------------------


async def test_a_taken_slug_is_already_exists_with_one_message_for_every_kind_of_name(start_server):
    server = await start_server()
    stub = stub_of(server)
    await stub.CreateUserTool(pb.CreateUserToolRequest(user_tool=greeter()))
    messages = set()
    for slug in ("echo", "greet_user"):  # a built-in tool's name, a user tool's
        message = await refused(stub.CreateUserTool, pb.CreateUserToolRequest(user_tool=greeter(slug)),
                                grpc.StatusCode.ALREADY_EXISTS, "ALREADY_EXISTS")
        messages.add(message.replace(slug, "NAME"))
    assert len(messages) == 1, messages


@pytest.mark.parametrize("tool", [
    greeter("Bad-Slug"),
    greeter(input_schema=schema_struct({"type": "no-such-type"})),
    greeter(timeout_seconds=-1),
    greeter(timeout_seconds=math.nan),
    greeter(timeout_seconds=math.inf),
    greeter(credentials=["github"]),  # an anonymous caller may grant no credential
], ids=["slug", "schema", "negative-timeout", "nan-timeout", "infinite-timeout", "credential"])
async def test_a_tool_that_cannot_be_served_is_invalid_argument(start_server, tool):
    server = await start_server()
    stub = stub_of(server)
    await refused(stub.CreateUserTool, pb.CreateUserToolRequest(user_tool=tool), grpc.StatusCode.INVALID_ARGUMENT,
                  "INVALID_REQUEST")
    assert not (await stub.ListUserTools(pb.ListUserToolsRequest())).user_tools


async def test_a_schema_holding_nan_is_refused_before_the_core(start_server):
    server = await start_server()
    tool = greeter()
    tool.input_schema.fields["properties"].struct_value.fields["who"].struct_value.fields["maxLength"] \
        .number_value = math.nan
    message = await refused(stub_of(server).CreateUserTool, pb.CreateUserToolRequest(user_tool=tool),
                            grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST")
    assert "input_schema" in message and "NaN" in message


async def test_unknown_slugs_versions_and_conflicts_are_not_found(start_server):
    server = await start_server()
    stub = stub_of(server)
    await stub.CreateUserTool(pb.CreateUserToolRequest(user_tool=greeter()))
    for rpc, request in [
        (stub.GetUserTool, pb.GetUserToolRequest(slug="nothing_here")),
        (stub.DeleteUserTool, pb.DeleteUserToolRequest(slug="nothing_here")),
        (stub.UpdateUserTool, pb.UpdateUserToolRequest(user_tool=pb.UserTool(slug="nothing_here", script="x"),
                                                       update_mask=field_mask_pb2.FieldMask(paths=["script"]))),
        (stub.RestoreUserToolVersion, pb.RestoreUserToolVersionRequest(slug="greet_user", version=7)),
        (stub.SetUserToolEnabled, pb.SetUserToolEnabledRequest(slug="nothing_here", enabled=True)),
        (stub.DeleteToolConflict, pb.DeleteToolConflictRequest(tool_a="greet_user", tool_b="echo")),
    ]:
        await refused(rpc, request, grpc.StatusCode.NOT_FOUND, "RESOURCE_NOT_FOUND")


async def test_conflicts_are_listed_set_and_refuse_enabling_an_incompatible_pair(start_server):
    server = await start_server()
    stub = stub_of(server)
    seeded = (await stub.ListToolConflicts(pb.ListToolConflictsRequest())).conflicts
    assert {(c.tool_a, c.tool_b, c.type) for c in seeded} >= {("bash", "native:Bash", pb.CONFLICT_TYPE_EQUIVALENT)}
    await stub.CreateUserTool(pb.CreateUserToolRequest(user_tool=greeter("loud_echo")))
    await stub.SetUserToolEnabled(pb.SetUserToolEnabledRequest(slug="loud_echo", enabled=False))
    await refused(stub.SetToolConflict, pb.SetToolConflictRequest(conflict=pb.ToolConflict(
        tool_a="loud_echo", tool_b="echo")), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST")
    stored = (await stub.SetToolConflict(pb.SetToolConflictRequest(conflict=pb.ToolConflict(
        tool_a="loud_echo", tool_b="echo", type=pb.CONFLICT_TYPE_INCOMPATIBLE,
        resolution_hint="use echo")))).conflict
    assert (stored.tool_a, stored.tool_b, stored.type) == ("echo", "loud_echo", pb.CONFLICT_TYPE_INCOMPATIBLE)
    message = await refused(stub.SetUserToolEnabled, pb.SetUserToolEnabledRequest(slug="loud_echo", enabled=True),
                            grpc.StatusCode.FAILED_PRECONDITION, "FAILED_PRECONDITION")
    assert "'echo'" in message and "use echo" in message

    await stub.SetToolConflict(pb.SetToolConflictRequest(conflict=pb.ToolConflict(
        tool_a="echo", tool_b="loud_echo", type=pb.CONFLICT_TYPE_EQUIVALENT, resolution_hint="same thing")))
    enabled = await stub.SetUserToolEnabled(pb.SetUserToolEnabledRequest(slug="loud_echo", enabled=True))
    assert [(c.tool_a, c.tool_b, c.type, c.resolution_hint) for c in enabled.conflicts] == \
        [("echo", "loud_echo", pb.CONFLICT_TYPE_EQUIVALENT, "same thing")]
    removed = (await stub.DeleteToolConflict(pb.DeleteToolConflictRequest(tool_a="loud_echo", tool_b="echo")))
    assert removed.conflict.type == pb.CONFLICT_TYPE_EQUIVALENT
    first = await stub.ListToolConflicts(pb.ListToolConflictsRequest(page_size=1))
    assert len(first.conflicts) == 1 and first.next_page_token


# --- rights -------------------------------------------------------------------------------------------------

ROLES = ("caller", "toolsmith", "admin")


def auth_file_text(tokens: dict[str, str]) -> str:
    return """\
roles:
  caller:
    call: {tools: ["*"]}
  toolsmith:
    manage_tools: true
    call: {tools: ["*"]}
  admin:
    admin: true
    call: {tools: ["*"]}
tokens:
""" + "".join(f"  - {{name: {role}-token, sha256: {hash_token(token)}, roles: [{role}]}}\n"
              for role, token in tokens.items())


@pytest.fixture
async def authenticated(start_server, tmp_path) -> tuple[RunningServer, dict[str, str]]:
    tokens = {role: secrets.token_urlsafe(32) for role in ROLES}
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text(auth_file_text(tokens))
    return await start_server(auth_file=str(auth_file)), tokens


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


def every_rpc(stub: user_tool_service_pb2_grpc.UserToolServiceStub, slug: str) -> list[tuple[object, object]]:
    return [
        (stub.CreateUserTool, pb.CreateUserToolRequest(user_tool=greeter(slug))),
        (stub.GetUserTool, pb.GetUserToolRequest(slug=slug)),
        (stub.ListUserTools, pb.ListUserToolsRequest()),
        (stub.UpdateUserTool, pb.UpdateUserToolRequest(user_tool=pb.UserTool(slug=slug, script="echo x"),
                                                       update_mask=field_mask_pb2.FieldMask(paths=["script"]))),
        (stub.ListUserToolVersions, pb.ListUserToolVersionsRequest(slug=slug)),
        (stub.RestoreUserToolVersion, pb.RestoreUserToolVersionRequest(slug=slug, version=1)),
        (stub.SetUserToolEnabled, pb.SetUserToolEnabledRequest(slug=slug, enabled=True)),
        (stub.ListToolConflicts, pb.ListToolConflictsRequest()),
        (stub.SetToolConflict, pb.SetToolConflictRequest(conflict=pb.ToolConflict(
            tool_a=slug, tool_b="echo", type=pb.CONFLICT_TYPE_EQUIVALENT))),
        (stub.DeleteToolConflict, pb.DeleteToolConflictRequest(tool_a=slug, tool_b="echo")),
        (stub.DeleteUserTool, pb.DeleteUserToolRequest(slug=slug)),
    ]


def malformed_rpcs(stub: user_tool_service_pb2_grpc.UserToolServiceStub, slug: str) -> list[tuple[object, object]]:
    """A request to every RPC that the server would refuse as malformed (INVALID_ARGUMENT), were the caller allowed
    to send it: NaN numbers, a schema holding NaN, bad masks, negative page sizes, tokens not issued, no type."""
    nan_schema = schema_struct({"type": "object"})
    nan_schema.fields["maxProperties"].number_value = math.nan
    return [
        (stub.CreateUserTool, pb.CreateUserToolRequest(user_tool=greeter(
            slug, timeout_seconds=math.nan, input_schema=nan_schema))),
        (stub.GetUserTool, pb.GetUserToolRequest(slug="Not A Slug\x00")),
        (stub.ListUserTools, pb.ListUserToolsRequest(page_size=-1, page_token="not-a-token")),
        (stub.UpdateUserTool, pb.UpdateUserToolRequest(
            user_tool=pb.UserTool(slug=slug, timeout_seconds=math.inf, input_schema=nan_schema),
            update_mask=field_mask_pb2.FieldMask(paths=["slug", "no_such_field", "timeout_seconds"]))),
        (stub.ListUserToolVersions, pb.ListUserToolVersionsRequest(slug=slug, page_size=-5, page_token="%%%")),
        (stub.RestoreUserToolVersion, pb.RestoreUserToolVersionRequest(slug=slug, version=-1)),
        (stub.SetUserToolEnabled, pb.SetUserToolEnabledRequest(slug="../" * 1000, enabled=True)),
        (stub.ListToolConflicts, pb.ListToolConflictsRequest(page_size=-1, page_token="not-a-token")),
        (stub.SetToolConflict, pb.SetToolConflictRequest(conflict=pb.ToolConflict(
            tool_a=slug, tool_b=slug, type=pb.CONFLICT_TYPE_UNSPECIFIED, resolution_hint="x" * 100_000))),
        (stub.DeleteToolConflict, pb.DeleteToolConflictRequest(tool_a="\x00", tool_b="")),
        (stub.DeleteUserTool, pb.DeleteUserToolRequest(slug="")),
    ]


@pytest.mark.parametrize("requests", [every_rpc, malformed_rpcs])
def test_the_rights_tests_cover_every_rpc_of_the_service(requests):
    service = pb.DESCRIPTOR.services_by_name["UserToolService"]
    stub = user_tool_service_pb2_grpc.UserToolServiceStub(grpc.insecure_channel("127.0.0.1:1"))
    called = {rpc._method.decode().rsplit("/", 1)[1] for rpc, _ in requests(stub, "x")}
    assert called == {method.name for method in service.methods}


async def test_a_malformed_request_is_invalid_argument_for_a_caller_with_the_right(authenticated):
    # The other half of the next test: these requests are refused for what they hold when the right is there.
    server, tokens = authenticated
    stub = stub_of(server)
    await stub.CreateUserTool(pb.CreateUserToolRequest(user_tool=greeter("kept_tool")),
                              metadata=bearer(tokens["admin"]))
    for rpc, request in malformed_rpcs(stub, "kept_tool"):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await rpc(request, metadata=bearer(tokens["toolsmith"]))
        assert caught.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND), \
            (rpc, caught.value.details())


async def test_a_caller_without_manage_tools_is_denied_before_its_request_is_looked_at(
        authenticated, caplog: pytest.LogCaptureFixture):
    server, tokens = authenticated
    stub = stub_of(server)
    await stub.CreateUserTool(pb.CreateUserToolRequest(user_tool=greeter("kept_tool")),
                              metadata=bearer(tokens["admin"]))
    caplog.set_level(logging.INFO, logger="toolhost.audit")
    for rpc, request in malformed_rpcs(stub, "kept_tool"):
        message = await refused(rpc, request, grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED",
                                bearer(tokens["caller"]))
        assert "manage_tools" in message and "caller-token" in message
    # The refused changes are audited as refusals of the right, under the names the requests gave.
    refusals = [(r.audit["tool"], r.audit["outcome"]) for r in caplog.records  # type: ignore[attr-defined]
                if hasattr(r, "audit") and r.audit["caller"] == "caller-token"]
    assert ("kept_tool", "CREATE_REFUSED:PERMISSION_DENIED") in refusals
    assert ("kept_tool", "UPDATE_REFUSED:PERMISSION_DENIED") in refusals
    assert ("kept_tool~kept_tool", "CONFLICT_SET_REFUSED:PERMISSION_DENIED") in refusals
    assert {outcome.split(":")[1] for _, outcome in refusals} == {"PERMISSION_DENIED"}
    tool = (await stub.GetUserTool(pb.GetUserToolRequest(slug="kept_tool"), metadata=bearer(tokens["admin"])))
    assert tool.user_tool.version == 1


async def test_a_caller_without_manage_tools_is_denied_every_rpc(authenticated):
    server, tokens = authenticated
    stub = stub_of(server)
    await stub.CreateUserTool(pb.CreateUserToolRequest(user_tool=greeter("kept_tool")),
                              metadata=bearer(tokens["admin"]))
    for rpc, request in every_rpc(stub, "kept_tool"):
        message = await refused(rpc, request, grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED",
                                bearer(tokens["caller"]))
        assert "manage_tools" in message
    # Nothing changed: the tool is at version 1, and no conflict names it.
    tool = (await stub.GetUserTool(pb.GetUserToolRequest(slug="kept_tool"), metadata=bearer(tokens["admin"])))
    assert tool.user_tool.version == 1 and tool.user_tool.enabled
    conflicts = await stub.ListToolConflicts(pb.ListToolConflictsRequest(), metadata=bearer(tokens["admin"]))
    assert all("kept_tool" not in (c.tool_a, c.tool_b) for c in conflicts.conflicts)


@pytest.mark.parametrize("role", ["toolsmith", "admin"])
async def test_manage_tools_and_admin_may_call_every_rpc(authenticated, role):
    server, tokens = authenticated
    stub = stub_of(server)
    for rpc, request in every_rpc(stub, f"made_by_{role}"):
        await rpc(request, metadata=bearer(tokens[role]))
    listed = await stub.ListUserTools(pb.ListUserToolsRequest(), metadata=bearer(tokens[role]))
    assert list(listed.user_tools) == []  # the last RPC deleted it


async def test_an_unauthenticated_request_is_refused_before_anything(authenticated):
    server, _ = authenticated
    stub = stub_of(server)
    await refused(stub.ListUserTools, pb.ListUserToolsRequest(), grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED")
    await refused(stub.CreateUserTool, pb.CreateUserToolRequest(user_tool=greeter()),
                  grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED", bearer("not-a-token-" * 4))


async def test_the_changer_is_recorded_in_the_versions(authenticated):
    server, tokens = authenticated
    stub = stub_of(server)
    await stub.CreateUserTool(pb.CreateUserToolRequest(user_tool=greeter()), metadata=bearer(tokens["toolsmith"]))
    await stub.RestoreUserToolVersion(pb.RestoreUserToolVersionRequest(slug="greet_user", version=1),
                                      metadata=bearer(tokens["admin"]))
    versions = (await stub.ListUserToolVersions(pb.ListUserToolVersionsRequest(slug="greet_user"),
                                                metadata=bearer(tokens["admin"]))).versions
    assert [(v.changed_by, v.change) for v in versions] == \
        [("admin-token", "restore of version 1"), ("toolsmith-token", "create")]


# --- the service as a whole ---------------------------------------------------------------------------------


async def test_health_and_reflection_name_the_service(start_server):
    server = await start_server()
    health = health_pb2_grpc.HealthStub(server.channel)
    answer = await health.Check(health_pb2.HealthCheckRequest(service=SERVICE))
    assert answer.status == health_pb2.HealthCheckResponse.SERVING
    reflection = reflection_pb2_grpc.ServerReflectionStub(server.channel)
    async for response in reflection.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(
            list_services="")])):
        names = {service.name for service in response.list_services_response.service}
        break
    assert SERVICE in names


async def test_every_rpc_is_counted_in_the_metrics(start_server):
    server = await start_server()
    await stub_of(server).ListUserTools(pb.ListUserToolsRequest())
    samples = [s for metric in server.toolhost.metrics.registry.collect() for s in metric.samples
               if s.name == "toolhost_rpc_requests_total" and s.labels.get("method") == f"{SERVICE}/ListUserTools"]
    assert [(s.labels["code"], s.value) for s in samples] == [("OK", 1.0)]


# --- the message limit --------------------------------------------------------------------------------------

MESSAGE_LIMIT = 1024 * 1024


async def test_a_page_of_big_tools_stays_under_the_message_limit(start_server):
    # Six tools of 200 KB scripts are 1.2 MB: one page of them would not fit in a message of 1 MiB.
    server = await start_server(max_message_bytes=MESSAGE_LIMIT)
    stub = stub_of(server)
    scripts = {f"big_{n}": f"# {n}\n" + "echo padding\n" * (200 * 1024 // 13) for n in range(6)}
    for slug, script in scripts.items():
        await stub.CreateUserTool(pb.CreateUserToolRequest(user_tool=greeter(slug, script=script)))
    pages, token = [], ""
    while True:
        page = await stub.ListUserTools(pb.ListUserToolsRequest(page_size=1000, page_token=token))
        assert page.ByteSize() <= MESSAGE_LIMIT // 2 + 1024
        pages.append([tool.slug for tool in page.user_tools])
        token = page.next_page_token
        if not token:
            break
    # Cut short by bytes, not by count, and nothing lost or repeated: the scripts come whole.
    assert len(pages) > 1 and all(pages)
    assert [slug for page in pages for slug in page] == sorted(scripts)
    tool = (await stub.ListUserTools(pb.ListUserToolsRequest(page_size=1))).user_tools[0]
    assert tool.script == scripts["big_0"]


async def test_small_tools_still_fill_the_page_size(start_server):
    server = await start_server(max_message_bytes=MESSAGE_LIMIT)
    stub = stub_of(server)
    for n in range(5):
        await stub.CreateUserTool(pb.CreateUserToolRequest(user_tool=greeter(f"small_{n}")))
    page = await stub.ListUserTools(pb.ListUserToolsRequest(page_size=5))
    assert [t.slug for t in page.user_tools] == [f"small_{n}" for n in range(5)] and page.next_page_token == ""


# --- the store's errors -------------------------------------------------------------------------------------
# Through a real server whose database is stopped: tests/faults/test_fault_user_tool_store.py. A commit cut off
# mid-way cannot be caused on purpose, so its mapping is checked on the status itself.


@pytest.mark.parametrize(("error", "reason", "advice"), [
    (StoreUnavailableError, "STORE_UNAVAILABLE", "retry later"),
    (StoreError, "STORE_UNAVAILABLE", "retry later"),
    (StoreCommitUnknownError, "STORE_OUTCOME_UNKNOWN", "read it back before retrying"),
])
def test_a_store_error_is_unavailable_with_a_reason_to_act_on_and_no_address(error, reason, advice):
    where = "postgresql+psycopg://toolhost:***@db.internal.example:5432/toolhost"
    status = status_of(error(f"cannot use the database at {where}"), "CreateUserTool")
    assert status.code == grpc.StatusCode.UNAVAILABLE
    assert advice in status.details and "db.internal.example" not in status.details
    [details] = [value for key, value in status.trailing_metadata if key == "grpc-status-details-bin"]
    info = error_details_pb2.ErrorInfo()
    [packed] = status_pb2.Status.FromString(details).details
    packed.Unpack(info)
    assert (info.reason, info.domain, info.metadata["method"]) == (reason, "toolhost", "CreateUserTool")
    assert info.metadata["incident"] in status.details
