"""PocketDev's memory tools through a real server, on SQLite and PostgreSQL: structures and their schema checks,
records validated on create and update (merge and replace), deletes refused while records exist, memory_query over
the views with its row cap, PostgreSQL without its memory role, and memory shared only with the callers allowed it."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import grpc
from sqlalchemy import URL
from sqlalchemy import text as sql_text

from toolhost_server.auth import hash_token
from toolhost_server.store.engine import create_store_engine

from helpers.memory import PEOPLE_SCHEMA, init_memory_role, memory, memory_refused
from helpers.status import error_details
from helpers.todos import store_settings

MEMORY_TOOLS = ("memory_structure_create", "memory_structure_get", "memory_structure_delete", "memory_create",
                "memory_update", "memory_delete", "memory_query")


async def test_structures_records_and_queries(start_server, database: URL, tmp_path: Path):
    server = await start_server(**store_settings(database, tmp_path))
    created = await memory(server.stub, "memory_structure_create", name="people", description="who we met",
                           schema=PEOPLE_SCHEMA)
    assert created["columns"] == ["id", "created_at", "updated_at", "name", "age", "friend_id", "tags"]
    if database.get_backend_name() == "postgresql":
        refused = await memory_refused(server.stub, "memory_query", sql="SELECT * FROM people")
        assert refused.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "toolhost db init-memory-role" in refused.details()
        await init_memory_role(database)

    ada = await memory(server.stub, "memory_create", structure="people", data={"name": "Ada", "age": 36})
    bob = await memory(server.stub, "memory_create", structure="people",
                       data={"name": "Bob", "age": 41, "friend_id": int(ada["id"]), "tags": ["x"]})
    assert ada["data"] == {"name": "Ada", "age": 36.0} and int(bob["id"]) > int(ada["id"])

    merged = await memory(server.stub, "memory_update", structure="people", id=int(ada["id"]),
                          data={"age": 37, "tags": ["math"]})
    assert merged["data"] == {"name": "Ada", "age": 37.0, "tags": ["math"]}
    removed = await memory(server.stub, "memory_update", structure="people", id=int(ada["id"]), data={"age": None})
    assert removed["data"] == {"name": "Ada", "tags": ["math"]}
    replaced = await memory(server.stub, "memory_update", structure="people", id=int(bob["id"]), mode="replace",
                            data={"name": "Robert"})
    assert replaced["data"] == {"name": "Robert"}

    result = await memory(server.stub, "memory_query",
                          sql="SELECT p.name, f.name AS friend FROM people p LEFT JOIN people f ON f.id = p.friend_id "
                              "ORDER BY p.name;")
    assert result == {"columns": ["name", "friend"], "rows": [["Ada", None], ["Robert", None]], "row_count": 2.0,
                      "truncated": False}
    counted = await memory(server.stub, "memory_query",
                           sql="SELECT count(*) AS n, max(upper(name)) AS top FROM people WHERE name LIKE 'A%'")
    assert counted["rows"] == [[1.0, "ADA"]]
    if database.get_backend_name() == "postgresql":
        # Types JSON has no word for: an interval (age() is allowed) in seconds, a time as text, an array as a list.
        typed = await memory(server.stub, "memory_query", sql=(
            "SELECT age(timestamp '2020-01-03 00:00', timestamp '2020-01-01 12:00') AS waited, "
            "time '10:30' AS at, ARRAY(SELECT interval '1 minute') AS steps"))
        assert typed["rows"] == [[129600.0, "10:30:00", [60.0]]]

    # More rows than memory_query sends: the first 1000, and truncated says so.
    many = await memory(server.stub, "memory_query", sql=(
        "WITH RECURSIVE c AS (SELECT 1 AS x UNION ALL SELECT x + 1 FROM c WHERE x < 1500) SELECT x FROM c"))
    assert many["truncated"] is True and many["row_count"] == 1000 and many["rows"][-1] == [1000.0]

    refused = await memory_refused(server.stub, "memory_structure_delete", name="people")
    assert refused.code() == grpc.StatusCode.FAILED_PRECONDITION and "force" in refused.details()
    gone = await memory(server.stub, "memory_delete", structure="people", id=int(bob["id"]))
    assert gone["data"] == {"name": "Robert"}
    assert (await memory_refused(server.stub, "memory_delete", structure="people", id=int(bob["id"]))).code() \
        == grpc.StatusCode.NOT_FOUND
    deleted = await memory(server.stub, "memory_structure_delete", name="people", force=True)
    assert deleted == {"name": "people", "deleted_records": 1.0}
    assert (await memory(server.stub, "memory_structure_get")) == {"structures": []}
    assert (await memory_refused(server.stub, "memory_structure_get", name="people")).code() \
        == grpc.StatusCode.NOT_FOUND
    refused = await memory_refused(server.stub, "memory_query", sql="SELECT * FROM people")
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT
    # The name is free again, with another schema and so another view.
    await memory(server.stub, "memory_structure_create", name="people",
                 schema={"type": "object", "properties": {"nick": {"type": "string"}}})
    await memory(server.stub, "memory_create", structure="people", data={"nick": "ada"})
    assert (await memory(server.stub, "memory_query", sql="SELECT nick FROM people"))["rows"] == [["ada"]]


BAD_SCHEMAS = [
    ({"type": "object", "properties": {"a": {"type": "nonsense"}}}, "/schema", "not a valid JSON Schema"),
    ({"type": "array"}, "/schema/type", '"type": "object"'),
    ({"type": "object"}, "/schema/properties", "name the record's fields"),
    ({"type": "object", "properties": {"first name": {"type": "string"}}}, "/schema/properties/first name",
     "becomes a column"),
    ({"type": "object", "properties": {"id": {"type": "string"}}}, "/schema/properties/id", "own columns"),
    ({"type": "object", "properties": {"pg_x": {}}}, "/schema/properties/pg_x", "may not start with"),
    ({"type": "object", "properties": {"Name": {}, "name": {}}}, "/schema/properties/name", "only in case"),
]


async def test_schema_and_data_violations_are_invalid_argument(start_server, tmp_path: Path):
    server = await start_server()
    for schema, pointer, reason in BAD_SCHEMAS:
        refused = await memory_refused(server.stub, "memory_structure_create", name="bad", schema=schema)
        assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT, schema
        violations = error_details(refused)[1]
        assert violations[0][0] == pointer and reason in violations[0][1], (schema, violations)
    for name in ("pg_class", "sqlite_master", "People", "1x", "a-b", ""):
        refused = await memory_refused(server.stub, "memory_structure_create", name=name, schema=PEOPLE_SCHEMA)
        assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT, name
    assert (await memory(server.stub, "memory_structure_get")) == {"structures": []}

    await memory(server.stub, "memory_structure_create", name="people", schema=PEOPLE_SCHEMA)
    refused = await memory_refused(server.stub, "memory_structure_create", name="people", schema=PEOPLE_SCHEMA)
    assert refused.code() == grpc.StatusCode.ALREADY_EXISTS
    refused = await memory_refused(server.stub, "memory_create", structure="people",
                                   data={"age": "old", "nickname": "x"})
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT
    fields = dict(error_details(refused)[1])
    assert set(fields) == {"/data/name", "/data/age", "/data/nickname"}, fields
    assert "required field is missing" in fields["/data/name"] and "integer" in fields["/data/age"]
    record = await memory(server.stub, "memory_create", structure="people", data={"name": "Ada"})
    # An update is validated as a whole record: merge may not break it, replace may not drop a required field.
    for mode, data, pointer in (("merge", {"age": 1.5}, "/data/age"), ("merge", {"name": None}, "/data/name"),
                                ("replace", {"age": 3}, "/data/name")):
        refused = await memory_refused(server.stub, "memory_update", structure="people", id=int(record["id"]),
                                       mode=mode, data=data)
        assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT and error_details(refused)[1][0][0] == pointer
    assert (await memory(server.stub, "memory_query", sql="SELECT name, age FROM people"))["rows"] == [["Ada", None]]
    refused = await memory_refused(server.stub, "memory_create", structure="nothing", data={"name": "x"})
    assert refused.code() == grpc.StatusCode.NOT_FOUND and "memory_structure_get" in refused.details()


async def test_memory_is_shared_by_the_callers_allowed_it_and_hidden_from_others(start_server, tmp_path: Path):
    alice, bob, carol = (secrets.token_urlsafe(32) for _ in range(3))
    (tmp_path / "auth.yaml").write_text(f"""\
roles:
  rememberer:
    call: {{categories: [memory]}}
  other:
    call: {{tools: [echo]}}
tokens:
  - {{name: alice, sha256: {hash_token(alice)}, roles: [rememberer]}}
  - {{name: bob, sha256: {hash_token(bob)}, roles: [rememberer]}}
  - {{name: carol, sha256: {hash_token(carol)}, roles: [other]}}
""")
    server = await start_server(auth_file=tmp_path / "auth.yaml")
    await memory(server.stub, "memory_structure_create", alice, name="notes", schema={
        "type": "object", "properties": {"text": {"type": "string"}}})
    await memory(server.stub, "memory_create", alice, structure="notes", data={"text": "alice's"})
    assert (await memory(server.stub, "memory_query", bob, sql="SELECT text FROM notes"))["rows"] == [["alice's"]]
    for tool in MEMORY_TOOLS:
        refused = await memory_refused(server.stub, tool, carol, structure="notes", name="notes", sql="SELECT 1",
                                       data={}, id=1)
        assert refused.code() == grpc.StatusCode.NOT_FOUND, tool
        assert "notes" not in refused.details()
    assert (await memory(server.stub, "memory_query", alice, sql="SELECT count(*) FROM notes"))["rows"] == [[1.0]]


async def test_every_record_the_memory_keeps_is_one_memory_query_can_read(start_server, database: URL,
                                                                          tmp_path: Path):
    """A record is at most 64 KiB as stored (non-ASCII as \\u escapes), which is the longest value memory_query
    reads: the largest record is read back whole, a larger one is refused when written."""
    server = await start_server(**store_settings(database, tmp_path))
    await memory(server.stub, "memory_structure_create", name="notes",
                 schema={"type": "object", "properties": {"text": {"type": "string"}}})
    await init_memory_role(database)
    largest = "x" * (64 * 1024 - len('{"text": ""}'))
    await memory(server.stub, "memory_create", structure="notes", data={"text": largest})
    for text in (largest + "x", "é" * 12_000):  # the second is 24,000 bytes of UTF-8 but 72,000 stored
        refused = await memory_refused(server.stub, "memory_create", structure="notes", data={"text": text})
        assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_details(refused)[1][0][0] == "/data" and "at most 65536" in refused.details()
    result = await memory(server.stub, "memory_query", sql="SELECT text, length(text) AS n FROM notes")
    assert result["rows"] == [[largest, float(len(largest))]] and result["truncated"] is False


# 100,000 records (a structure's most), each about 300 bytes as stored, made in one statement.
_FULL_STRUCTURE = {
    "sqlite": ("WITH RECURSIVE n(i) AS (SELECT 2 UNION ALL SELECT i + 1 FROM n WHERE i < 100000) "
               "INSERT INTO memory_records (structure, data, created_by, updated_by, created_at, updated_at) "
               "SELECT r.structure, json_object('name', 'person ' || n.i, 'age', n.i % 99, 'city', "
               "char(97 + n.i % 5), 'note', substr(hex(zeroblob(100)), 1, 200) || n.i), r.created_by, r.updated_by, "
               "r.created_at, r.updated_at FROM memory_records AS r, n"),
    "postgresql": ("INSERT INTO memory_records (structure, data, created_by, updated_by, created_at, updated_at) "
                   "SELECT r.structure, json_build_object('name', 'person ' || n.i, 'age', n.i % 99, 'city', "
                   "chr(97 + n.i % 5), 'note', repeat('0', 200) || n.i), r.created_by, r.updated_by, r.created_at, "
                   "r.updated_at FROM memory_records AS r, generate_series(2, 100000) AS n(i)"),
}


async def test_whole_structure_queries_over_100000_records_stay_within_the_query_bounds(
        start_server, database: URL, tmp_path: Path):
    """The bounds on a query's work (SQLite: its heap and steps; PostgreSQL: work_mem and temp_file_limit) leave
    room for sorting, grouping, ranking and DISTINCT over every record a structure may hold."""
    server = await start_server(**store_settings(database, tmp_path))
    await memory(server.stub, "memory_structure_create", name="people", schema={"type": "object", "properties": {
        "name": {"type": "string"}, "age": {"type": "integer"}, "city": {"type": "string"},
        "note": {"type": "string"}}})
    await memory(server.stub, "memory_create", structure="people",
                 data={"name": "person 1", "age": 1, "city": "b", "note": "0" * 200 + "1"})
    await init_memory_role(database)
    engine = create_store_engine(database)
    try:
        with engine.begin() as connection:
            connection.execute(sql_text(_FULL_STRUCTURE[database.get_backend_name()]))
    finally:
        engine.dispose()

    async def query(sql: str) -> Any:
        return (await memory(server.stub, "memory_query", sql=sql))["rows"]

    assert await query("SELECT count(*) AS n, count(DISTINCT name) AS names, count(DISTINCT note) AS notes "
                       "FROM people") == [[100000.0, 100000.0, 100000.0]]
    assert await query("SELECT city, count(*) AS n FROM people GROUP BY city ORDER BY city") == [
        [city, 20000.0] for city in "abcde"]
    everyone = await memory(server.stub, "memory_query", sql="SELECT * FROM people ORDER BY note DESC, name")
    assert everyone["truncated"] is True and everyone["rows"][0][3] == "person 99999"
    assert await query("SELECT name FROM (SELECT name, rank() OVER (PARTITION BY city ORDER BY age DESC, note) AS r "
                       "FROM people) AS ranked WHERE r = 1 ORDER BY name") == [
        ["person 10097"], ["person 10196"], ["person 10295"], ["person 10394"], ["person 10493"]]
    assert await query("SELECT count(*) AS n FROM (SELECT DISTINCT note, city FROM people) AS d") == [[100000.0]]
