"""drowcoder's `todo` and `attempt_completion` through a real server: every todo action, its refusals and limits,
lists kept per caller identity and surviving a killed server, on SQLite and PostgreSQL; attempt_completion's
structured output and an audit record without its text."""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.json_format import MessageToDict
from sqlalchemy import URL, insert, select, text, update

from toolhost.v1 import tool_service_pb2
from toolhost_server.store.database import Store
from toolhost_server.store.engine import create_store_engine, sqlite_file_url
from toolhost_server.store.migrations import schema_version
from toolhost_server.store.schema import audit_records, todos
from toolhost_server.tools.agent_tools import MAX_TODO_CONTENT_CHARS, MAX_TODO_ITEMS, MAX_TODO_LISTS

from helpers.servers import RunningServer, ServerProcess
from helpers.status import error_details
from helpers.todos import Stub, call_tool, contents, store_settings, todo, todo_failure, two_callers_auth_file


async def test_every_todo_action_and_the_list_after_it(start_server, database: URL, tmp_path: Path):
    server = await start_server(**store_settings(database, tmp_path))
    assert contents(await todo(server.stub, action="list")) == []

    added = await todo(server.stub, action="add", content="write the migration")
    assert added["session"] == "default" and added["cleared"] == 0
    item = added["item"]
    assert (item["id"], item["content"], item["status"]) == (1, "write the migration", "pending")
    created = datetime.fromisoformat(item["created_at"])
    assert created.tzinfo is not None and created == datetime.fromisoformat(item["updated_at"])
    await todo(server.stub, action="add", content="test it\nwith two lines", status="in_progress")
    assert contents(await todo(server.stub, action="list")) == [
        (1, "write the migration", "pending"), (2, "test it\nwith two lines", "in_progress")]

    updated = await todo(server.stub, action="update", id=1, status="completed")
    assert (updated["item"]["id"], updated["item"]["status"]) == (1, "completed")
    assert updated["item"]["created_at"] == item["created_at"]
    assert datetime.fromisoformat(updated["item"]["updated_at"]) >= created
    renamed = await todo(server.stub, action="update", id=2, content="test it on PostgreSQL too")
    assert contents(renamed) == [(1, "write the migration", "completed"), (2, "test it on PostgreSQL too",
                                                                           "in_progress")]
    both = await todo(server.stub, action="update", id=2, content="tested", status="completed")
    assert both["item"]["content"] == "tested" and both["item"]["status"] == "completed"

    # Another session of the same caller is another list, numbered from 1.
    other = await todo(server.stub, action="add", session="refactor auth", content="read the code")
    assert contents(other) == [(1, "read the code", "pending")] and other["session"] == "refactor auth"
    response = await call_tool(server.stub, "todo", action="list")
    assert response.output.splitlines() == [
        "todo list 'default': 2 items (0 pending, 0 in progress, 2 completed)",
        "[x] 1. write the migration", "[x] 2. tested"]

    response = await call_tool(server.stub, "todo", action="add", session="refactor auth", content="fix it")
    assert response.output.splitlines() == [
        "todo list 'refactor auth': 2 items (2 pending, 0 in progress, 0 completed)", "added item 2",
        "[ ] 1. read the code", "[ ] 2. fix it"]
    response = await call_tool(server.stub, "todo", action="update", session="refactor auth", id=2,
                               status="completed")
    assert response.output.splitlines()[1:] == ["updated item 2", "[ ] 1. read the code", "[x] 2. fix it"]
    response = await call_tool(server.stub, "todo", action="clear", session="refactor auth")
    assert response.output.splitlines() == [
        "todo list 'refactor auth': 0 items (0 pending, 0 in progress, 0 completed)", "cleared 2 items"]
    await todo(server.stub, action="add", session="refactor auth", content="read the code")

    cleared = await todo(server.stub, action="clear")
    assert cleared == {"session": "default", "items": [], "item": None, "cleared": 2.0}
    assert contents(await todo(server.stub, action="list")) == []
    assert contents(await todo(server.stub, action="list", session="refactor auth")) == [
        (1, "read the code", "pending")]
    # A cleared list starts again at 1.
    assert (await todo(server.stub, action="add", content="again"))["item"]["id"] == 1


async def test_an_unknown_id_is_todo_not_found_and_changes_nothing(start_server, tmp_path: Path):
    server = await start_server()
    await todo(server.stub, action="add", content="only item")
    code, message = await todo_failure(server.stub, action="update", id=2, status="completed")
    assert code == "TODO_NOT_FOUND" and "has no item 2" in message
    # Ids belong to a list: item 1 of "default" is not item 1 of another session.
    code, _ = await todo_failure(server.stub, action="update", session="other", id=1, status="completed")
    assert code == "TODO_NOT_FOUND"
    assert contents(await todo(server.stub, action="list")) == [(1, "only item", "pending")]


async def test_a_store_it_cannot_use_is_store_unavailable_without_saying_where(start_server, tmp_path: Path):
    not_a_directory = tmp_path / "data-is-a-file"
    not_a_directory.write_text("")
    server = await start_server(data_dir=str(not_a_directory))
    code, message = await todo_failure(server.stub, action="list")
    assert code == "STORE_UNAVAILABLE" and "retry later" in message
    assert str(tmp_path) not in message


REFUSED = [
    ({"action": "add"}, "/content", "needs the item's content"),
    ({"action": "add", "content": ""}, "/content", "shorter than 1 character"),
    ({"action": "add", "content": "x" * (MAX_TODO_CONTENT_CHARS + 1)}, "/content", "longer than 4000 characters"),
    ({"action": "add", "content": "a\x00b"}, "/content", "does not match"),
    ({"action": "add", "content": "x", "id": 3}, "/id", "action 'add' takes no id"),
    ({"action": "add", "content": "x", "status": "done"}, "/status", "is not one of"),
    ({"action": "update", "status": "completed"}, "/id", "needs the id of the item"),
    ({"action": "update", "id": 1}, "/status", "needs a new status, content, or both"),
    ({"action": "update", "id": 0, "status": "completed"}, "/id", "less than the minimum of 1"),
    ({"action": "update", "id": 2**31, "status": "completed"}, "/id", "greater than the maximum"),
    ({"action": "update", "id": "1", "status": "completed"}, "/id", 'is not of type "integer"'),
    ({"action": "list", "content": "x"}, "/content", "action 'list' takes no content"),
    ({"action": "clear", "id": 1}, "/id", "action 'clear' takes no id"),
    ({"action": "remove"}, "/action", "is not one of"),
    ({}, "/action", "required argument is missing"),
    ({"action": "list", "session": ""}, "/session", "shorter than 1 character"),
    ({"action": "list", "session": "s" * 129}, "/session", "longer than 128 characters"),
    ({"action": "list", "session": "a\nb"}, "/session", "does not match"),
    ({"action": "list", "session": "a\x00b"}, "/session", "does not match"),
    ({"action": "list", "owner": "someone-else"}, "/owner", "unknown argument"),
]


async def test_malformed_todo_calls_are_invalid_argument_naming_the_argument(start_server):
    server = await start_server()
    for arguments, pointer, reason in REFUSED:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call_tool(server.stub, "todo", **arguments)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, arguments
        info, violations = error_details(refused.value)
        assert info.reason == "INVALID_ARGUMENTS"
        assert any(field == pointer and reason in text for field, text in violations), (arguments, violations)
    assert contents(await todo(server.stub, action="list")) == []


def fill(data_dir: Path, owner: str, sessions: Sequence[str], items: int) -> None:
    """Write `items` items into each of `sessions` of `owner`, straight into the store."""
    now = datetime.now(UTC)
    store = Store(sqlite_file_url(data_dir / "toolhost.db"))
    try:
        with store.begin() as connection:
            connection.execute(insert(todos), [
                {"owner": owner, "session": session, "id": number, "content": f"item {number}",
                 "status": "pending", "created_at": now, "updated_at": now}
                for session in sessions for number in range(1, items + 1)])
    finally:
        store.close()


async def test_a_full_list_is_todo_list_full_until_it_is_cleared(start_server, tmp_path: Path):
    server = await start_server(data_dir=str(tmp_path / "data"))
    fill(tmp_path / "data", "anonymous:anonymous", ["default"], MAX_TODO_ITEMS - 1)
    assert (await todo(server.stub, action="add", content="the last one"))["item"]["id"] == MAX_TODO_ITEMS
    code, message = await todo_failure(server.stub, action="add", content="one too many")
    assert code == "TODO_LIST_FULL" and f"already holds {MAX_TODO_ITEMS} items" in message
    assert len((await todo(server.stub, action="list"))["items"]) == MAX_TODO_ITEMS
    assert (await todo(server.stub, action="clear"))["cleared"] == MAX_TODO_ITEMS
    assert (await todo(server.stub, action="add", content="room again"))["item"]["id"] == 1


async def test_a_caller_with_the_most_lists_cannot_start_another(start_server, tmp_path: Path):
    server = await start_server(data_dir=str(tmp_path / "data"))
    fill(tmp_path / "data", "anonymous:anonymous", [f"session {n}" for n in range(MAX_TODO_LISTS)], 1)
    code, message = await todo_failure(server.stub, action="add", session="one more", content="x")
    assert code == "TODO_TOO_MANY_LISTS" and f"already have {MAX_TODO_LISTS} todo lists" in message
    # A list it already has still grows; once one is cleared, a new one may start.
    assert (await todo(server.stub, action="add", session="session 0", content="x"))["item"]["id"] == 2
    await todo(server.stub, action="clear", session="session 1")
    assert (await todo(server.stub, action="add", session="one more", content="x"))["item"]["id"] == 1


async def test_no_caller_sees_or_changes_another_identitys_lists(start_server, database: URL, tmp_path: Path):
    alice, bob = two_callers_auth_file(tmp_path / "auth.yaml")
    server = await start_server(auth_file=tmp_path / "auth.yaml", **store_settings(database, tmp_path))
    await todo(server.stub, alice, action="add", content="alice's secret plan")
    await todo(server.stub, alice, action="add", session="shared-name", content="alice's other plan")

    # The same session names, another identity: empty lists, and nothing of alice's to update or clear.
    assert contents(await todo(server.stub, bob, action="list")) == []
    assert contents(await todo(server.stub, bob, action="list", session="shared-name")) == []
    code, _ = await todo_failure(server.stub, bob, action="update", id=1, content="bob was here")
    assert code == "TODO_NOT_FOUND"
    assert (await todo(server.stub, bob, action="clear"))["cleared"] == 0
    assert (await todo(server.stub, bob, action="clear", session="shared-name"))["cleared"] == 0
    bobs = await todo(server.stub, bob, action="add", content="bob's own")
    assert contents(bobs) == [(1, "bob's own", "pending")]

    assert contents(await todo(server.stub, alice, action="list")) == [(1, "alice's secret plan", "pending")]
    assert contents(await todo(server.stub, alice, action="list", session="shared-name")) == [
        (1, "alice's other plan", "pending")]
    # Without a token there is no identity at all.
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call_tool(server.stub, "todo", action="list")
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED


@pytest.mark.server
async def test_lists_kept_under_a_bare_name_before_schema_6_reach_no_caller(
        start_server, database: URL, tmp_path: Path):
    """Before version 6 the owner was the bare name: a row of a caller named "token:alice" would read as the token
    alice's list now. Migration 6 removes such rows, since which method wrote them is not known."""
    alice, _ = two_callers_auth_file(tmp_path / "auth.yaml")
    store = Store(database)  # created at the latest version, then set back to version 5 with a row of then
    try:
        with store.begin() as connection:
            # A new database has one version row, the latest: version 5 now, as a database that reached 5 would be,
            # without the columns later migrations add (7: tool_versions.details, 9: audit_records.client_trace_id).
            connection.execute(update(schema_version).values(version=5))
            connection.execute(text("ALTER TABLE tool_versions DROP COLUMN details"))
            connection.execute(text("ALTER TABLE audit_records DROP COLUMN client_trace_id"))
            now = datetime.now(UTC)
            connection.execute(insert(todos), [
                {"owner": owner, "session": "default", "id": 1, "content": f"kept by the caller named {owner}",
                 "status": "pending", "created_at": now, "updated_at": now} for owner in ("token:alice", "alice")])
    finally:
        store.close()
    server = await start_server(auth_file=tmp_path / "auth.yaml", **store_settings(database, tmp_path))
    assert contents(await todo(server.stub, alice, action="list")) == []
    await todo(server.stub, alice, action="add", content="alice's own")
    engine = create_store_engine(database)
    try:
        with engine.begin() as connection:
            assert connection.execute(select(todos.c.owner, todos.c.content)).all() == [("token:alice", "alice's own")]
            assert connection.execute(select(schema_version.c.version).where(schema_version.c.version == 6)).all()
    finally:
        engine.dispose()


async def test_a_list_survives_a_killed_server(database: URL, tmp_path: Path):
    # Killed at once after the answer (SIGKILL: nothing is flushed on the way out): the change was committed
    # before the call answered, so the next server on the same database lists it.
    if database.get_backend_name() == "sqlite":
        assert database.database is not None
        environment = {"TOOLHOST_DATA_DIR": str(Path(database.database).parent)}
    else:
        environment = {"TOOLHOST_DATABASE_URL": database.render_as_string(hide_password=False)}
    for turn in ("first", "second"):
        process = ServerProcess("--watch-catalog", "false", env=environment)
        try:
            await process.start()
            async with grpc.aio.insecure_channel(process.target) as channel:
                stub = Stub(channel)
                if turn == "first":
                    await todo(stub, action="add", content="survive the kill")
                    await todo(stub, action="update", id=1, status="in_progress")
                else:
                    assert contents(await todo(stub, action="list")) == [(1, "survive the kill", "in_progress")]
        finally:
            await process.stop()


async def test_todo_output_is_redacted_like_any_tool_output(start_server):
    server = await start_server()
    secret = "Bearer " + secrets.token_urlsafe(24)
    response = await call_tool(server.stub, "todo", action="add", content=f"call the API with {secret}")
    assert response.success and response.redacted
    assert secret not in response.output and secret not in json.dumps(MessageToDict(response.structured_output))


async def test_attempt_completion_returns_result_and_command_and_audits_neither(
        start_server, database: URL, tmp_path: Path):
    server = await start_server(**store_settings(database, tmp_path))
    result_text = "finished-" + secrets.token_hex(8)
    command_text = "make check-" + secrets.token_hex(8)
    response = await call_tool(server.stub, "attempt_completion", result=result_text, command=command_text)
    assert response.success, response.error
    assert MessageToDict(response.structured_output) == {"result": result_text, "command": command_text}
    assert result_text in response.output and command_text in response.output
    bare = await call_tool(server.stub, "attempt_completion", result="done")
    assert MessageToDict(bare.structured_output) == {"result": "done", "command": None}
    assert bare.output == "done"
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call_tool(server.stub, "attempt_completion", command="ls")
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    await server.toolhost.audit.close()  # writes the waiting audit records
    engine = create_store_engine(database)
    try:
        with engine.begin() as connection:
            rows = connection.execute(select(audit_records).where(audit_records.c.tool == "attempt_completion")
                                      .order_by(audit_records.c.id)).mappings().all()
    finally:
        engine.dispose()
    assert [(row["outcome"], sorted(row["argument_keys"])) for row in rows] == [
        ("OK", ["command", "result"]), ("OK", ["result"]), ("INVALID_ARGUMENTS", ["command"])]
    stored = json.dumps([{key: str(value) for key, value in row.items()} for row in rows])
    assert result_text not in stored and command_text not in stored and "done" not in stored


async def test_both_tools_are_listed_in_the_agent_category(start_server: Any) -> None:
    server: RunningServer = await start_server()
    for name, read_only in (("todo", False), ("attempt_completion", True)):
        tool = (await server.stub.GetTool(tool_service_pb2.GetToolRequest(name=name))).tool
        assert tool.category == "agent" and tool.annotations.read_only is read_only
        assert MessageToDict(tool.output_schema)["type"] == "object"
