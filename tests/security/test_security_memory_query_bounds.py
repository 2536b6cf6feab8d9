"""Attacks on memory_query's resources, on SQLite and PostgreSQL: results built to be huge (the issue 20 review's
1001 rows of 1 MB, rows just under the value limit, rows of 200 such columns) are refused or cut, and the server's
peak memory (VmHWM of a `toolhost serve` child) grows by less than 200 MB for all of them; queries held running
take both of memory_query's slots, the next one is RESOURCE_EXHAUSTED at once, and the server's other blocking work
goes on beside them; and queries that need gigabytes of temporary space (the issue 20 re-review's DISTINCT over a
recursive CTE) or billions of steps are refused, having used at most their bound: on SQLite the query's process
wrote no file and its peak memory stayed under its heap limit, on PostgreSQL the temporary files stayed within the
memory role's temp_file_limit, and no table changed."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from google.protobuf.json_format import MessageToDict
from sqlalchemy import URL

from toolhost.v1 import tool_service_pb2_grpc
from toolhost_server.memory.postgres_role import TEMP_FILE_LIMIT_KB
from toolhost_server.memory.sqlite_query import HEAP_BYTES, MAX_STEPS
from toolhost_server.store.engine import sqlite_file_url

from helpers.lock_races import libpq_dsn
from helpers.memory import PEOPLE_SCHEMA, call_memory_tool, dump, init_memory_role, memory, memory_refused
from helpers.servers import ServerProcess
from helpers.todos import call_tool, store_settings
from helpers.waiting import until, within

# A peak that a query's result may add to the server, whatever it is asked: the budget (1 MiB by default), one row
# of at most 256 values of 64 KiB, and the copies of both in the answer. Before the review's fix, the first query
# below alone added about a gigabyte.
MAX_PEAK_GROWTH_BYTES = 200 * 1024 * 1024
_SIXTY_FOUR = "0123456789abcdef" * 4


def _recursive(concat: str, values: int) -> str:
    """A CTE r of 1001 numbered rows and g, one value of `values` copies of 64 characters."""
    first, second = (200, 78) if values > 1000 else (60, values // 60)
    return (f"WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 1001), "
            f"g AS (SELECT {concat} AS s FROM r, r AS r2 WHERE r.n <= {first} AND r2.n <= {second}) ")


def _attacks(dialect: str) -> list[tuple[str, str]]:
    concat = ("group_concat(substr('{0}', 1, 64), '')" if dialect == "sqlite"
              else "string_agg(substr('{0}', 1, 64), '')").format(_SIXTY_FOUR)
    wide = ", ".join(f"s AS a{index}" for index in range(200))
    return [
        # The review's reproduction: each of 1001 rows holds a 998,400-byte value.
        ("megabyte values", _recursive(concat, 15_600) + "SELECT s FROM g, r"),
        # 57,600 bytes a value, under the value limit: the byte budget cuts the result.
        ("values under the limit", _recursive(concat, 900) + "SELECT s, r.n FROM g, r"),
        # 200 such values a row: a row larger than the whole budget.
        ("wide rows", _recursive(concat, 900) + f"SELECT {wide} FROM g, r"),
    ]


@pytest.fixture
async def server_process(database: URL, tmp_path: Path) -> AsyncIterator[ServerProcess]:
    settings = store_settings(database, tmp_path)
    env = {"TOOLHOST_DATA_DIR": settings["data_dir"]}
    if "database_url" in settings:
        env["TOOLHOST_DATABASE_URL"] = settings["database_url"]
    server = ServerProcess("--watch-catalog", "false", env=env)
    await server.start()
    assert server.process is not None and server.process.stderr is not None
    # The log is read as it comes, so that the server never waits on a full pipe.
    drain = asyncio.create_task(server.process.stderr.read())
    try:
        yield server
    finally:
        drain.cancel()
        await server.stop()


def _children(pid: int) -> list[str]:
    """The processes the server has started and not yet reaped (SQLite's query processes are its only ones here)."""
    return [child for task in Path(f"/proc/{pid}/task").iterdir()
            for child in (task / "children").read_text().split()]


def _status_bytes(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"/proc/{pid}/status has no {field}")


async def _query(stub: tool_service_pb2_grpc.ToolServiceStub, sql: str) -> Any:
    return await call_memory_tool(stub, "memory_query", "", {"sql": sql})


async def test_huge_results_are_refused_or_cut_and_the_servers_peak_memory_stays_bounded(
        server_process: ServerProcess, database: URL):
    await init_memory_role(database)
    assert server_process.process is not None
    pid = server_process.process.pid
    async with grpc.aio.insecure_channel(server_process.target) as channel:
        stub = tool_service_pb2_grpc.ToolServiceStub(channel)
        warm = await _query(stub, "SELECT 1 AS one")  # imports and connections made before the baseline
        assert warm.success, warm.error
        # 5 resets the peak (VmHWM) to the present size, so that the growth below is the queries' alone.
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        baseline = _status_bytes(pid, "VmRSS")

        outcomes: dict[str, Any] = {}
        for name, sql in _attacks(database.get_backend_name()):
            try:
                response = await _query(stub, sql)
            except grpc.aio.AioRpcError as refused:
                outcomes[name] = (refused.code(), refused.details())
            else:
                assert response.success, (name, response.error)
                outcomes[name] = MessageToDict(response.structured_output)
        growth = _status_bytes(pid, "VmHWM") - baseline
        # A query's process is killed and reaped once its result is full, before the answer.
        assert _children(pid) == []

    code, details = outcomes["megabyte values"]
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "65536 bytes" in details, details
    under = outcomes["values under the limit"]
    assert under["truncated"] is True and 0 < under["row_count"] < 1001, under["row_count"]
    assert "max_output_bytes" in under["note"] and len(under["rows"][0][0]) == 57_600
    assert len(json.dumps(under).encode()) <= 1024 * 1024
    wide = outcomes["wide rows"]
    assert wide["truncated"] is True and wide.get("rows", []) == [] and "would pass" in wide["note"], wide
    assert growth < MAX_PEAK_GROWTH_BYTES, f"the server's peak memory grew by {growth / 2**20:.0f} MiB"


async def test_two_queries_take_every_slot_the_next_is_resource_exhausted_and_other_work_goes_on(
        start_server, postgres_url: URL, tmp_path: Path):
    """PostgreSQL: a query waits on a lock the test holds, so it runs exactly until the test lets it go."""
    server = await start_server(**store_settings(postgres_url, tmp_path))
    await memory(server.stub, "memory_structure_create", name="people", schema=PEOPLE_SCHEMA)
    await memory(server.stub, "memory_create", structure="people", data={"name": "Ada"})
    await init_memory_role(postgres_url)
    await memory(server.stub, "memory_query", sql="SELECT name FROM people")
    database = postgres_url.render_as_string(hide_password=False).replace("postgresql+psycopg", "postgresql")

    with psycopg.connect(database) as holder:
        # The view reads memory_records: its readers queue behind this lock until the transaction ends.
        holder.execute("LOCK TABLE memory_records IN ACCESS EXCLUSIVE MODE")
        held = [asyncio.create_task(_query(server.stub, "SELECT name FROM people")) for _ in range(2)]

        def both_wait() -> bool:
            with psycopg.connect(database, autocommit=True) as watcher:
                waiting = watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'toolhost memory_query' "
                    "AND wait_event_type = 'Lock'").fetchone()
            return waiting is not None and waiting[0] == 2

        await until(both_wait, "two memory queries waiting on the test's lock")
        # More than asyncio's default pool has threads: each is refused at once, none waits for a slot.
        for _ in range((os.cpu_count() or 1) + 5):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await within(_query(server.stub, "SELECT 1 AS one"), "a refusal while the slots are taken")
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, refused.value.details()
            assert "retry" in refused.value.details()
        # log_inspector reads in asyncio's default pool, which the held queries do not use.
        inspected = await within(call_tool(server.stub, "log_inspector", source="memory", limit=1),
                                 "log_inspector beside the held queries")
        assert inspected.success, inspected.error
        assert not any(task.done() for task in held)
        holder.rollback()

    for task in held:
        response = await within(task, "a held query once the lock is gone")
        assert response.success and MessageToDict(response.structured_output)["rows"] == [["Ada"]]
    # The slots are free again.
    assert (await memory(server.stub, "memory_query", sql="SELECT 1 AS one"))["rows"] == [[1.0]]


# The re-review's query (finding 2): rows about 60 KB wide, up to 100,000,000 of them, all kept for DISTINCT. On
# SQLite, in the server, it wrote 3.2 GB of temporary files in 24 s; PostgreSQL spilled it to its own disk.
_CTE = ("WITH RECURSIVE r AS (SELECT 1 AS n, name AS s FROM people UNION ALL "
        "SELECT n + 1, substr(s||s||s||s||s||s||s||s, 1, 6000) FROM r WHERE n < 100000000) ")
TEMPORARY_SPACE_ATTACK = _CTE + ("SELECT count(*) FROM (SELECT DISTINCT n, substr(s||n||s||s||s||s||s||s||s||s, 1, "
                                 "60000) FROM r) AS d")
# Bytes the server (with the query processes it reaped) may write to files during the attack: its audit records.
MAX_WRITTEN_BYTES = 16 * 1024 * 1024


def _written_bytes(pid: int) -> int:
    """What the process, and the children it has reaped, made the kernel write to files (dirtied pages; a deleted
    temporary file's count)."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    raise AssertionError(f"/proc/{pid}/io has no write_bytes")


def _temp_bytes(database: URL) -> int:
    """The bytes of every temporary file the database's queries have closed since PostgreSQL started."""
    with psycopg.connect(libpq_dsn(database), autocommit=True) as admin:
        row = admin.execute("SELECT temp_bytes FROM pg_stat_database WHERE datname = current_database()").fetchone()
    assert row is not None
    return int(row[0])


async def test_a_query_that_needs_gigabytes_of_temporary_space_is_refused_within_its_bound(
        server_process: ServerProcess, database: URL):
    await init_memory_role(database)
    assert server_process.process is not None
    pid = server_process.process.pid
    postgres = database.get_backend_name() == "postgresql"
    async with grpc.aio.insecure_channel(server_process.target) as channel:
        stub = tool_service_pb2_grpc.ToolServiceStub(channel)
        await memory(stub, "memory_structure_create", name="people", schema=PEOPLE_SCHEMA)
        await memory(stub, "memory_create", structure="people", data={"name": "Ada"})
        assert (await memory(stub, "memory_query", sql="SELECT name FROM people"))["rows"] == [["Ada"]]
        tables = dump(database)
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        baseline = _status_bytes(pid, "VmRSS")
        written = _written_bytes(pid)
        temp_before = _temp_bytes(database) if postgres else 0

        refused = await memory_refused(stub, "memory_query", sql=TEMPORARY_SPACE_ATTACK)

        assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT, refused.details()
        bound_mb = TEMP_FILE_LIMIT_KB // 1024 if postgres else HEAP_BYTES >> 20
        assert f"more than {bound_mb} MB of temporary space" in refused.details(), refused.details()
        growth = _status_bytes(pid, "VmHWM") - baseline
        assert growth < MAX_PEAK_GROWTH_BYTES, f"the server's peak memory grew by {growth / 2**20:.0f} MiB"
        # SQLite: the query's process kept its temporary b-trees in memory and wrote nothing (it was reaped, so its
        # writes count in the server's).
        assert _children(pid) == []
        server_written = _written_bytes(pid) - written
        assert server_written < MAX_WRITTEN_BYTES, f"the server wrote {server_written / 2**20:.0f} MiB to files"
        if postgres:
            # The query's backend reports its temporary files when it ends, soon after the refusal.
            await until(lambda: _temp_bytes(database) > temp_before, "PostgreSQL counting the query's temp files")
            spilled = _temp_bytes(database) - temp_before
            assert spilled <= TEMP_FILE_LIMIT_KB * 1024, f"{spilled / 2**20:.0f} MiB of temporary files"
    after = dump(database)
    # Every call is audited: the audit trail only grew; nothing else changed.
    assert set(tables.pop("audit_records")) <= set(after.pop("audit_records"))
    assert after == tables


_MEASURED_QUERY = """
import json, resource, sys, time
from sqlalchemy import make_url
from toolhost_server.memory.errors import MemoryRefusal
from toolhost_server.memory.query import run_memory_query
from toolhost_server.memory.table import MemoryTable
from toolhost_server.store.database import Store

table = MemoryTable(Store(make_url(sys.argv[1])))
table.create_structure("people", "", {"type": "object", "properties": {"name": {"type": "string"}}}, "test")
table.create_record("people", {"name": "Ada"}, "test")
try:
    run_memory_query(table, sys.argv[2], time.monotonic() + 50, 1 << 20)
    outcome = "answered"
except MemoryRefusal as refusal:
    outcome = f"{type(refusal).__name__}: {refusal}"
children = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"outcome": outcome, "children_peak_bytes": children.ru_maxrss * 1024,
                  "children_written_bytes": children.ru_oublock * 512}))
"""


def test_sqlites_query_process_keeps_its_temporary_space_in_memory_under_the_heap_limit(tmp_path: Path):
    """The attack run by a process of the test's whose only child is the query's process: what the kernel says of
    its children is that process's peak memory and writes alone."""
    run = subprocess.run([sys.executable, "-c", _MEASURED_QUERY, str(sqlite_file_url(tmp_path / "toolhost.db")),
                          TEMPORARY_SPACE_ATTACK], capture_output=True, text=True, check=True, timeout=100)
    measured = json.loads(run.stdout)
    assert measured["outcome"].startswith("QueryRefused: the query needs more than"), measured
    # The interpreter's own pages beside SQLite's heap: tens of MB.
    peak = measured["children_peak_bytes"]
    assert peak < HEAP_BYTES + 96 * 1024 * 1024, f"the query's process peaked at {peak / 2**20:.0f} MiB"
    assert measured["children_written_bytes"] < 1024 * 1024, measured


async def test_a_query_of_billions_of_cheap_steps_is_refused_at_the_step_budget(start_server, tmp_path: Path):
    (tmp_path / "data").mkdir(mode=0o700)
    server = await start_server(**store_settings(sqlite_file_url(tmp_path / "data" / "toolhost.db"), tmp_path))
    refused = await memory_refused(server.stub, "memory_query", sql=(
        "WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 5000000000) "
        "SELECT count(*) FROM r"))
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT, refused.details()
    assert f"more than {MAX_STEPS:,} SQLite steps" in refused.details(), refused.details()
