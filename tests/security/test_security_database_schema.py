"""database_schema under attack, on real servers: a canary credential and database passwords (in the URL's
password, and in its query string, which libpq also reads) absent from every output, format and log line the test
can read; hostile SQLite files and paths (a FIFO, a symlink to nowhere, '?mode=rwc' in a file name, hostile table
names) that must neither hang nor create nor change a file; hostile `table` and `database` values; and schemas too
large for the output, which are cut with a note instead of failing or growing without bound."""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

from toolhost.v1 import tool_service_pb2

from helpers.servers import RunningServer, ServerFactory

FORMATS = (tool_service_pb2.OUTPUT_FORMAT_UNSPECIFIED, tool_service_pb2.OUTPUT_FORMAT_JSON,
           tool_service_pb2.OUTPUT_FORMAT_PRETTY, tool_service_pb2.OUTPUT_FORMAT_TEXT)


async def call(server: RunningServer, output_format: int = tool_service_pb2.OUTPUT_FORMAT_UNSPECIFIED,
               **arguments: Any) -> tool_service_pb2.CallToolResponse:
    response: tool_service_pb2.CallToolResponse = await server.stub.CallTool(tool_service_pb2.CallToolRequest(
        name="database_schema", arguments_json=json.dumps(arguments), output_format=output_format))
    return response


async def described(server: RunningServer, **arguments: Any) -> dict[str, Any]:
    response = await call(server, **arguments)
    assert response.success, response.error
    result: dict[str, Any] = json.loads(response.output)
    return result


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def small_sqlite(path: Path) -> Path:
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT DEFAULT 'x')")
        connection.execute("INSERT INTO items (name) VALUES ('a')")
    connection.close()
    return path


# --- secrets ------------------------------------------------------------------------------------------------


async def test_no_canary_nor_database_password_in_any_output_or_log_line(
        start_server: ServerFactory, postgres_cluster, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    canary = f"cn{secrets.token_hex(12)}"
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "canary.password").write_text(canary)
    name = postgres_cluster.create_database()
    password, query_password, wrong = (f"pw{secrets.token_hex(12)}" for _ in range(3))
    role = f"reader_{name}"
    postgres_cluster.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
    postgres_cluster.execute("CREATE TABLE events (id bigint PRIMARY KEY, body text DEFAULT 'x')", name)
    postgres_cluster.execute(f"GRANT SELECT ON events TO {role}", name)
    port = postgres_cluster.port
    server = await start_server(credentials_dir=str(credentials), databases=(
        ("analytics", f"postgresql://{role}:{password}@127.0.0.1:{port}/{name}"),
        # libpq takes the password from the query string too.
        ("by_query", f"postgresql://{role}@127.0.0.1:{port}/{name}?password={query_password}"),
        ("refused", f"postgresql://{role}:{wrong}@127.0.0.1:{port}/{name}"),
        ("down", f"postgresql://{role}:{password}@127.0.0.1:{closed_port()}/{name}"),
        ("local", f"sqlite:///{small_sqlite(tmp_path / 'local.db')}")))
    secret_values = (canary, password, query_password, wrong)

    narrowings: list[dict[str, Any]] = [{}, {"row_counts": True}, {"table": "events"}, {"table": "items"},
                                        *({"database": d, "row_counts": True}
                                          for d in ("store", "analytics", "by_query", "refused", "down", "local")),
                                        {"database": "analytics", "table": "events", "row_counts": True}]
    seen = []
    for arguments in narrowings:
        for output_format in FORMATS:
            response = await call(server, output_format, **arguments)
            assert response.success, (arguments, response.error)
            everything = response.output + json_format.MessageToJson(response)
            for value in secret_values:
                assert value not in everything, (arguments, output_format)
            seen.append(response.output)
    refusal = await call(server, database="nowhere")
    assert not any(value in json_format.MessageToJson(refusal) for value in secret_values)
    # What the test can read of the server's log: its records here, and log_inspector's view of them.
    inspector = await server.stub.CallTool(tool_service_pb2.CallToolRequest(
        name="log_inspector", arguments_json=json.dumps({"text": "database_schema", "limit": 1000})))
    logged = "\n".join(record.getMessage() for record in caplog.records) + inspector.output
    for value in secret_values:
        assert value not in logged
    # The outputs and the log were about something: the tables, the redacted URLs and the failures' detail.
    every_output = "\n".join(seen)
    assert '"events"' in every_output and f"{role}:[REDACTED]@127.0.0.1" in every_output
    assert "password=[REDACTED]" in every_output
    assert "authentication failed for user" in every_output and "connection refused at" in every_output
    assert "password authentication failed" in logged and "Connection refused" in logged


async def test_the_server_hides_every_configured_database_password_wherever_it_appears(
        start_server: ServerFactory, tmp_path):
    """A tool that prints a database password (here echo, given it as an argument) shows [REDACTED]: the server
    learns the passwords of database_url and of every configured database at start, as it learns credentials."""
    password, query_password, store_password = (f"pw{secrets.token_hex(12)}" for _ in range(3))
    server = await start_server(databases=(
        ("analytics", f"postgresql://reader:{password}@127.0.0.1:{closed_port()}/analytics"),
        ("by_query", f"postgresql://reader@127.0.0.1:{closed_port()}/analytics?password={query_password}")))
    for value in (password, query_password):
        response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(
            name="echo", arguments_json=json.dumps({"text": f"the password is {value}."})))
        assert response.success and value not in response.output, response.output
        assert "the password is [REDACTED]." in response.output
    # The control: a value configured nowhere is echoed as it is.
    response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(
        name="echo", arguments_json=json.dumps({"text": f"the password is {store_password}."})))
    assert store_password in response.output


# --- hostile files and paths ----------------------------------------------------------------------------------


async def test_a_fifo_in_place_of_the_file_is_refused_without_opening_it(start_server: ServerFactory, tmp_path):
    fifo = tmp_path / "trap.db"
    os.mkfifo(fifo)
    server = await start_server(databases=(("trap", f"sqlite:///{fifo}"),))
    # Opening a FIFO for reading would block until a writer came: the call would hang instead of answering.
    entry = (await described(server, database="trap"))["databases"][0]
    assert "not a regular file" in entry["error"]


@pytest.mark.parametrize("file_name", ["x.db?mode=rwc", "x.db#frag", "x%3Fmode=rwc.db", "x.db?mode=rw&cache=shared"])
async def test_uri_parameters_in_a_file_name_cannot_create_the_file(start_server: ServerFactory, tmp_path,
                                                                      file_name):
    server = await start_server(databases=(("gone", f"sqlite:///{tmp_path / file_name}"),))
    entry = (await described(server, database="gone"))["databases"][0]
    assert "does not exist" in entry["error"]
    assert list(tmp_path.iterdir()) == []


async def test_a_symlink_to_nowhere_is_not_followed_into_a_new_file(start_server: ServerFactory, tmp_path):
    target = tmp_path / "elsewhere" / "created.db"
    (tmp_path / "elsewhere").mkdir()
    link = tmp_path / "link.db"
    link.symlink_to(target)
    server = await start_server(databases=(("link", f"sqlite:///{link}"),))
    entry = (await described(server, database="link", row_counts=True))["databases"][0]
    assert "does not exist" in entry["error"]
    assert not target.exists() and list((tmp_path / "elsewhere").iterdir()) == []


async def test_a_file_that_is_not_a_database_is_an_error_entry(start_server: ServerFactory, tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all " * 200)
    before = junk.read_bytes()
    server = await start_server(databases=(("junk", f"sqlite:///{junk}"),))
    entry = (await described(server, database="junk"))["databases"][0]
    assert "does not start with SQLite's header, so it is not a SQLite database" in entry["error"]
    assert junk.read_bytes() == before


@pytest.mark.parametrize("path", ["/proc/self/environ", "/proc/self/status", "/proc/1/cmdline", "/dev/null",
                                  "/dev/zero", "/sys/kernel/address_bits"])
async def test_the_kernels_files_are_refused_before_sqlite_opens_them(start_server: ServerFactory, path):
    """/proc/self/environ is a regular file of size 0, which SQLite would read as an empty database (the s29
    review's finding 8): files of /proc, /sys and /dev are refused by where they are, whatever they look like."""
    server = await start_server(databases=(("kernel", f"sqlite:///{path}"),))
    entry = (await described(server, database="kernel"))["databases"][0]
    assert entry["error"] == f"{path} is a file of the kernel (/proc, /sys, /dev), not a SQLite database: check the URL"
    assert "tables" not in entry


async def test_a_link_to_a_kernel_file_is_refused_where_it_leads(start_server: ServerFactory, tmp_path):
    link = tmp_path / "innocent.db"
    link.symlink_to("/proc/self/environ")
    (tmp_path / "proc").symlink_to("/proc/self")
    server = await start_server(databases=(("link", f"sqlite:///{link}"),
                                           ("through", f"sqlite:///{tmp_path / 'proc' / 'environ'}")))
    result = await described(server)
    for name in ("link", "through"):
        [entry] = [e for e in result["databases"] if e["name"] == name]
        assert "is a file of the kernel" in entry["error"], entry


async def test_an_empty_file_is_an_empty_database_and_a_short_or_false_header_is_refused(
        start_server: ServerFactory, tmp_path):
    """A file of size 0 is what SQLite creates before its first write: a database with no tables (the operator
    named it). Anything else must start with SQLite's 16-byte header."""
    empty = tmp_path / "empty.db"
    empty.touch()
    short = tmp_path / "short.db"
    short.write_bytes(b"SQLite format")
    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4096)
    server = await start_server(databases=(("empty", f"sqlite:///{empty}"), ("short", f"sqlite:///{short}"),
                                           ("damaged", f"sqlite:///{damaged}")))
    result = await described(server)
    by_name = {e["name"]: e for e in result["databases"]}
    assert (by_name["empty"]["table_count"], by_name["empty"]["tables"]) == (0, [])
    assert "does not start with SQLite's header" in by_name["short"]["error"]
    assert by_name["damaged"]["error"] == "the file is not a SQLite database, or it is damaged"
    assert empty.read_bytes() == b"" and sorted(p.name for p in tmp_path.iterdir()) == [
        "damaged.db", "empty.db", "short.db"]


HOSTILE_TABLES = ['x"; DROP TABLE items; --', "it's", "ＵＮＩＣＯＤＥ表", "a]b[c", "x" * 5000, "spaces and\ttabs"]


async def test_hostile_table_names_are_described_and_counted_without_harm(start_server: ServerFactory, tmp_path):
    path = small_sqlite(tmp_path / "hostile.db")
    with sqlite3.connect(path) as connection:
        for hostile in HOSTILE_TABLES:
            quoted = hostile.replace('"', '""')
            connection.execute(f'CREATE TABLE "{quoted}" ("{quoted}" TEXT DEFAULT \'{"y" * 2000}\')')
            connection.execute(f'INSERT INTO "{quoted}" DEFAULT VALUES')
    connection.close()
    before = path.read_bytes()
    server = await start_server(databases=(("hostile", f"sqlite:///{path}"),))

    entry = (await described(server, database="hostile", row_counts=True))["databases"][0]

    by_name = {t["name"]: t for t in entry["tables"]}
    assert by_name["items"]["row_count"] == 1  # not dropped
    for hostile in HOSTILE_TABLES:
        shown = hostile if len(hostile) <= 500 else hostile[:499] + "…"
        assert by_name[shown]["row_count"] == 1 and by_name[shown]["row_count_kind"] == "exact", hostile
        assert len(by_name[shown]["columns"][0]["default"]) == 500  # cut, with "…"
    assert path.read_bytes() == before
    # Named exactly, the injection attempt is just a table.
    narrowed = await described(server, database="hostile", table=HOSTILE_TABLES[0], row_counts=True)
    assert [t["name"] for t in narrowed["databases"][0]["tables"]] == [HOSTILE_TABLES[0]]


async def test_table_names_in_other_encodings_are_shown_not_fatal(start_server: ServerFactory, tmp_path):
    path = small_sqlite(tmp_path / "latin1.db")
    with sqlite3.connect(path) as connection:
        connection.execute('CREATE TABLE "cafQ" (id)')
    connection.close()
    # SQLite stores whatever bytes it is given: the name becomes Latin-1 "café", not UTF-8 (same length, so the
    # records stay valid).
    path.write_bytes(path.read_bytes().replace(b"cafQ", b"caf\xe9"))
    server = await start_server(databases=(("latin1", f"sqlite:///{path}"),))
    entry = (await described(server, database="latin1"))["databases"][0]
    assert "caf\ufffd" in [t["name"] for t in entry["tables"]] and "items" in [t["name"] for t in entry["tables"]]


# --- hostile arguments ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("wanted", ["items; DROP TABLE items", "items\x00", "%", "*", "main.items.x", "ITEMS"])
async def test_hostile_table_arguments_match_nothing(start_server: ServerFactory, tmp_path, wanted):
    path = small_sqlite(tmp_path / "small.db")
    server = await start_server(databases=(("small", f"sqlite:///{path}"),))
    response = await call(server, database="small", table=wanted)
    assert not response.success and response.error.code == "NOT_FOUND", response.error
    assert len(response.error.message) < 700
    assert (await described(server, database="small", row_counts=True))["databases"][0]["tables"][0][
        "row_count"] == 1


@pytest.mark.parametrize("arguments", [{"table": "x" * 100_000}, {"database": "../store"}, {"database": "STORE"},
                                       {"database": "store\x00"}, {"table": ""}, {"row_counts": "yes"}])
async def test_malformed_arguments_are_refused_before_the_tool_runs(start_server: ServerFactory, arguments):
    server = await start_server()
    with pytest.raises(Exception, match="INVALID_ARGUMENT") as refused:
        await call(server, **arguments)
    assert "x" * 300 not in str(refused.value)


# --- size ------------------------------------------------------------------------------------------------------


async def test_a_schema_larger_than_the_output_is_cut_with_notes(start_server: ServerFactory, tmp_path):
    """1,000 tables of 30 columns: more tables than are described (500) and more bytes than the output may hold.
    (50,000 tables, measured by hand: a 244 KB answer in 16 s; building that file takes minutes.)"""
    path = tmp_path / "huge.db"
    columns = ", ".join(f"column_{i} TEXT DEFAULT 'value {i}'" for i in range(30))
    with sqlite3.connect(path) as connection:
        connection.executescript("BEGIN;" + "".join(f"CREATE TABLE table_{i:04} ({columns});" for i in range(1000))
                                 + "COMMIT;")
    connection.close()
    limit = 256 * 1024
    server = await start_server(max_output_bytes=limit, databases=(("huge", f"sqlite:///{path}"),))

    outputs = []
    for output_format in FORMATS:
        response = await call(server, output_format, database="huge")
        assert response.success, response.error
        assert len(response.output.encode()) <= limit and not response.truncated
        outputs.append(response.output)
    result = json.loads(outputs[0])  # the tool's own text
    entry = result["databases"][0]
    assert entry["table_count"] == 1000 and 0 < len(entry["tables"]) < 500
    notes = result["summary"]["notes"]
    assert any("1000 tables, the first 500 are described" in note for note in notes), notes
    assert any("tables left out to keep the output under its limit" in note for note in notes), notes
