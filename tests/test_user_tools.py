"""User tools: made while the server runs, kept in the store with their versions (the whole editable record, the
last MAX_VERSIONS_PER_TOOL of them), served like any tool (CallTool runs the stored script), shadowed by a catalog
tool that takes the name later, and seen by every server on the same PostgreSQL database through its WatchTools
stream; at most MAX_USER_TOOLS; damaged rows and failed refreshes that leave the rest serving; on SQLite and on
PostgreSQL."""

from __future__ import annotations

import dataclasses
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
from sqlalchemy import URL, insert, select

from toolhost.v1 import tool_pb2, tool_service_pb2, tool_service_pb2_grpc
from toolhost_server.auth import ANONYMOUS, AuthMethod, Caller, Permissions
from toolhost_server.auth.auth_file import AuthFileError, read_auth_file
from toolhost_server.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    InvalidRequestError,
    PermissionDeniedError,
    ResourceNotFoundError,
)
from toolhost_server.model import ToolSource
from toolhost_server.store.database import Store
from toolhost_server.store.schema import tool_conflicts, user_tools
from toolhost_server.user_tools import propagation
from toolhost_server.user_tools import table as table_module
from toolhost_server.user_tools.records import UserToolRecord

from helpers.calls import call
from helpers.catalogs import write_tool
from helpers.servers import RunningServer
from helpers.waiting import within
from postgres_cluster import DATABASES

GREETING_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
MANAGER = Caller("toolsmith", frozenset({"toolsmith"}), AuthMethod.TOKEN, Permissions(manage_tools=True))
VIEWER = Caller("viewer", frozenset({"viewer"}), AuthMethod.TOKEN, Permissions())


def user_tool(slug: str = "greet_user", script: str = 'echo "hello $TOOL_ARG_NAME"', **fields: Any) -> UserToolRecord:
    """A tool to create: its version and times are set by the store."""
    now = datetime.now(UTC)
    values: dict[str, Any] = {
        "slug": slug, "name": "Greet a user", "description": "Says hello to the user it is given.",
        "category": "", "system_prompt": "Call greet_user with the user's name.", "input_schema": GREETING_SCHEMA,
        "script": script, "enabled": True, "timeout_seconds": None, "tags": ("greeting",), "credentials": (),
        "version": 0, "created_at": now, "updated_at": now, "shadowed_by": ""}
    values.update(fields)
    return UserToolRecord(**values)


@pytest.fixture(params=DATABASES)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> URL | None:
    """None for the data dir's SQLite file, or a new database of the test session's PostgreSQL."""
    if request.param == "sqlite":
        return None
    url: URL = request.getfixturevalue("postgres_url")
    return url


# The production default on a root server: user tools run as nobody (conftest's servers keep root, which would
# leave user tools unserved: tests/security/test_security_user_tools.py covers that).
AS_NOBODY = {"process_user": "nobody"}


def store_settings(database: URL | None) -> dict[str, str]:
    if database is None:
        return AS_NOBODY
    return {**AS_NOBODY, "database_url": database.render_as_string(hide_password=False)}


async def output_of(server: RunningServer, name: str, /, **arguments: Any) -> str:
    response = await call(server, name, arguments)
    assert response.success, response.error
    return str(response.output)


async def test_a_created_tool_is_served_and_calltool_runs_its_script(start_server, database: URL | None):
    server = await start_server(**store_settings(database))
    tools = server.toolhost.user_tools

    created = await tools.create(MANAGER, user_tool())
    assert (created.version, created.category, created.enabled, created.shadowed_by) == (1, "custom", True, "")

    assert await output_of(server, "greet_user", name="world") == "hello world\n"
    listed = await server.stub.GetTool(tool_service_pb2.GetToolRequest(name="greet_user"))
    assert listed.tool.source == tool_pb2.TOOL_SOURCE_USER
    assert listed.tool.category == "custom"
    assert server.toolhost.registry.snapshot.get("greet_user").spec.source is ToolSource.USER

    assert await tools.get(MANAGER, "greet_user") == created
    page, token = await tools.list(MANAGER, 0, "")
    assert ([tool.slug for tool in page], token) == (["greet_user"], "")

    with pytest.raises(grpc.aio.AioRpcError) as refused:  # the schema is checked as a catalog tool's
        await call(server, "greet_user", {})
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_an_update_runs_at_the_next_call_and_a_restore_makes_a_new_version_equal_to_an_old_one(
        start_server, database: URL | None):
    server = await start_server(**store_settings(database))
    tools = server.toolhost.user_tools
    await tools.create(MANAGER, user_tool())

    updated = await tools.update(MANAGER, "greet_user", {"script": 'echo "goodbye $TOOL_ARG_NAME"',
                                                         "system_prompt": "Say goodbye."})
    assert updated.version == 2
    assert await output_of(server, "greet_user", name="world") == "goodbye world\n"

    restored = await tools.restore(ANONYMOUS, "greet_user", 1)
    assert (restored.version, restored.script, restored.system_prompt) == (
        3, 'echo "hello $TOOL_ARG_NAME"', "Call greet_user with the user's name.")
    assert await output_of(server, "greet_user", name="again") == "hello again\n"

    versions, token = await tools.versions(MANAGER, "greet_user", 0, "")
    assert token == ""
    assert [(v.version, v.change, v.changed_by) for v in versions] == [
        (3, "restore of version 1", "anonymous"), (2, "update", "toolsmith"), (1, "create", "toolsmith")]
    assert versions[0].script == versions[2].script and versions[0].input_schema == GREETING_SCHEMA

    # Pages of one, newest first, then the end.
    first, token = await tools.versions(MANAGER, "greet_user", 1, "")
    second, token = await tools.versions(MANAGER, "greet_user", 1, token)
    assert [first[0].version, second[0].version] == [3, 2] and token
    with pytest.raises(ResourceNotFoundError, match="has no version 7"):
        await tools.restore(MANAGER, "greet_user", 7)


async def test_a_disabled_tool_is_not_found_until_enabled_again(start_server, database: URL | None):
    server = await start_server(**store_settings(database))
    tools = server.toolhost.user_tools
    await tools.create(MANAGER, user_tool())

    disabled, conflicts = await tools.set_enabled(MANAGER, "greet_user", False)
    assert (disabled.enabled, disabled.version, conflicts) == (False, 1, [])
    for refused_call in (call(server, "greet_user", name="x"),
                         server.stub.GetTool(tool_service_pb2.GetToolRequest(name="greet_user"))):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await refused_call
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    assert (await tools.get(MANAGER, "greet_user")).enabled is False

    await tools.set_enabled(MANAGER, "greet_user", True)
    assert await output_of(server, "greet_user", name="back") == "hello back\n"


async def test_a_deleted_tool_and_its_versions_are_gone(start_server, database: URL | None):
    server = await start_server(**store_settings(database))
    tools = server.toolhost.user_tools
    await tools.create(MANAGER, user_tool())
    await tools.update(MANAGER, "greet_user", {"description": "Greets."})

    deleted = await tools.delete(MANAGER, "greet_user")
    assert deleted.version == 2
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call(server, "greet_user", name="x")
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    for gone in (tools.get(MANAGER, "greet_user"), tools.versions(MANAGER, "greet_user", 0, ""),
                 tools.delete(MANAGER, "greet_user")):
        with pytest.raises(ResourceNotFoundError, match="there is no user tool 'greet_user'"):
            await gone
    # The slug is free again, and starts from version 1.
    assert (await tools.create(MANAGER, user_tool())).version == 1
    assert [v.version for v in (await tools.versions(MANAGER, "greet_user", 0, ""))[0]] == [1]


async def test_every_taken_name_is_refused_with_the_same_message(start_server, tmp_path: Path):
    catalog = tmp_path / "catalog"
    write_tool(catalog, "from_catalog")
    server = await start_server(catalog_dirs=(catalog,), **AS_NOBODY)  # no workspace: the built-in `bash` is not served
    tools = server.toolhost.user_tools
    await tools.create(MANAGER, user_tool("mine"))
    assert "bash" not in server.toolhost.registry.snapshot

    messages = {}
    for slug in ("echo", "bash", "from_catalog", "mine"):
        with pytest.raises(AlreadyExistsError) as refused:
            await tools.create(MANAGER, user_tool(slug))
        messages[slug] = str(refused.value).replace(repr(slug), "NAME")
    assert set(messages.values()) == {"the slug NAME is already the name of a tool; choose another slug"}
    assert await output_of(server, "echo", text="still the built-in") == "still the built-in"


async def test_a_catalog_tool_that_takes_the_name_later_wins_and_the_user_tool_is_reported_shadowed(
        start_server, tmp_path: Path):
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    server = await start_server(catalog_dirs=(catalog,), **AS_NOBODY)
    tools = server.toolhost.user_tools
    await tools.create(MANAGER, user_tool())

    path = write_tool(catalog, "greet_user")
    report = await server.toolhost.reload(ANONYMOUS, "test")
    [problem] = [p for p in report.problems if "shadows the user tool" in p.reason]
    assert problem.file == str(path)
    assert server.toolhost.registry.snapshot.get("greet_user").spec.source is ToolSource.CATALOG
    assert await output_of(server, "greet_user", name="catalog") != "hello catalog\n"
    shadowed = await tools.get(MANAGER, "greet_user")
    assert shadowed.shadowed_by == "catalog"  # the source, never the file: the caller may not see that tool
    assert [tool.shadowed_by for tool in (await tools.list(MANAGER, 0, ""))[0]] == [shadowed.shadowed_by]

    path.unlink()
    report = await server.toolhost.reload(ANONYMOUS, "test")
    assert not [p for p in report.problems if "shadows" in p.reason]
    assert (await tools.get(MANAGER, "greet_user")).shadowed_by == ""
    assert await output_of(server, "greet_user", name="again") == "hello again\n"


def auth_file_callers(tmp_path: Path) -> dict[str, Caller]:
    """The callers of an auth file with each form of `manage_tools`, as the server would authenticate them."""
    path = tmp_path / "auth.yaml"
    path.write_text("""\
roles:
  smith: {manage_tools: {credentials: [github]}}
  maker: {manage_tools: true}
  reader: {list: {tools: ["*"]}, call: {tools: ["*"]}}
  boss: {admin: true}
""")
    table = read_auth_file(path)
    return {name: Caller(name, frozenset({name}), AuthMethod.TOKEN, table.roles[name])
            for name in ("smith", "maker", "reader", "boss")}


async def test_a_tool_may_declare_only_the_credentials_its_creators_roles_grant(start_server, tmp_path: Path):
    server = await start_server(**AS_NOBODY)
    tools = server.toolhost.user_tools
    callers = auth_file_callers(tmp_path)

    created = await tools.create(callers["smith"], user_tool("uses_github", credentials=("github",)))
    assert created.credentials == ("github",)
    for caller, credentials in ((callers["smith"], ("vault",)), (callers["maker"], ("github",)),
                                (callers["boss"], ("github",)), (ANONYMOUS, ("github",))):
        with pytest.raises(InvalidRequestError, match=r"may not give a user tool these credentials.*manage_tools"):
            await tools.create(caller, user_tool("wants_more", credentials=credentials))
    with pytest.raises(ResourceNotFoundError):
        await tools.get(ANONYMOUS, "wants_more")


async def test_callers_without_the_right_are_refused_every_method_and_the_refusal_is_audited(
        start_server, tmp_path: Path, caplog: pytest.LogCaptureFixture):
    server = await start_server(**AS_NOBODY)
    tools = server.toolhost.user_tools
    callers = auth_file_callers(tmp_path)
    await tools.create(callers["maker"], user_tool())
    assert (await tools.get(callers["boss"], "greet_user")).slug == "greet_user"  # admin implies the right

    caplog.set_level(logging.INFO, logger="toolhost.audit")
    reader = callers["reader"]
    for refused_call in (tools.create(reader, user_tool("other")), tools.get(reader, "greet_user"),
                         tools.list(reader, 0, ""), tools.update(reader, "greet_user", {"script": "id"}),
                         tools.delete(reader, "greet_user"), tools.versions(reader, "greet_user", 0, ""),
                         tools.restore(reader, "greet_user", 1), tools.set_enabled(reader, "greet_user", False)):
        with pytest.raises(PermissionDeniedError, match="needs the admin role or a role with `manage_tools: true`"):
            await refused_call
    assert await output_of(server, "greet_user", name="unchanged") == "hello unchanged\n"
    outcomes = [(r.audit["caller"], r.audit["tool"], r.audit["outcome"]) for r in caplog.records  # type: ignore[attr-defined]
                if hasattr(r, "audit")]
    assert [outcome for caller, _, outcome in outcomes if caller == "reader"] == [
        "CREATE_REFUSED:PERMISSION_DENIED", "UPDATE_REFUSED:PERMISSION_DENIED", "DELETE_REFUSED:PERMISSION_DENIED",
        "RESTORE_REFUSED:PERMISSION_DENIED", "DISABLE_REFUSED:PERMISSION_DENIED"]


async def test_every_change_is_audited_with_its_caller_and_action(start_server, caplog: pytest.LogCaptureFixture):
    server = await start_server(**AS_NOBODY)
    tools = server.toolhost.user_tools
    caplog.set_level(logging.INFO, logger="toolhost.audit")
    await tools.create(MANAGER, user_tool())
    await tools.update(MANAGER, "greet_user", {"script": "echo v2", "tags": ["x"]})
    await tools.restore(ANONYMOUS, "greet_user", 1)
    await tools.set_enabled(MANAGER, "greet_user", False)
    await tools.set_enabled(MANAGER, "greet_user", True)
    with pytest.raises(AlreadyExistsError):
        await tools.create(MANAGER, user_tool())
    await tools.delete(MANAGER, "greet_user")

    audited = [(r.audit["caller"], r.audit["tool"], r.audit["outcome"], r.audit["argument_keys"])  # type: ignore[attr-defined]
               for r in caplog.records if hasattr(r, "audit")]
    assert audited == [
        ("toolsmith", "greet_user", "CREATED", []), ("toolsmith", "greet_user", "UPDATED", ["script", "tags"]),
        ("anonymous", "greet_user", "RESTORED", []), ("toolsmith", "greet_user", "DISABLED", []),
        ("toolsmith", "greet_user", "ENABLED", []), ("toolsmith", "greet_user", "CREATE_REFUSED:ALREADY_EXISTS", []),
        ("toolsmith", "greet_user", "DELETED", [])]


@pytest.mark.parametrize(("fields", "message"), [
    ({"slug": "Greet"}, r"slug 'Greet' must match"),
    ({"slug": "a" * 65}, r"must match \^\[a-z\]"),
    ({"slug": "_x"}, r"must match"),
    ({"description": ""}, r"description.*required"),
    ({"script": "  \n"}, r"script is required"),
    ({"input_schema": {"type": "string"}}, r"input_schema must describe an object"),
    ({"input_schema": {"type": "object", "properties": {"n": {"type": "nonsense"}}}}, r"input_schema"),
    ({"timeout_seconds": -1.0}, r"timeout_seconds must be a positive"),
    ({"tags": ("",)}, r"tags"),
    ({"credentials": ("Not-A-Name",)}, r"credentials"),
])
async def test_an_unusable_tool_is_invalid_argument_saying_what_to_fix(start_server, fields: dict[str, Any],
                                                                        message: str):
    server = await start_server(**AS_NOBODY)
    with pytest.raises(InvalidRequestError, match=message):
        await server.toolhost.user_tools.create(MANAGER, user_tool(**fields))
    assert (await server.toolhost.user_tools.list(MANAGER, 0, ""))[0] == []


async def test_list_pages_by_slug(start_server):
    server = await start_server(**AS_NOBODY)
    tools = server.toolhost.user_tools
    for slug in ("c_tool", "a_tool", "b_tool"):
        await tools.create(MANAGER, user_tool(slug))
    first, token = await tools.list(MANAGER, 2, "")
    second, end = await tools.list(MANAGER, 2, token)
    assert ([t.slug for t in first], [t.slug for t in second], end) == (["a_tool", "b_tool"], ["c_tool"], "")
    with pytest.raises(InvalidRequestError, match="page_size must not be negative"):
        await tools.list(MANAGER, -1, "")
    with pytest.raises(Exception, match="page_token"):
        await tools.versions(MANAGER, "a_tool", 0, token)  # a token of another list


async def test_a_new_database_starts_with_the_seeded_conflicts(start_server, database: URL | None, tmp_path: Path):
    server = await start_server(**store_settings(database))
    store: Store = server.toolhost.user_tools.table.store
    with store.begin() as connection:
        rows = connection.execute(select(tool_conflicts.c.tool_a, tool_conflicts.c.tool_b, tool_conflicts.c.type)
                                  .order_by(tool_conflicts.c.tool_a)).all()
    assert [tuple(row) for row in rows] == [
        ("bash", "native:Bash", "equivalent"), ("edit", "native:Edit", "equivalent"),
        ("glob", "native:Glob", "equivalent"), ("grep", "native:Grep", "equivalent"),
        ("read", "native:Read", "equivalent")]


async def next_change(stream: Any) -> tool_service_pb2.WatchToolsResponse:
    change: tool_service_pb2.WatchToolsResponse = await within(stream.read(), "the next WatchTools event")
    return change


@pytest.fixture
def no_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    """Polling off: only PostgreSQL's notifications (and the catch-up after listening again) can bring a change."""
    monkeypatch.setattr(propagation, "POLL_SECONDS", 3600.0)
    monkeypatch.setattr(propagation, "RECONNECT_SECONDS", 0.2)


@pytest.mark.slow
async def test_a_second_server_on_the_same_postgresql_sees_each_change_through_watchtools(
        start_server, postgres_url: URL, no_polling: None):
    first = await start_server(**store_settings(postgres_url))
    second = await start_server(**store_settings(postgres_url))
    stream = tool_service_pb2_grpc.ToolServiceStub(second.channel).WatchTools(tool_service_pb2.WatchToolsRequest())
    assert "greet_user" not in (await next_change(stream)).added
    tools = first.toolhost.user_tools

    await tools.create(MANAGER, user_tool())
    assert list((await next_change(stream)).added) == ["greet_user"]
    assert await output_of(second, "greet_user", name="replica") == "hello replica\n"

    await tools.update(MANAGER, "greet_user", {"script": 'echo "v2 $TOOL_ARG_NAME"'})
    assert list((await next_change(stream)).changed) == ["greet_user"]
    assert await output_of(second, "greet_user", name="replica") == "v2 replica\n"

    await tools.set_enabled(MANAGER, "greet_user", False)
    assert list((await next_change(stream)).removed) == ["greet_user"]
    await tools.set_enabled(MANAGER, "greet_user", True)
    assert list((await next_change(stream)).added) == ["greet_user"]

    await tools.delete(MANAGER, "greet_user")
    assert list((await next_change(stream)).removed) == ["greet_user"]
    stream.cancel()


@pytest.mark.slow
async def test_a_second_server_catches_up_after_its_listening_connection_is_cut(
        start_server, postgres_url: URL, postgres_cluster, no_polling: None):
    first = await start_server(**store_settings(postgres_url))
    second = await start_server(**store_settings(postgres_url))
    stream = tool_service_pb2_grpc.ToolServiceStub(second.channel).WatchTools(tool_service_pb2.WatchToolsRequest())
    await next_change(stream)
    # Every listening connection of the database is cut, as a failover or an idle-cutting proxy would.
    postgres_cluster.execute(
        f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{postgres_url.database}' "
        "AND application_name = 'toolhost-user-tools'")
    await first.toolhost.user_tools.create(MANAGER, user_tool())
    assert list((await next_change(stream)).added) == ["greet_user"]
    stream.cancel()


async def test_a_second_server_on_the_same_sqlite_file_sees_a_change_by_polling(
        start_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(propagation, "POLL_SECONDS", 0.05)
    data = tmp_path / "shared-data"
    first = await start_server(data_dir=str(data), **AS_NOBODY)
    second = await start_server(data_dir=str(data), **AS_NOBODY)
    stream = tool_service_pb2_grpc.ToolServiceStub(second.channel).WatchTools(tool_service_pb2.WatchToolsRequest())
    await next_change(stream)
    await first.toolhost.user_tools.create(MANAGER, user_tool())
    assert list((await next_change(stream)).added) == ["greet_user"]
    assert await output_of(second, "greet_user", name="poll") == "hello poll\n"
    stream.cancel()


def test_a_record_is_the_proto_user_tools_fields():
    fields = {field.name for field in dataclasses.fields(UserToolRecord)}
    assert fields == {"slug", "name", "description", "category", "system_prompt", "input_schema", "script",
                      "enabled", "timeout_seconds", "tags", "credentials", "version", "created_at", "updated_at",
                      "shadowed_by"}


@pytest.mark.parametrize(("role", "reason"), [
    ("manage_tools: yes please", "manage_tools must be true, false or a mapping"),
    ("manage_tools: {credentials: [Bad_Name]}", "credential"),
    ("manage_tools: {creds: [github]}", "unknown key 'creds'"),
    ("manage_tools: {credentials: github}", "must be a list"),
])
def test_a_bad_manage_tools_entry_stops_the_auth_file_at_its_line(tmp_path: Path, role: str, reason: str):
    path = tmp_path / "auth.yaml"
    path.write_text(f"roles:\n  ok: {{admin: true}}\n  smith:\n    {role}\n")
    with pytest.raises(AuthFileError, match=reason) as refused:
        read_auth_file(path)
    assert refused.value.line == 4


def test_manage_tools_rights_add_up_across_roles(tmp_path: Path):
    path = tmp_path / "auth.yaml"
    path.write_text("roles:\n  a: {manage_tools: {credentials: [github]}}\n"
                    "  b: {manage_tools: {credentials: [vault]}}\n  c: {manage_tools: false}\n")
    roles = read_auth_file(path).roles
    both = Permissions.union([roles["a"], roles["b"], roles["c"]])
    assert (both.may_manage_tools, both.grantable_credentials) == (True, frozenset({"github", "vault"}))
    assert not roles["c"].may_manage_tools


# --- bounds, whole-record versions, and a store that misbehaves ------------------------------------------------

async def test_a_server_keeps_at_most_max_user_tools(start_server, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(table_module, "MAX_USER_TOOLS", 2)
    server = await start_server(**AS_NOBODY)
    tools = server.toolhost.user_tools
    await tools.create(MANAGER, user_tool("first_tool"))
    await tools.create(MANAGER, user_tool("second_tool"))
    with pytest.raises(FailedPreconditionError, match=r"at most 2 user tools and has 2; delete"):
        await tools.create(MANAGER, user_tool("third_tool"))
    await tools.delete(MANAGER, "first_tool")
    assert (await tools.create(MANAGER, user_tool("third_tool"))).version == 1


async def test_only_the_last_versions_are_kept_and_restoring_an_older_one_says_so(
        start_server, database: URL | None, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(table_module, "MAX_VERSIONS_PER_TOOL", 3)
    server = await start_server(**store_settings(database))
    tools = server.toolhost.user_tools
    await tools.create(MANAGER, user_tool())
    for number in range(2, 6):
        await tools.update(MANAGER, "greet_user", {"script": f"echo v{number}"})
    versions, _ = await tools.versions(MANAGER, "greet_user", 0, "")
    assert [v.version for v in versions] == [5, 4, 3]
    with pytest.raises(ResourceNotFoundError, match=r"versions older than the last 3 are not kept.*versions 3 to 5"):
        await tools.restore(MANAGER, "greet_user", 2)
    with pytest.raises(ResourceNotFoundError, match="has no version 9"):
        await tools.restore(MANAGER, "greet_user", 9)
    restored = await tools.restore(MANAGER, "greet_user", 3)
    assert (restored.version, restored.script) == (6, "echo v3")
    assert [v.version for v in (await tools.versions(MANAGER, "greet_user", 0, ""))[0]] == [6, 5, 4]


async def test_a_version_holds_the_whole_editable_record_and_a_restore_brings_all_of_it_back(
        start_server, database: URL | None):
    server = await start_server(**store_settings(database))
    tools = server.toolhost.user_tools
    first = await tools.create(MANAGER, user_tool(timeout_seconds=5.0, tags=("greeting", "v1"), category="people"))
    await tools.update(MANAGER, "greet_user", {
        "name": "Renamed", "description": "Something else.", "category": "misc", "timeout_seconds": 9.0,
        "tags": ("v2",), "system_prompt": "New prompt.", "script": "echo v2",
        "input_schema": {"type": "object", "properties": {}}})
    restored = await tools.restore(MANAGER, "greet_user", 1)

    editable = ("name", "description", "category", "system_prompt", "input_schema", "script", "timeout_seconds",
                "tags", "credentials")
    assert {f: getattr(restored, f) for f in editable} == {f: getattr(first, f) for f in editable}
    versions, _ = await tools.versions(MANAGER, "greet_user", 0, "")
    assert [(v.version, v.details and v.details.name, v.details and v.details.tags) for v in versions] == [
        (3, "Greet a user", ("greeting", "v1")), (2, "Renamed", ("v2",)), (1, "Greet a user", ("greeting", "v1"))]
    assert await output_of(server, "greet_user", name="back") == "hello back\n"


async def test_a_refresh_reads_whole_only_the_tools_that_changed(start_server):
    server = await start_server(**AS_NOBODY)
    tools = server.toolhost.user_tools
    for slug in ("a_tool", "b_tool", "c_tool"):
        await tools.create(MANAGER, user_tool(slug))
    held = {record.slug: record for record in tools.table.all()}
    await tools.update(MANAGER, "b_tool", {"script": "echo changed"})
    await tools.set_enabled(MANAGER, "c_tool", False)
    records = tools.table.read_changed(held)
    assert [r.slug for r in records] == ["a_tool", "b_tool", "c_tool"]
    assert records[0] is held["a_tool"]  # not read again
    assert (records[1].script, records[2].enabled) == ("echo changed", False)


def insert_damaged_row(store: Store, slug: str) -> None:
    """A row as an edit in the database, or another release, could leave it: its schema is no JSON object."""
    now = datetime.now(UTC)
    with store.begin() as connection:
        connection.execute(insert(user_tools).values(
            slug=slug, name="", description="Damaged.", category="custom", system_prompt="", input_schema=[1],
            script="echo damaged", enabled=True, timeout_seconds=None, tags={"not": "a list"}, credentials=[],
            version=1, created_by="someone", created_at=now, updated_at=now))


async def test_a_damaged_row_is_left_out_and_logged_once_and_the_others_are_served(
        start_server, database: URL | None, caplog: pytest.LogCaptureFixture):
    server = await start_server(**store_settings(database))
    tools = server.toolhost.user_tools
    caplog.set_level(logging.ERROR, logger="toolhost.user_tools")
    insert_damaged_row(tools.table.store, "broken_tool")

    await tools.create(MANAGER, user_tool())  # its refresh reads the damaged row too
    await tools.update(MANAGER, "greet_user", {"description": "Refreshes again."})
    assert await output_of(server, "greet_user", name="still") == "hello still\n"
    assert "broken_tool" not in server.toolhost.registry.snapshot
    assert len([r for r in caplog.records if "'broken_tool'" in r.getMessage()]) == 1
    assert [t.slug for t in (await tools.list(MANAGER, 0, ""))[0]] == ["greet_user"]
    with pytest.raises(FailedPreconditionError, match=r"cannot read.*delete it"):
        await tools.get(MANAGER, "broken_tool")
    assert (await tools.delete(MANAGER, "broken_tool")).slug == "broken_tool"


def failing_first(refresh: Any, *failures: Exception) -> Any:
    """`refresh`, failing with each of `failures` in turn before it works again."""
    pending = list(failures)

    async def refresh_or_fail() -> None:
        if pending:
            raise pending.pop(0)
        await refresh()

    return refresh_or_fail


async def test_a_stored_change_is_the_answer_even_when_serving_it_fails(
        start_server, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture):
    monkeypatch.setattr(propagation, "POLL_SECONDS", 3600.0)  # only this test's changes refresh
    server = await start_server(**AS_NOBODY)
    tools = server.toolhost.user_tools
    monkeypatch.setattr(tools.serving, "refresh", failing_first(tools.serving.refresh, RuntimeError("injected")))
    created = await tools.create(MANAGER, user_tool())  # stored: no error for the caller, no ALREADY_EXISTS later
    assert created.version == 1
    assert "greet_user" not in server.toolhost.registry.snapshot
    assert any("the change is stored, but serving it failed here" in r.getMessage() for r in caplog.records)
    await tools.create(MANAGER, user_tool("other_tool"))  # the next refresh serves both
    assert await output_of(server, "greet_user", name="later") == "hello later\n"


async def test_the_sync_keeps_following_after_a_refresh_fails_whatever_the_error(
        start_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture):
    monkeypatch.setattr(propagation, "POLL_SECONDS", 0.05)
    data = tmp_path / "shared-data"
    first = await start_server(data_dir=str(data), **AS_NOBODY)
    second = await start_server(data_dir=str(data), **AS_NOBODY)
    serving = second.toolhost.user_tools.serving
    # Only the sync refreshes the second server: each failure is the sync's.
    monkeypatch.setattr(serving, "refresh", failing_first(serving.refresh, RuntimeError("not a StoreError"),
                                                          ValueError("nor this")))
    stream = tool_service_pb2_grpc.ToolServiceStub(second.channel).WatchTools(tool_service_pb2.WatchToolsRequest())
    await next_change(stream)
    await first.toolhost.user_tools.create(MANAGER, user_tool())
    assert list((await next_change(stream)).added) == ["greet_user"]
    logged = [r.getMessage() for r in caplog.records if r.name == "toolhost.user_tools"]
    assert logged.count("user tools: refreshing them failed, serving the tools read last") == 1  # once per outage
    stream.cancel()
