"""database_schema against real servers: the store and a second SQLite file (tables, columns, defaults, indexes,
foreign keys), a PostgreSQL database reached as a password-protected login role, broken connections (a closed
port, a missing SQLite file that must stay missing), row-count estimates, and counts stopped by their timeout."""

from __future__ import annotations

import json
import secrets
import socket
import sqlite3
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from sqlalchemy import make_url
from sqlalchemy.exc import OperationalError

from toolhost.v1 import tool_service_pb2
from toolhost_server.auth import hash_token
from toolhost_server.introspection import database_row_counts, database_schemas
from toolhost_server.introspection.database_schema_reader import describe_tables, list_tables
from toolhost_server.introspection.database_sources import DatabaseSource, read_only_connection
from toolhost_server.introspection.statement_clock import StatementClock

from helpers.servers import RunningServer, ServerFactory

SHOP_SCHEMA = """
CREATE TABLE customers (
    id INTEGER PRIMARY KEY,
    email VARCHAR(200) NOT NULL,
    created TEXT DEFAULT (datetime('now')),
    location geometry
);
CREATE UNIQUE INDEX customers_by_email ON customers (email);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers (id) ON DELETE CASCADE,
    total NUMERIC(10, 2) DEFAULT 0,
    status TEXT NOT NULL DEFAULT 'open'
);
CREATE INDEX orders_by_customer ON orders (customer_id, status);
"""


def make_shop(path: Path, orders: int = 3) -> Path:
    with sqlite3.connect(path) as connection:
        connection.executescript(SHOP_SCHEMA)
        connection.execute("INSERT INTO customers (id, email) VALUES (1, 'a@example.org'), (2, 'b@example.org')")
        connection.executemany("INSERT INTO orders (customer_id, total) VALUES (?, ?)",
                               [(1 + i % 2, i) for i in range(orders)])
    connection.close()
    return path


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


async def schema(server: RunningServer, **arguments: Any) -> dict[str, Any]:
    response = await call(server, **arguments)
    assert response.success, response.error
    result: dict[str, Any] = json.loads(response.output)
    return result


async def call(server: RunningServer, token: str = "", **arguments: Any) -> tool_service_pb2.CallToolResponse:
    metadata = (("authorization", f"Bearer {token}"),) if token else None
    response: tool_service_pb2.CallToolResponse = await server.stub.CallTool(tool_service_pb2.CallToolRequest(
        name="database_schema", arguments_json=json.dumps(arguments)), metadata=metadata)
    return response


def database(result: dict[str, Any], name: str) -> dict[str, Any]:
    [found] = [entry for entry in result["databases"] if entry["name"] == name]
    return found


def table(entry: dict[str, Any], name: str) -> dict[str, Any]:
    [found] = [t for t in entry["tables"] if t["name"] == name]
    return found


def closed_port() -> int:
    """A port nothing listens on: bound, then released (connecting to it is refused at once)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# --- SQLite: the store and a configured file ------------------------------------------------------------------


async def test_every_configured_database_is_described_without_naming_it(start_server: ServerFactory, tmp_path):
    shop = make_shop(tmp_path / "shop.db")
    server = await start_server(databases=(("shop", sqlite_url(shop)),))

    result = await schema(server)

    assert [entry["name"] for entry in result["databases"]] == ["store", "shop"]
    store = database(result, "store")
    assert store["dialect"] == "sqlite" and "audit_records" in [t["name"] for t in store["tables"]]
    shop_entry = database(result, "shop")
    assert shop_entry["url"] == f"sqlite:///{shop}" and shop_entry["table_count"] == 2
    customers = table(shop_entry, "customers")
    assert customers["columns"] == [
        {"name": "id", "type": "INTEGER", "nullable": True, "default": None},
        {"name": "email", "type": "VARCHAR(200)", "nullable": False, "default": None},
        {"name": "created", "type": "TEXT", "nullable": True, "default": "datetime('now')"},
        # The type as declared, not SQLite's affinity for a name it does not know (NUMERIC).
        {"name": "location", "type": "geometry", "nullable": True, "default": None},
    ]
    assert customers["primary_key"] == ["id"]
    assert customers["indexes"] == [{"name": "customers_by_email", "columns": ["email"], "unique": True}]
    orders = table(shop_entry, "orders")
    assert orders["indexes"] == [{"name": "orders_by_customer", "columns": ["customer_id", "status"],
                                  "unique": False}]
    assert orders["foreign_keys"] == [{"name": "", "columns": ["customer_id"],
                                       "references": {"table": "customers", "columns": ["id"]},
                                       "on_delete": "CASCADE", "on_update": None}]
    assert {c["name"]: c["default"] for c in orders["columns"]}["status"] == "'open'"
    assert "row_count" not in orders  # counted only when asked
    assert result["summary"] == {"databases": 2, "failed": 0, "tables": len(store["tables"]) + 2,
                                 "tables_total": store["table_count"] + 2, "notes": []}


async def test_table_narrows_to_one_table_and_row_counts_are_exact(start_server: ServerFactory, tmp_path):
    shop = make_shop(tmp_path / "shop.db", orders=7)
    server = await start_server(databases=(("shop", sqlite_url(shop)),))

    result = await schema(server, database="shop", table="orders", row_counts=True)

    [entry] = result["databases"]
    [orders] = entry["tables"]
    assert (orders["name"], orders["row_count"], orders["row_count_kind"]) == ("orders", 7, "exact")
    # Without `database`, only the databases that have the table are listed.
    everywhere = await schema(server, table="orders")
    assert [e["name"] for e in everywhere["databases"]] == ["shop"]


async def test_unknown_database_or_table_is_not_found_with_close_names(start_server: ServerFactory, tmp_path):
    shop = make_shop(tmp_path / "shop.db")
    server = await start_server(databases=(("shop", sqlite_url(shop)),))

    unknown_database = await call(server, database="shops")
    assert not unknown_database.success and unknown_database.error.code == "NOT_FOUND"
    assert "store, shop" in unknown_database.error.message
    unknown_table = await call(server, database="shop", table="order")
    assert not unknown_table.success and unknown_table.error.code == "NOT_FOUND"
    assert "orders" in unknown_table.error.message
    nowhere = await call(server, table="ordrs")
    assert nowhere.error.code == "NOT_FOUND" and "orders" in nowhere.error.message


async def test_a_missing_sqlite_file_is_an_entry_with_an_error_and_is_not_created(start_server: ServerFactory,
                                                                                   tmp_path):
    missing = tmp_path / "nowhere" / "missing.db"
    shop = make_shop(tmp_path / "shop.db")
    server = await start_server(databases=(("gone", sqlite_url(missing)), ("shop", sqlite_url(shop))))

    result = await schema(server, row_counts=True)

    gone = database(result, "gone")
    assert "does not exist" in gone["error"] and "tables" not in gone
    assert not missing.exists() and not missing.parent.exists()
    assert table(database(result, "shop"), "orders")["row_count"] == 3  # the others still answer
    assert result["summary"]["failed"] == 1
    assert any(note.startswith("gone: ") for note in result["summary"]["notes"])
    # Named alone, it is the same entry, not a failed call.
    assert "does not exist" in (await schema(server, database="gone"))["databases"][0]["error"]


async def test_reading_changes_no_byte_of_the_file(start_server: ServerFactory, tmp_path):
    shop = make_shop(tmp_path / "shop.db")
    before = shop.read_bytes()
    server = await start_server(databases=(("shop", sqlite_url(shop)),))
    await schema(server, database="shop", row_counts=True)
    assert shop.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shop.db"]  # no journal, -wal or -shm left behind


async def test_sqlite_estimates_come_from_sqlite_stat1_above_the_threshold(start_server: ServerFactory, tmp_path,
                                                                           monkeypatch):
    # A million rows would make a slow test: the threshold is lowered (a module constant, not a setting).
    monkeypatch.setattr(database_row_counts, "ESTIMATE_ABOVE_ROWS", 100)
    shop = make_shop(tmp_path / "shop.db", orders=500)
    with sqlite3.connect(shop) as connection:
        connection.execute("ANALYZE")
        # Rows added after ANALYZE: an estimate still says 500, where a count would say 600.
        connection.executemany("INSERT INTO orders (customer_id) VALUES (?)", [(1,)] * 100)
    connection.close()
    server = await start_server(databases=(("shop", sqlite_url(shop)),))

    entry = database(await schema(server, database="shop", row_counts=True), "shop")

    orders, customers = table(entry, "orders"), table(entry, "customers")
    assert (orders["row_count"], orders["row_count_kind"]) == (500, "estimate")
    assert (customers["row_count"], customers["row_count_kind"]) == (2, "exact")


def test_a_sqlite_count_waiting_on_a_writer_is_timed_out(tmp_path):
    """A writer holds the database for longer than a count may wait: the count says timed_out. Counted after the
    tables were read, as it happens when a writer starts in between."""
    shop = make_shop(tmp_path / "shop.db")
    source = DatabaseSource("shop", make_url(sqlite_url(shop)))
    clock = StatementClock(30, 0.2)
    failures: list[BaseException] = []
    with read_only_connection(source, clock, 5) as connection:
        names = list_tables(connection, 10).names
        assert len(describe_tables(connection, names).tables) == 2
        writer = sqlite3.connect(shop, isolation_level=None)
        writer.execute("BEGIN EXCLUSIVE")
        try:
            counts = database_row_counts.count_rows(connection, names, clock,
                                                     lambda _name, exc: failures.append(exc))
        finally:
            writer.execute("ROLLBACK")
            writer.close()
    assert {name.name: count.kind for name, count in counts.items()} == {"customers": "timed_out",
                                                                         "orders": "timed_out"}
    assert failures == []


def test_a_sqlite_statement_that_never_ends_is_interrupted_at_its_time(tmp_path):
    """count(*) walks a table's b-tree without calling the progress handler, so a count of a huge table is stopped
    by sqlite3_interrupt. Here the statement never ends (an endless recursive query): without the interrupt the
    test would hang."""
    source = DatabaseSource("shop", make_url(sqlite_url(make_shop(tmp_path / "shop.db"))))
    endless = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"
    clock = StatementClock(3600, 3600)  # the progress handler would wait an hour
    with read_only_connection(source, clock, 5) as connection:
        with (pytest.raises(OperationalError, match="interrupted"),
              database_row_counts.sqlite_interrupted_after(connection, 0.05)):
            connection.exec_driver_sql(endless).scalar()
        # The connection goes on working: a later statement is not interrupted by a late repeat.
        assert connection.exec_driver_sql("SELECT count(*) FROM orders").scalar() == 3


async def test_a_wide_and_large_schema_is_cut_with_notes(start_server: ServerFactory, tmp_path, monkeypatch):
    monkeypatch.setattr(database_schemas, "MAX_TABLES", 3)
    path = tmp_path / "many.db"
    with sqlite3.connect(path) as connection:
        for i in range(10):
            connection.execute(f"CREATE TABLE t{i:02} (a)")
        columns = ", ".join(f"c{i}" for i in range(300))
        connection.execute(f"CREATE TABLE t00_wide ({columns})")
    connection.close()
    server = await start_server(databases=(("many", sqlite_url(path)),))

    result = await schema(server, database="many")

    entry = database(result, "many")
    assert [t["name"] for t in entry["tables"]] == ["t00", "t00_wide", "t01"] and entry["table_count"] == 11
    wide = table(entry, "t00_wide")
    assert len(wide["columns"]) == 250 and wide["column_count"] == 300
    notes = result["summary"]["notes"]
    assert any("many: 11 tables, the first 3 are described" in note for note in notes), notes
    assert any("t00_wide has 300 columns; the first 250" in note for note in notes), notes


# --- PostgreSQL ----------------------------------------------------------------------------------------------


PG_SCHEMA = """
CREATE SCHEMA sales;
CREATE TABLE public.customers (id bigserial PRIMARY KEY, email text NOT NULL UNIQUE,
                               created timestamptz NOT NULL DEFAULT now());
CREATE TABLE sales.orders (id bigserial PRIMARY KEY,
                           customer_id bigint NOT NULL REFERENCES public.customers (id) ON DELETE RESTRICT,
                           total numeric(10, 2) DEFAULT 0);
CREATE INDEX orders_by_lower_total ON sales.orders ((total * 2));
CREATE TABLE public.events (id bigint);
INSERT INTO public.customers (email) VALUES ('a@example.org'), ('b@example.org');
INSERT INTO sales.orders (customer_id, total) SELECT 1, g FROM generate_series(1, 5) g;
INSERT INTO public.events SELECT g FROM generate_series(1, 1000) g;
ANALYZE public.events;
ANALYZE public.customers;
"""


@pytest.fixture
def reader_database(postgres_cluster) -> tuple[str, str, str]:
    """A database with the PG_SCHEMA tables and a login role `reader` with a random password that may read them:
    (database name, reader's password, URL)."""
    name = postgres_cluster.create_database()
    password = f"pw{secrets.token_hex(12)}"
    role = f"reader_{name}"
    postgres_cluster.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
    postgres_cluster.execute(PG_SCHEMA, name)
    postgres_cluster.execute(f"GRANT USAGE ON SCHEMA sales TO {role}; "
                             f"GRANT SELECT ON ALL TABLES IN SCHEMA public, sales TO {role}", name)
    return name, password, f"postgresql://{role}:{password}@127.0.0.1:{postgres_cluster.port}/{name}"


async def test_postgresql_tables_of_every_schema(start_server: ServerFactory, reader_database):
    _name, password, url = reader_database
    server = await start_server(databases=(("analytics", url),))

    entry = database(await schema(server, database="analytics", row_counts=True), "analytics")

    assert entry["dialect"] == "postgresql" and password not in json.dumps(entry)
    assert entry["url"].startswith("postgresql://reader_") and ":[REDACTED]@127.0.0.1:" in entry["url"]
    assert [(t.get("schema"), t["name"]) for t in entry["tables"]] == [
        ("public", "customers"), ("public", "events"), ("sales", "orders")]
    customers = table(entry, "customers")
    assert [(c["name"], c["type"], c["nullable"]) for c in customers["columns"]] == [
        ("id", "BIGINT", False), ("email", "TEXT", False), ("created", "TIMESTAMP WITH TIME ZONE", False)]
    assert {c["name"]: c["default"] for c in customers["columns"]}["created"] == "now()"
    orders = table(entry, "orders")
    assert orders["foreign_keys"][0]["references"] == {"schema": "public", "table": "customers",
                                                       "columns": ["id"]}
    assert orders["foreign_keys"][0]["on_delete"] == "RESTRICT"
    assert {"name": "orders_by_lower_total", "columns": ["(total * 2::numeric)"], "unique": False} in orders["indexes"]
    assert (orders["row_count"], orders["row_count_kind"]) == (5, "exact")
    # schema.name narrows as well as the bare name.
    narrowed = await schema(server, database="analytics", table="sales.orders")
    assert [t["name"] for t in narrowed["databases"][0]["tables"]] == ["orders"]


async def test_postgresql_estimates_come_from_the_planner(start_server: ServerFactory, reader_database,
                                                          postgres_cluster, monkeypatch):
    monkeypatch.setattr(database_row_counts, "ESTIMATE_ABOVE_ROWS", 100)
    name, _password, url = reader_database
    # After ANALYZE the planner believes 1000; rows added since are not in an estimate.
    postgres_cluster.execute("INSERT INTO public.events SELECT g FROM generate_series(1, 50) g", name)
    server = await start_server(databases=(("analytics", url),))

    entry = database(await schema(server, database="analytics", row_counts=True), "analytics")

    events, customers = table(entry, "events"), table(entry, "customers")
    assert (events["row_count"], events["row_count_kind"]) == (1000, "estimate")
    assert (customers["row_count"], customers["row_count_kind"]) == (2, "exact")


async def test_a_postgresql_count_blocked_by_a_lock_times_out(start_server: ServerFactory, reader_database,
                                                              postgres_cluster, monkeypatch):
    monkeypatch.setattr(database_schemas, "STATEMENT_TIMEOUT_SECONDS", 0.5)
    name, _password, url = reader_database
    server = await start_server(databases=(("analytics", url),))
    # The test holds the table: the count waits for a lock it cannot get until its own timeout stops it. (A table
    # without serial columns: reflecting one calls pg_get_serial_sequence, which waits for that lock too.)
    async with await psycopg.AsyncConnection.connect(
            host="127.0.0.1", port=postgres_cluster.port, user="postgres", password=postgres_cluster.password,
            dbname=name) as holder:
        await holder.execute("LOCK TABLE public.events IN ACCESS EXCLUSIVE MODE")
        result = await schema(server, database="analytics", row_counts=True)
        await holder.rollback()

    entry = database(result, "analytics")
    events, customers = table(entry, "events"), table(entry, "customers")
    assert (events["row_count"], events["row_count_kind"]) == (None, "timed_out")
    assert (customers["row_count"], customers["row_count_kind"]) == (2, "exact")  # the next count still runs
    assert any("analytics: 1 row counts did not finish" in note for note in result["summary"]["notes"])


async def test_a_closed_port_is_an_entry_and_the_others_answer(start_server: ServerFactory, tmp_path):
    password = f"pw{secrets.token_hex(12)}"
    shop = make_shop(tmp_path / "shop.db")
    server = await start_server(databases=(
        ("down", f"postgresql://someone:{password}@127.0.0.1:{closed_port()}/nothing"),
        ("shop", sqlite_url(shop))))

    result = await schema(server)

    down = database(result, "down")
    assert down["error"].startswith("connection refused at 127.0.0.1:")
    assert down["url"].endswith(":[REDACTED]@127.0.0.1:" + down["url"].rsplit(":", 1)[1])
    assert password not in json.dumps(result)
    assert [t["name"] for t in database(result, "shop")["tables"]] == ["customers", "orders"]


async def test_a_host_that_never_answers_is_given_up_at_the_connect_timeout(start_server: ServerFactory, tmp_path,
                                                                             monkeypatch):
    """A listener that accepts connections (the kernel's backlog does) and never says a word, as a hung server or a
    black-holing proxy: the entry says so within the connect timeout instead of holding the call."""
    monkeypatch.setattr(database_schemas, "CONNECT_TIMEOUT_SECONDS", 2)  # libpq's smallest
    shop = make_shop(tmp_path / "shop.db")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        server = await start_server(databases=(("silent", f"postgresql://someone:pw@127.0.0.1:{port}/x"),
                                               ("shop", sqlite_url(shop))))
        result = await schema(server)
    assert database(result, "silent")["error"].startswith(f"no answer from 127.0.0.1:{port} within the connect")
    assert len(database(result, "shop")["tables"]) == 2


async def test_a_wrong_password_is_an_authentication_error_without_the_password(
        start_server: ServerFactory, reader_database, caplog):
    _name, password, url = reader_database
    wrong = f"wrong{secrets.token_hex(8)}"
    server = await start_server(databases=(("analytics", url.replace(password, wrong)),))

    response = await call(server, database="analytics")

    entry = json.loads(response.output)["databases"][0]
    assert entry["error"].startswith("authentication failed for user 'reader_")
    assert wrong not in response.output and password not in response.output
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "password authentication failed" in logged and wrong not in logged


# --- who may call it --------------------------------------------------------------------------------------------


async def test_only_an_admin_may_read_schemas(start_server: ServerFactory, tmp_path):
    admin, operator = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text(f"""\
roles:
  operator:
    list: {{tools: ["*"]}}
    call: {{tools: ["*"]}}
  admin:
    admin: true
    call: {{tools: ["*"]}}
tokens:
  - {{name: admin-token, sha256: {hash_token(admin)}, roles: [admin]}}
  - {{name: operator-token, sha256: {hash_token(operator)}, roles: [operator]}}
""")
    server = await start_server(auth_file=auth_file)

    assert (await call(server, admin)).success
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call(server, operator)
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "admin" in (refused.value.details() or "")
