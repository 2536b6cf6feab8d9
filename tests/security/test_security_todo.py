"""Attacks on the todo tool's lists: reaching another identity's list through a session name that reads like SQL, a
pattern or a look-alike, naming the owner in the arguments, a caller of another auth method under the same name,
a huge content, and concurrent adds racing for ids."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path

import grpc
import pytest
from sqlalchemy import URL, select

import toolhost
from toolhost_server.auth import hash_token
from toolhost_server.store.engine import create_store_engine, sqlite_file_url
from toolhost_server.store.schema import todos

from helpers.status import error_details
from helpers.todos import call_tool, contents, store_settings, todo, two_callers_auth_file

# Each is a session name of its own: none of them reaches the list "default".
LOOK_ALIKE_SESSIONS = [
    "default' OR '1'='1", "default'; DELETE FROM todos; --", "%", "_efault", "defaul%", "*", "DEFAULT", "default ",
    " default", "\uff44efault", "d\u0435fault", "default\u200b", "de\\fault", "default/..", "../default",
]


async def test_session_names_never_reach_another_list_or_identity(start_server, database: URL, tmp_path: Path):
    alice, bob = two_callers_auth_file(tmp_path / "auth.yaml")
    server = await start_server(auth_file=tmp_path / "auth.yaml", **store_settings(database, tmp_path))
    await todo(server.stub, alice, action="add", content="alice's plan")
    for session in LOOK_ALIKE_SESSIONS:
        for token in (alice, bob):
            assert contents(await todo(server.stub, token, action="list", session=session)) == [], session
            assert (await todo(server.stub, token, action="clear", session=session))["cleared"] == 0, session
    assert contents(await todo(server.stub, alice, action="list")) == [(1, "alice's plan", "pending")]


async def test_the_owner_cannot_be_named_in_the_arguments(start_server, tmp_path: Path):
    alice, bob = two_callers_auth_file(tmp_path / "auth.yaml")
    server = await start_server(auth_file=tmp_path / "auth.yaml")
    await todo(server.stub, alice, action="add", content="alice's plan")
    for key in ("owner", "caller", "identity", "user"):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call_tool(server.stub, "todo", bob, action="list", **{key: "alice"})
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_details(refused.value)[1][0][0] == f"/{key}"


async def test_a_caller_of_another_auth_method_under_the_same_name_has_lists_of_its_own(
        start_server, tmp_path: Path):
    """A token named like the trusted unix socket's caller (trusted-unix-socket) is another identity: the lists
    are keyed by how a caller authenticated and its name."""
    token = secrets.token_urlsafe(32)
    (tmp_path / "auth.yaml").write_text(f"""\
roles:
  agent:
    call: {{categories: [agent]}}
tokens:
  - {{name: trusted-unix-socket, sha256: {hash_token(token)}, roles: [agent]}}
""")
    server = await start_server(auth_file=tmp_path / "auth.yaml", unix_socket=str(tmp_path / "trusted.sock"),
                                trusted_unix_socket=True, data_dir=str(tmp_path / "data"))
    async with toolhost.AsyncClient(f"unix:{tmp_path / 'trusted.sock'}", timeout=10) as sidecar:
        added = await sidecar.call_tool("todo", action="add", content="the sidecar's plan")
        assert added.success, added
        assert contents(await todo(server.stub, token, action="list")) == []
        assert (await todo(server.stub, token, action="clear"))["cleared"] == 0
        await todo(server.stub, token, action="add", content="the token's plan")
        listed = await sidecar.call_tool("todo", action="list")
        assert [item["content"] for item in listed.structured_output["items"]] == ["the sidecar's plan"], listed
    assert contents(await todo(server.stub, token, action="list")) == [(1, "the token's plan", "pending")]


async def test_a_huge_content_is_refused_with_a_short_status_and_nothing_stored(start_server, tmp_path: Path):
    server = await start_server(data_dir=str(tmp_path / "data"))
    for huge in ("x" * 2_000_000, "\x00" * 100_000, "y" * 3000 + "\x00"):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call_tool(server.stub, "todo", action="add", content=huge)
        # INVALID_ARGUMENT itself, not the client's RESOURCE_EXHAUSTED at a status echoing the whole value.
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert len(refused.value.details() or "") < 1000
    engine = create_store_engine(sqlite_file_url(tmp_path / "data" / "toolhost.db"))
    try:
        with engine.begin() as connection:
            assert connection.execute(select(todos)).all() == []
    finally:
        engine.dispose()


async def test_concurrent_adds_get_distinct_ids_and_none_is_lost(start_server, database: URL, tmp_path: Path):
    server = await start_server(**store_settings(database, tmp_path))
    added = await asyncio.gather(*(todo(server.stub, action="add", content=f"item {n}") for n in range(24)))
    assert sorted(int(output["item"]["id"]) for output in added) == list(range(1, 25))
    listed = contents(await todo(server.stub, action="list"))
    assert [item_id for item_id, _, _ in listed] == list(range(1, 25))
    assert sorted(content for _, content, _ in listed) == sorted(f"item {n}" for n in range(24))
