"""Attacks on memory_query, on SQLite and PostgreSQL: a corpus of statements that write, change the schema, read
toolhost's other tables or the catalogs, chain statements (also behind comments), write from a CTE, ATTACH, PRAGMA,
touch files, call functions that escape a read-only role (also without name(...): [name], x.f, ::regclass), or
trick the scanner; each is refused and no table (nor, on PostgreSQL, a view, role or large object) changes. Recursive
CTE bombs end at the timeout; huge results are cut. The calls without name(...) are refused by the SQL gate itself,
not only by the databases behind it."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from sqlalchemy import URL

from toolhost_server.memory.errors import QueryRefused
from toolhost_server.memory.sql_gate import checked_query

from helpers.memory import PEOPLE_SCHEMA, call_memory_tool, dump, init_memory_role, memory
from helpers.todos import store_settings, todo

REFUSED = [
    # writes
    "INSERT INTO people (name) VALUES ('x')",
    "UPDATE people SET name = 'x'",
    "DELETE FROM people",
    "DELETE FROM memory_records",
    "REPLACE INTO memory_records (id) VALUES (1)",
    "SELECT name FROM people FOR UPDATE",
    "SELECT 1 INTO stolen",
    # DDL
    "DROP TABLE memory_records",
    "CREATE TABLE t (x integer)",
    "ALTER TABLE credentials ADD COLUMN y integer",
    "DROP VIEW people",
    "CREATE TEMP TABLE t AS SELECT 1",
    # other tables
    "SELECT * FROM credentials",
    "SELECT * FROM audit_records",
    "SELECT * FROM memory_records",
    "SELECT * FROM memory_query_role",
    "SELECT * FROM todos",
    "SELECT name FROM people UNION SELECT caller FROM audit_records",
    "SELECT (SELECT count(*) FROM credentials) AS n",
    "SELECT * FROM public.credentials",
    "SELECT * FROM main.credentials",
    # catalogs
    "SELECT * FROM sqlite_master",
    "SELECT * FROM sqlite_schema",
    "SELECT * FROM pg_catalog.pg_tables",
    "SELECT relname FROM pg_class",
    'SELECT * FROM "pg_class"',
    "SELECT * FROM information_schema.tables",
    "SELECT rolname FROM pg_roles",
    # several statements, also behind comments
    "SELECT 1; DELETE FROM memory_records",
    "SELECT 1;DROP TABLE credentials;",
    "SELECT 1 /* ; */; DELETE FROM memory_records",
    "SELECT 1 --\n; DELETE FROM memory_records",
    "SELECT 1 /* /* */ ; DELETE FROM memory_records -- */",
    # CTEs that write
    "WITH d AS (DELETE FROM memory_records RETURNING *) SELECT * FROM d",
    "WITH x AS (INSERT INTO memory_records (structure) VALUES ('people') RETURNING id) SELECT * FROM x",
    # ATTACH, PRAGMA
    "ATTACH DATABASE '/tmp/toolhost-attack.db' AS x",
    "SELECT 1; ATTACH 'file:x' AS y",
    "PRAGMA writable_schema = 1",
    "PRAGMA table_info(credentials)",
    "SELECT * FROM pragma_table_info('credentials')",
    # functions that touch files, or escape a read-only role
    "SELECT readfile('/etc/passwd')",
    "SELECT writefile('/tmp/toolhost-attack', 'x')",
    "SELECT load_extension('/tmp/toolhost-attack.so')",
    "SELECT pg_read_file('/etc/passwd')",
    "COPY memory_records TO '/tmp/toolhost-attack'",
    "SELECT lo_import('/etc/passwd')",
    "SELECT lo_create(0)",
    "SELECT set_config('role', 'none', true)",
    "SELECT query_to_xml('select * from credentials', true, false, '')",
    "SELECT pg_notify('toolhost', 'x')",
    "SELECT pg_advisory_lock(1)",
    "SELECT pg_sleep(100)",
    "SELECT zeroblob(1000000000)",
    "SELECT name FROM people, LATERAL (SELECT set_config('a.b', 'c', true)) AS s",
    # the scanner's edges: text the databases would read otherwise
    "SELECT E'\\'', set_config('a.b', 'c', true)",
    "SELECT $$x$$",
    "SELECT 1set_config('a.b', 'c', true)",
    'SELECT U&"\\0070g_class".relname FROM people',
    "SELECT \"set_config\"('a.b', 'c', true)",
    "SELECT pg_catalog.upper('x')",
    "SELECT `name` FROM people",
    "WITH r(x) AS (SELECT 1) SELECT * FROM r",
    # calls the text does not show as name(...): SQLite's [quoted] names, PostgreSQL's attribute notation (x.f is
    # f(x)), and reg* casts that look a name up in the catalogs
    "SELECT [readfile]('/etc/passwd')",
    "SELECT [name] FROM people",
    "SELECT name[1] FROM people",
    "SELECT 'credentials'::regclass",
    "SELECT CAST('credentials' AS regclass)",
    "SELECT 'toolhost_memory'::\"regnamespace\"",
    "SELECT p.row_to_json FROM people p",
    'SELECT p."quote_literal" FROM people p',
    "SELECT ('server_version').current_setting",
    "SELECT (p).name FROM people p",
    "SELECT 'unterminated",
    "SELECT 1 /* unterminated",
    "SELECT '\x00'",
    "",
    "x" * 20_001,
]
# What the gate refuses itself (the databases would too): the part of its message that says why.
GATE_REFUSES = [
    ("SELECT [readfile]('/etc/passwd')", "square brackets"),
    ("SELECT name[1] FROM people", "square brackets"),
    ("SELECT 'credentials'::regclass", "regclass"),
    ("SELECT CAST('credentials' AS regclass)", "regclass"),
    ("SELECT 'toolhost_memory'::\"regnamespace\"", "regnamespace"),
    ("SELECT p.row_to_json FROM people p", ".row_to_json is not allowed"),
    ('SELECT p."quote_literal" FROM people p', ".quote_literal is not allowed"),
    ("SELECT ('server_version').current_setting", "(...).current_setting"),
    ("SELECT (p).name FROM people p", "(...).name"),
]
# Near misses that stay allowed: a column after an alias, a JSON operator, a type that looks no name up.
GATE_PASSES = ["SELECT p.name, p.tags -> 0 FROM people p", "SELECT CAST(age AS numeric(10, 2)) FROM people",
               "SELECT 'x[1]' AS s, \"regular\" FROM people", "SELECT p.* FROM people AS p"]
# Ended by the tool's timeout: the query runs, and is stopped.
BOMBS = [
    "WITH RECURSIVE c AS (SELECT 1 AS x UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
    "WITH RECURSIVE c AS (SELECT 1 AS x UNION ALL SELECT x + 1 FROM c) SELECT max(a.x) FROM c a, c b",
]


async def test_the_corpus_is_refused_and_changes_no_table(start_server, database: URL, tmp_path: Path):
    server = await start_server(max_call_seconds=2.0, **store_settings(database, tmp_path))
    await memory(server.stub, "memory_structure_create", name="people", schema=PEOPLE_SCHEMA)
    await memory(server.stub, "memory_create", structure="people", data={"name": "Ada"})
    await todo(server.stub, action="add", content="a row in another table")
    await init_memory_role(database)
    assert (await memory(server.stub, "memory_query", sql="SELECT name FROM people"))["rows"] == [["Ada"]]
    before = dump(database)
    assert before["memory_records"] and before["todos"]

    for sql in REFUSED:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            response = await call_memory_tool(server.stub, "memory_query", "", {"sql": sql})
            pytest.fail(f"{sql!r} was not refused: {response}")
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (sql, refused.value.details())
    for sql in BOMBS:
        response = await call_memory_tool(server.stub, "memory_query", "", {"sql": sql})
        assert not response.success and response.error.code == "QUERY_TIMEOUT", (sql, response.error)
    huge = await memory(server.stub, "memory_query", sql=(
        "WITH RECURSIVE c AS (SELECT 1 AS x UNION ALL SELECT x + 1 FROM c) SELECT x, 'padding' AS p FROM c"))
    assert huge["truncated"] is True and huge["row_count"] == 1000

    after = dump(database)
    # Every call is audited: the audit trail only grew, by the calls' own records; nothing else changed.
    assert set(before.pop("audit_records")) <= set(after.pop("audit_records"))
    assert after == before
    # And the memory still answers, as it did.
    assert (await memory(server.stub, "memory_query", sql="SELECT name FROM people"))["rows"] == [["Ada"]]


@pytest.mark.parametrize(("sql", "why"), GATE_REFUSES)
def test_the_gate_itself_refuses_calls_it_cannot_see_as_name_parenthesis(sql: str, why: str):
    with pytest.raises(QueryRefused) as refused:
        checked_query(sql)
    assert why in str(refused.value)


@pytest.mark.parametrize("sql", GATE_PASSES)
def test_the_gate_passes_near_misses(sql: str):
    assert checked_query(sql) == sql
