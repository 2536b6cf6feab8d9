"""The store's schema versions: a database of the previous release (no version table) migrated at start with its
rows kept, a new one created at the latest version, one from a newer toolhost refused, replicas starting together,
user-tool versions from before migration 7; on SQLite and on a real PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
from sqlalchemy import URL, Engine, insert, inspect, select

from toolhost_server.audit import AuditRecord
from toolhost_server.auth import ANONYMOUS
from toolhost_server.store import schema_v1
from toolhost_server.store.audit_table import AuditTable
from toolhost_server.store.database import Store
from toolhost_server.store.engine import create_store_engine, sqlite_file_url
from toolhost_server.store.errors import StoreError, StoreSchemaError
from toolhost_server.store.migrations import LATEST_VERSION, MIGRATIONS, current_version, schema_version
from toolhost_server.store.schema import todos, tool_versions, user_tools
from toolhost_server.user_tools.records import VersionDetails

from helpers.calls import call
from helpers.servers import ServerProcess
from postgres_cluster import PostgresCluster

OLD_AUDIT_ROW = {
    "time": datetime(2024, 5, 1, 12, 0, tzinfo=UTC), "caller": "anonymous", "auth_method": "none", "tool": "echo",
    "call_id": "before-the-migration", "trace_id": "ab" * 16, "duration_ms": 1.5, "outcome": "OK",
    "argument_keys": ["text"],
}
OLD_LOG_ROW = {
    "time": datetime(2024, 5, 1, 12, 0, 1, tzinfo=UTC), "level": "INFO", "level_number": 1, "logger": "toolhost",
    "message": "kept across the migration", "trace_id": "", "span_id": "", "instance": "old-replica",
    "fields": {"answer": 42},
}


@pytest.fixture
def another_database(database: URL, request: pytest.FixtureRequest, tmp_path: Path) -> URL:
    """A second empty database of the same kind as `database`."""
    if database.get_backend_name() == "sqlite":
        return sqlite_file_url(tmp_path / "data" / "another.db")
    cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
    name = cluster.create_database()
    request.addfinalizer(lambda: cluster.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    return cluster.url(name)


@pytest.fixture
def engine(database: URL) -> Iterator[Engine]:
    """An engine of its own on `database`, to build and inspect it beside the store under test."""
    opened = create_store_engine(database)
    yield opened
    opened.dispose()


def create_previous_release_database(engine: Engine) -> None:
    """The database toolhost 0.1 (before schema versions) made: its tables, no schema_version, and some rows."""
    with engine.begin() as connection:
        schema_v1.metadata.create_all(connection)
        connection.execute(insert(schema_v1.metadata.tables["audit_records"]), [OLD_AUDIT_ROW])
        connection.execute(insert(schema_v1.metadata.tables["logs"]), [OLD_LOG_ROW])


def create_version_2_database(engine: Engine) -> None:
    """The database toolhost made at schema version 2 (before the todos table), with the previous release's rows."""
    create_database_at(engine, 2)


def create_database_at(engine: Engine, version: int) -> None:
    """The database toolhost made at schema `version`, with the previous release's rows."""
    create_previous_release_database(engine)
    with engine.begin() as connection:
        schema_version.metadata.create_all(connection)
        for migration in MIGRATIONS[:version]:
            migration.apply(connection)
            connection.execute(insert(schema_version), [{
                "version": migration.version, "applied_at": datetime.now(UTC), "toolhost_version": "0.2.0",
                "description": migration.description}])


def open_store(url: URL) -> None:
    """Open a store on `url` (which migrates it) and close it."""
    store = Store(url)
    try:
        store.open()
    finally:
        store.close()


def versions(engine: Engine) -> list[tuple[int, str]]:
    with engine.begin() as connection:
        rows = connection.execute(
            select(schema_version.c.version, schema_version.c.description).order_by(schema_version.c.version))
        return [(version, description) for version, description in rows]


def schema_of(engine: Engine) -> dict[str, Any]:
    """Every table's columns (type, nullability, default), indexes and primary key, as the database reports them."""
    inspector = inspect(engine)
    return {table: {
        "columns": {column["name"]: (str(column["type"]), column["nullable"], column.get("default"))
                    for column in inspector.get_columns(table)},
        "indexes": sorted((index["name"], tuple(index["column_names"]), bool(index["unique"]))
                          for index in inspector.get_indexes(table)),
        "primary_key": tuple(inspector.get_pk_constraint(table)["constrained_columns"]),
    } for table in inspector.get_table_names()}


def column_names(engine: Engine, table: str) -> set[str]:
    return {column["name"] for column in inspect(engine).get_columns(table)}


def server_store_settings(database: URL, tmp_path: Path) -> dict[str, str]:
    """Config fields that point a server at `database`."""
    if database.get_backend_name() == "sqlite":
        assert database.database is not None
        return {"data_dir": str(Path(database.database).parent)}
    return {"database_url": database.render_as_string(hide_password=False), "data_dir": str(tmp_path / "unused")}


async def test_a_previous_release_database_is_migrated_when_the_server_starts_and_keeps_its_rows(
        database: URL, engine: Engine, tmp_path: Path, start_server):
    create_previous_release_database(engine)
    assert "argument_key_count" not in column_names(engine, "audit_records")

    server = await start_server(**server_store_settings(database, tmp_path))
    # At start, before any call has written to the store: recognised as version 1, then migrated to 2.
    assert versions(engine)[:3] == [
        (1, "the credentials, audit_records and logs tables (toolhost before schema versions)"),
        (2, "audit_records.argument_key_count (0 for older rows)"),
        (3, "the todos table (the todo tool's lists)")]
    assert [version for version, _ in versions(engine)] == list(range(1, LATEST_VERSION + 1))
    assert "argument_key_count" in column_names(engine, "audit_records")

    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call(server, "no_such_tool", {f"key{i}": i for i in range(70)}, call_id="after-the-migration")
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    await server.toolhost.audit.close()  # writes the waiting audit records

    store = Store(database)
    try:
        rows = {record.call_id: record for record in AuditTable(store).latest()}
    finally:
        store.close()
    assert set(rows) == {"before-the-migration", "after-the-migration"}
    old = rows["before-the-migration"]
    assert (old.tool, old.argument_keys, old.argument_key_count) == ("echo", ("text",), 0)
    new = rows["after-the-migration"]
    assert (len(new.argument_keys), new.argument_key_count) == (64, 70)
    with engine.begin() as connection:
        [log_row] = connection.execute(select(schema_v1.metadata.tables["logs"])).mappings().all()
    assert (log_row["message"], log_row["fields"]) == ("kept across the migration", {"answer": 42})


async def test_a_version_2_database_gets_the_todos_table_at_start_and_keeps_its_rows(
        database: URL, engine: Engine, tmp_path: Path, start_server):
    create_version_2_database(engine)
    assert "todos" not in inspect(engine).get_table_names()

    server = await start_server(**server_store_settings(database, tmp_path))
    assert [version for version, _ in versions(engine)] == list(range(1, LATEST_VERSION + 1))
    assert versions(engine)[2] == (3, "the todos table (the todo tool's lists)")
    response = await call(server, "todo", action="add", content="kept in the new table")
    assert response.success, response.error
    listed = await call(server, "todo", action="list")
    assert listed.output.splitlines()[-1] == "[ ] 1. kept in the new table"

    with engine.begin() as connection:
        old_audit_rows = connection.execute(select(schema_v1.metadata.tables["audit_records"].c.call_id)
                                            .where(schema_v1.metadata.tables["audit_records"].c.tool == "echo")).all()
        [todo_row] = connection.execute(select(todos)).mappings().all()
    assert old_audit_rows == [("before-the-migration",)]
    assert (todo_row["owner"], todo_row["session"], todo_row["id"]) == ("anonymous:anonymous", "default", 1)

def test_a_replica_of_the_previous_release_can_still_write_audit_rows_after_the_migration(
        database: URL, engine: Engine):
    # During a rolling update old replicas run beside migrated ones: their INSERT names no argument_key_count.
    create_previous_release_database(engine)
    open_store(database)
    with engine.begin() as connection:
        connection.execute(insert(schema_v1.metadata.tables["audit_records"]),
                           [{**OLD_AUDIT_ROW, "call_id": "from-an-old-replica"}])
    store = Store(database)
    try:
        [record] = [r for r in AuditTable(store).latest() if r.call_id == "from-an-old-replica"]
    finally:
        store.close()
    assert record.argument_key_count == 0


def test_a_new_database_gets_the_latest_version_at_once_and_the_same_schema_as_a_migrated_one(
        database: URL, engine: Engine, another_database: URL):
    open_store(database)
    assert versions(engine) == [(LATEST_VERSION, "created at this version")]
    created = schema_of(engine)

    migrated_engine = create_store_engine(another_database)
    try:
        create_previous_release_database(migrated_engine)
        open_store(another_database)
        assert [version for version, _ in versions(migrated_engine)] == list(range(1, LATEST_VERSION + 1))
        assert schema_of(migrated_engine) == created
    finally:
        migrated_engine.dispose()


def mark_as_migrated_by_a_newer_toolhost(engine: Engine) -> None:
    with engine.begin() as connection:
        connection.execute(insert(schema_version), [{
            "version": LATEST_VERSION + 1, "applied_at": datetime.now(UTC), "toolhost_version": "9.9.0",
            "description": "something this toolhost does not know"}])


def test_a_database_from_a_newer_toolhost_is_refused_and_left_as_it_is(database: URL, engine: Engine):
    open_store(database)
    mark_as_migrated_by_a_newer_toolhost(engine)
    before = schema_of(engine)
    store = Store(database)
    with pytest.raises(StoreSchemaError) as refused:
        AuditTable(store).append([AuditRecord(
            time=datetime.now(UTC), caller="anonymous", auth_method="none", tool="echo", call_id="refused",
            trace_id="cd" * 16, duration_ms=0.5, outcome="OK", argument_keys=("text",), argument_key_count=1)])
    store.close()
    message = str(refused.value)
    assert f"has schema version {LATEST_VERSION + 1}, newer than this toolhost" in message
    assert f"(up to {LATEST_VERSION}): toolhost 9.9.0 migrated it" in message
    assert "set database_url (TOOLHOST_DATABASE_URL) to another database" in message
    if database.password:
        assert str(database.password) not in message
    with engine.begin() as connection:
        assert current_version(connection) == LATEST_VERSION + 1
        assert connection.execute(select(schema_v1.metadata.tables["audit_records"])).all() == []
    assert schema_of(engine) == before


async def test_a_server_does_not_start_against_a_database_from_a_newer_toolhost(database: URL, engine: Engine):
    open_store(database)
    mark_as_migrated_by_a_newer_toolhost(engine)
    if database.get_backend_name() == "sqlite":
        assert database.database is not None
        environment = {"TOOLHOST_DATA_DIR": str(Path(database.database).parent)}
    else:
        environment = {"TOOLHOST_DATABASE_URL": database.render_as_string(hide_password=False)}
    server = ServerProcess(env=environment)
    try:
        with pytest.raises(RuntimeError, match="server exited before listening"):
            await server.start()
        assert await server.wait() == 1
    finally:
        await server.stop()
    assert b"cannot start: the database " in server.log
    assert f"has schema version {LATEST_VERSION + 1}".encode() in server.log
    assert b"toolhost 9.9.0 migrated it" in server.log


def open_together(stores: list[Store]) -> list[BaseException]:
    """Open every store at once, each in its own thread released by one barrier; the errors raised."""
    barrier = threading.Barrier(len(stores))
    errors: list[BaseException] = []

    def open_one(store: Store) -> None:
        barrier.wait()
        try:
            store.open()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for store in stores:
        store.close()
    return errors


def test_stores_opening_one_new_database_together_all_succeed_and_it_is_created_once(database: URL, engine: Engine):
    assert open_together([Store(database) for _ in range(4)]) == []
    assert versions(engine) == [(LATEST_VERSION, "created at this version")]


def test_stores_opening_one_old_database_together_migrate_it_once(database: URL, engine: Engine):
    create_previous_release_database(engine)
    assert open_together([Store(database) for _ in range(4)]) == []
    assert [version for version, _ in versions(engine)] == list(range(1, LATEST_VERSION + 1))
    assert "argument_key_count" in column_names(engine, "audit_records")


def test_each_migration_is_its_own_transaction_so_a_failed_one_leaves_the_versions_before_it(
        database: URL, engine: Engine):
    create_previous_release_database(engine)
    with engine.begin() as connection:  # what migration 2 adds, already there: its ALTER TABLE fails
        connection.exec_driver_sql("ALTER TABLE audit_records ADD COLUMN argument_key_count INTEGER")
    with pytest.raises(StoreError):
        open_store(database)
    assert [version for version, _ in versions(engine)] == [1]
    with engine.begin() as connection:
        assert connection.execute(select(schema_v1.metadata.tables["audit_records"].c.call_id)).scalars().all() \
            == ["before-the-migration"]


async def test_versions_stored_before_migration_7_restore_what_they_kept_and_newer_ones_restore_everything(
        database: URL, engine: Engine, tmp_path: Path, start_server):
    create_database_at(engine, 6)
    assert "details" not in column_names(engine, "tool_versions")
    created = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    with engine.begin() as connection:  # what a version-6 toolhost stored: its version rows had no details
        connection.execute(insert(user_tools).values(
            slug="old_tool", name="Old", description="Made before migration 7.", category="custom",
            system_prompt="old prompt", input_schema={"type": "object"}, script="echo old", enabled=True,
            timeout_seconds=None, tags=["old"], credentials=[], version=1, created_by="alice", created_at=created,
            updated_at=created))
        connection.execute(insert(tool_versions).values(
            slug="old_tool", version=1, script="echo old", system_prompt="old prompt",
            input_schema={"type": "object"}, changed_by="alice", change="create", created_at=created))

    server = await start_server(process_user="nobody", **server_store_settings(database, tmp_path))
    assert [version for version, _ in versions(engine)] == list(range(1, LATEST_VERSION + 1))
    tools = server.toolhost.user_tools
    await tools.update(ANONYMOUS, "old_tool", {"script": "echo new", "description": "Changed since.",
                                               "tags": ("new",)})
    [newer, older], _ = await tools.versions(ANONYMOUS, "old_tool", 0, "")
    assert older.details is None
    assert newer.details == VersionDetails(name="Old", description="Changed since.", category="custom",
                                           timeout_seconds=None, tags=("new",), credentials=())
    restored = await tools.restore(ANONYMOUS, "old_tool", 1)
    # The script, system prompt and schema version 1 kept come back; what it did not keep stays as it is.
    assert (restored.script, restored.system_prompt, restored.description, restored.tags) == (
        "echo old", "old prompt", "Changed since.", ("new",))
    response = await call(server, "old_tool")
    assert response.success and response.output == "old\n"
