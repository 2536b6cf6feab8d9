"""database_schema against databases that attack the server's threads, processes and memory (the s29 review's
findings 1 and 3): a PostgreSQL that takes the login and then never answers (a proxy that swallows its answers)
is an entry saying "timed out" at the call's deadline while the other databases answer; nothing of the reading is
left behind (no process, no connection) however many such calls come; calls beyond the readers are
RESOURCE_EXHAUSTED at once, not queued; the reading process gets no secret through its argv or environment; and a
SQLite schema built to fill memory meets the reading process's limit, never the server's."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
import sqlite3
from pathlib import Path
from typing import Any

import grpc
import pytest

from toolhost.v1 import tool_service_pb2, tool_service_pb2_grpc
from toolhost_server.introspection import database_schema_process
from toolhost_server.introspection.database_failures import TOO_LARGE

from helpers.hanging_proxy import HangingProxy
from helpers.servers import ServerFactory, ServerProcess
from helpers.waiting import until, within

_CHILD_MARK = b"database_schema_child"


async def call(stub: tool_service_pb2_grpc.ToolServiceStub, deadline: float | None = None,
               **arguments: Any) -> dict[str, Any]:
    response = await stub.CallTool(tool_service_pb2.CallToolRequest(
        name="database_schema", arguments_json=json.dumps(arguments)), timeout=deadline)
    assert response.success, response.error
    result: dict[str, Any] = json.loads(response.output)
    return result


def entry(result: dict[str, Any], name: str) -> dict[str, Any]:
    [found] = [database for database in result["databases"] if database["name"] == name]
    return found


def reading_processes() -> list[int]:
    """This process's children (the in-process server's) that are database_schema reading processes, exited or
    not."""
    found = []
    for task in os.listdir("/proc/self/task"):
        try:
            children = Path(f"/proc/self/task/{task}/children").read_text().split()
        except OSError:
            continue
        for pid in children:
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if _CHILD_MARK in command:
                found.append(int(pid))
    return found


def small_sqlite(path: Path) -> Path:
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
    connection.close()
    return path


@pytest.fixture
def reader(postgres_cluster) -> tuple[str, str]:
    """A database with one table and a login role that may read it: (URL path part after the port, password)."""
    name = postgres_cluster.create_database()
    password = f"pw{secrets.token_hex(12)}"
    role = f"reader_{name}"
    postgres_cluster.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
    postgres_cluster.execute("CREATE TABLE events (id bigint PRIMARY KEY)", name)
    postgres_cluster.execute(f"GRANT SELECT ON events TO {role}", name)
    return f"{role}:{password}@127.0.0.1:{{port}}/{name}", password


async def test_a_database_that_stops_answering_times_out_and_leaves_nothing_behind(
        start_server: ServerFactory, postgres_cluster, reader, tmp_path):
    userinfo, password = reader
    async with HangingProxy(postgres_cluster.port) as proxy:
        server = await start_server(databases=(
            ("hung", "postgresql://" + userinfo.format(port=proxy.port)),
            ("live", "postgresql://" + userinfo.format(port=postgres_cluster.port)),
            ("local", f"sqlite:///{small_sqlite(tmp_path / 'local.db')}")))

        # (a) One call: the silent database is an entry saying so, at the call's deadline; the others answered.
        result = await within(call(server.stub, deadline=8), "a call with a hung database")
        hung = entry(result, "hung")
        assert "timed out" in hung["error"] and "tables" not in hung
        assert [t["name"] for t in entry(result, "live")["tables"]] == ["events"]
        assert [t["name"] for t in entry(result, "local")["tables"]] == ["items"]
        assert result["summary"]["failed"] == 1 and password not in json.dumps(result)
        # Nothing left: the reading process is gone (reaped, not a zombie) and its connection closed.
        assert reading_processes() == []
        await proxy.wait_for(lambda: proxy.closed == proxy.accepted, "the hung connection closed")

        # (b) Ten more, four at a time (as many as read at once): every one answers, and after each wave nothing
        # is left, so nothing accumulates.
        for wave in (4, 4, 2):
            results = await within(asyncio.gather(*(call(server.stub, deadline=8) for _ in range(wave))),
                                   "a wave of calls with a hung database")
            for answered in results:
                assert "timed out" in entry(answered, "hung")["error"]
                assert entry(answered, "local")["table_count"] == 1
            assert reading_processes() == []
            await proxy.wait_for(lambda: proxy.closed == proxy.accepted, "every hung connection closed")
        assert proxy.accepted == 11


async def test_calls_beyond_the_readers_are_busy_at_once_and_cancelled_calls_free_them(
        start_server: ServerFactory, postgres_cluster, reader, tmp_path):
    userinfo, _password = reader
    async with HangingProxy(postgres_cluster.port) as proxy:
        server = await start_server(databases=(("hung", "postgresql://" + userinfo.format(port=proxy.port)),))
        # Four calls without a deadline of their own: each holds a reader until the tool's 60 s.
        held = [asyncio.create_task(call(server.stub)) for _ in range(4)]
        await proxy.wait_for(lambda: proxy.hanging == 4, "four readings stuck on the hung database")

        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await within(call(server.stub, database="store"), "the fifth call")
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "retry in a moment" in (refused.value.details() or "")
        assert not any(task.done() for task in held)  # refused while the four still ran: not queued behind them

        # The callers give up: their readings are killed, and the readers are free again.
        for task in held:
            task.cancel()
        await asyncio.gather(*held, return_exceptions=True)
        await proxy.wait_for(lambda: proxy.closed == 4, "the four cancelled readings' connections closed")
        await until(lambda: reading_processes() == [], "the cancelled readings' processes gone")
        store = await within(call(server.stub, database="store"), "a call after the cancelled ones")
        assert entry(store, "store")["table_count"] > 0


async def test_the_reading_process_gets_no_secret_in_its_argv_or_environment(
        start_server: ServerFactory, postgres_cluster, reader, monkeypatch):
    userinfo, password = reader
    canary, store_key = f"cn{secrets.token_hex(12)}", base64.b64encode(secrets.token_bytes(32)).decode()
    # What the server's environment may hold: the store key, database URLs with passwords.
    monkeypatch.setenv("TOOLHOST_STORE_KEY", store_key)
    monkeypatch.setenv("TOOLHOST_DATABASE_OTHER_URL", f"postgresql://x:{canary}@127.0.0.1/x")
    async with HangingProxy(postgres_cluster.port) as proxy:
        server = await start_server(databases=(("hung", "postgresql://" + userinfo.format(port=proxy.port)),))
        pending = asyncio.create_task(call(server.stub, deadline=20))
        await proxy.wait_for(lambda: proxy.hanging == 1, "the reading stuck on the hung database")
        [pid] = reading_processes()
        seen = Path(f"/proc/{pid}/cmdline").read_bytes() + Path(f"/proc/{pid}/environ").read_bytes()
        pending.cancel()
        await asyncio.gather(pending, return_exceptions=True)
    for value in (password, canary, store_key, "TOOLHOST_"):
        assert value.encode() not in seen
    assert b"HOME=" in seen or b"PATH=" in seen  # it was the environment that was read


# --- memory -----------------------------------------------------------------------------------------------------


def hostile_schema(path: Path, tables: int) -> Path:
    """The review's shape: tables with 300-character names, each of 20 columns with 400-character names and
    defaults. SQLite parses the whole schema into memory when it opens the file."""
    columns = ", ".join(f"c{i}_{'x' * 400} TEXT DEFAULT '{'y' * 400}'" for i in range(20))
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA journal_mode = OFF")
        connection.executescript("BEGIN;" + "".join(f"CREATE TABLE t{i:05}_{'n' * 300} ({columns});"
                                                    for i in range(tables)) + "COMMIT;")
    connection.close()
    return path


async def test_a_schema_beyond_the_reading_processs_memory_is_an_entry_and_the_others_answer(
        start_server: ServerFactory, postgres_cluster, reader, tmp_path, monkeypatch):
    """SQLite's heap limit is the reading process's, shared by the call's SQLite files: the other database read in
    the same call is a PostgreSQL one (its reading uses no SQLite memory); the SQLite files answer by name."""
    # A low limit for SQLite's heap, so that a small file is enough to pass it.
    monkeypatch.setattr(database_schema_process, "SQLITE_HEAP_BYTES", 4 * 1024 * 1024)
    userinfo, _password = reader
    server = await start_server(databases=(("big", f"sqlite:///{hostile_schema(tmp_path / 'big.db', 400)}"),
                                           ("live", "postgresql://" + userinfo.format(port=postgres_cluster.port)),
                                           ("local", f"sqlite:///{small_sqlite(tmp_path / 'local.db')}")))

    result = await within(call(server.stub, database="big"), "a call reading a schema too large for its memory")
    assert entry(result, "big")["error"] == TOO_LARGE

    result = await within(call(server.stub, table="events"), "big and live in one call")
    assert entry(result, "big")["error"] == TOO_LARGE  # failed, so it might have the table: listed
    assert [t["name"] for t in entry(result, "live")["tables"]] == ["events"]
    for name, table in (("local", "items"), ("store", "audit_records")):
        answered = await within(call(server.stub, database=name), f"{name} read after the failure")
        assert table in [t["name"] for t in entry(answered, name)["tables"]]


def _status_bytes(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"/proc/{pid}/status has no {field}")


# Before the review's fix, reading this file in the server added about 130 MB to its peak (and 20,000 such tables
# took it to 1.18 GB); read in the reading process, the server's peak grows by the answer's size.
MAX_PEAK_GROWTH_BYTES = 48 * 1024 * 1024


async def test_a_hostile_schema_leaves_the_servers_peak_memory_where_it_was(tmp_path):
    path = hostile_schema(tmp_path / "hostile.db", 5000)
    server = ServerProcess("--watch-catalog", "false", env={"TOOLHOST_DATABASE_HOSTILE_URL": f"sqlite:///{path}"})
    await server.start()
    assert server.process is not None and server.process.stderr is not None
    drain = asyncio.create_task(server.process.stderr.read())  # the server never waits on a full pipe
    try:
        pid = server.process.pid
        async with grpc.aio.insecure_channel(server.target) as channel:
            stub = tool_service_pb2_grpc.ToolServiceStub(channel)
            await call(stub, database="store")  # imports and the first reading process made before the baseline
            # 5 resets the peak (VmHWM) to the present size, so that the growth below is the readings' alone.
            Path(f"/proc/{pid}/clear_refs").write_text("5")
            baseline = _status_bytes(pid, "VmRSS")
            hostile = entry(await within(call(stub, database="hostile"), "reading it"), "hostile")
            assert hostile["table_count"] == 5000 and 0 < len(hostile["tables"]) <= 500, hostile.keys()
            # A table that matches nothing: the names close to it are looked for among a bounded number.
            near = f"t00001_{'n' * 299}x"
            unknown = await within(stub.CallTool(tool_service_pb2.CallToolRequest(
                name="database_schema", arguments_json=json.dumps({"database": "hostile", "table": near}))),
                "looking for a table that is not there")
            assert unknown.error.code == "NOT_FOUND" and "close names:" in unknown.error.message
            growth = _status_bytes(pid, "VmHWM") - baseline
    finally:
        drain.cancel()
        await server.stop()
    assert growth < MAX_PEAK_GROWTH_BYTES, f"the server's peak grew by {growth >> 20} MB"
