"""LogService against real servers: QueryLogs and TailLogs through the Python clients, grpcurl-free health and
reflection, the `toolhost logs` command, the log_inspector tool, the logs table, and the admin rule."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

import toolhost
from toolhost.v1 import log_service_pb2, log_service_pb2_grpc
from toolhost_server.logs.query import LogFilter, LogQuery
from toolhost_server.logs.record import LogRecord
from toolhost_server.store.database import Store
from toolhost_server.store.log_table import LogTable

from helpers.auth import Tokens, auth_file_text, write_catalog
from helpers.cli import cli_env
from helpers.cli import toolhost as run_cli
from helpers.paths import tool_binary
from helpers.servers import RunningServer
from helpers.waiting import HANG_GUARD_SECONDS, within

SECRET_ARGUMENT = "argument-value-never-logged"


@pytest.fixture(autouse=True)
def info_logging(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """The server's INFO records reach the root logger's handlers (the memory ring among them)."""
    caplog.set_level(logging.INFO)
    yield


def marker() -> str:
    return f"marker-{secrets.token_hex(6)}"


def log_lines(text: str, count: int, level: int = logging.WARNING) -> None:
    for index in range(count):
        logging.getLogger("toolhost.test").log(level, "%s line %d", text, index)


async def test_query_logs_pages_the_servers_own_records_newest_first(start_server):
    server = await start_server()
    text = marker()
    log_lines(text, 5)
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS) as client:
        page = await client.query_logs_page(text=text, page_size=2)
        assert [e.message for e in page.records] == [f"{text} line 4", f"{text} line 3"]
        assert page.records[0].level == "WARNING" and page.records[0].logger == "toolhost.test"
        assert page.records[0].source == "memory" and page.records[0].time.tzinfo is not None
        assert page.summary.level_counts == {"WARNING": 2} and page.summary.source_counts == {"memory": 2}
        assert page.summary.sources == ("memory",) and page.summary.unavailable == {}
        assert page.next_page_token
        every = [e.message async for e in client.query_logs(text=text, page_size=2)]
        assert every == [f"{text} line {i}" for i in reversed(range(5))]
        with pytest.raises(toolhost.InvalidArgumentError) as caught:
            await client.query_logs_page(text="other", page_token=page.next_page_token)
        assert caught.value.reason == toolhost.ErrorReason.INVALID_PAGE_TOKEN
        errors_only = await client.query_logs_page(text=text, level="ERROR")
        assert errors_only.records == ()

    def blocking() -> list[str]:
        with toolhost.Client(server.target, timeout=HANG_GUARD_SECONDS) as sync_client:
            return [e.message for e in sync_client.query_logs(text=text, since=datetime.now(UTC) - timedelta(hours=1))]

    assert await asyncio.to_thread(blocking) == [f"{text} line {i}" for i in reversed(range(5))]


async def test_tail_logs_sends_the_backlog_then_new_records(start_server):
    server = await start_server()
    server.toolhost.logs.inspector.poll_seconds = 0.05
    text = marker()
    log_lines(text, 3)
    async with toolhost.AsyncClient(server.target) as client:
        tail = client.tail_logs(text=text, backlog=2)
        received = []
        async for entry in tail:
            received.append(entry.message)
            if len(received) == 2:
                log_lines(f"{text} new", 2)
            if len(received) == 4:
                break
        await tail.aclose()
    assert received == [f"{text} line 1", f"{text} line 2", f"{text} new line 0", f"{text} new line 1"]

    def blocking() -> list[str]:
        with toolhost.Client(server.target) as sync_client, sync_client.tail_logs(text=text, backlog=1) as sync_tail:
            return [next(sync_tail).message]

    assert await asyncio.to_thread(blocking) == [f"{text} new line 1"]


async def test_tail_logs_ends_when_the_server_stops_following(start_server):
    server = await start_server()
    text = marker()
    log_lines(text, 1)
    async with toolhost.AsyncClient(server.target) as client:
        tail = client.tail_logs(text=text, backlog=1)
        # The backlog arrives once the server follows: from then on it waits for new records.
        assert (await within(anext(tail), "the backlog")).message == f"{text} line 0"
        pending = asyncio.ensure_future(anext(tail, None))
        server.toolhost.logs.stop_following()
        assert await within(pending, "the end of the tail") is None


async def test_log_service_has_health_and_reflection(start_server):
    server = await start_server()
    health = health_pb2_grpc.HealthStub(server.channel)
    reply = await health.Check(health_pb2.HealthCheckRequest(service="toolhost.v1.LogService"))
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    run = await run_cli_tool("grpcurl", "-plaintext", server.target, "list")
    assert "toolhost.v1.LogService" in run


async def run_cli_tool(*argv: str) -> str:
    process = await asyncio.create_subprocess_exec(
        tool_binary(argv[0]), *argv[1:], stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await within(process.communicate(), f"{argv[0]} ending")
    assert process.returncode == 0, err.decode()
    return out.decode()


async def test_audit_records_are_in_the_logs_with_their_fields_and_tool_results_never_are(start_server):
    server = await start_server()
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS) as client:
        result = await client.call_tool("echo", text=SECRET_ARGUMENT, call_id=f"call-{marker()}")
        page = await client.query_logs_page(text=result.call_id)
        everything = [e async for e in client.query_logs(page_size=1000)]
    [audit] = page.records
    assert audit.logger == "toolhost.audit" and audit.fields["audit"]["argument_keys"] == ["text"]
    assert audit.fields["audit"]["call_id"] == result.call_id
    assert all(SECRET_ARGUMENT not in json.dumps(e.to_dict()) for e in everything)


async def test_the_registry_logs_the_seed_lines_on_start_and_reload(start_server, tmp_path):
    server = await start_server(catalog_dirs=[write_catalog(tmp_path / "catalog", ["echo_one"])])
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS) as client:
        await client.reload()
        messages = [e.message async for e in client.query_logs(text="[ToolRegistry]", page_size=1000)]
    catalog = str(tmp_path / "catalog")
    for line in (f"[ToolRegistry] Scanning catalog directory: {catalog}", "[ToolRegistry] Loaded 1 YAML tools"):
        assert messages.count(line) >= 2  # once at start, once for the reload
    assert any(m.startswith("[ToolRegistry] Registry loaded with ") and "'echo_one'" in m for m in messages)


async def test_the_log_inspector_tool_answers_from_the_same_inspector(start_server):
    server = await start_server()
    text = marker()
    log_lines(text, 3, logging.ERROR)
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS) as client:
        result = await client.call_tool("log_inspector", text=text, level="ERROR", limit=2, since="1h")
        assert result.success, result.error
        output = result.structured_output
        assert [r["message"] for r in output["records"]] == [f"{text} line 2", f"{text} line 1"]
        assert output["summary"]["level_counts"] == {"ERROR": 2} and output["next_page_token"]
        more = await client.call_tool("log_inspector", text=text, page_token=output["next_page_token"], limit=2)
        assert more.success is False and more.error.code == "INVALID_QUERY"  # another filter: no level
        more = await client.call_tool("log_inspector", text=text, level="ERROR", limit=2, since="1h",
                                      page_token=output["next_page_token"])
        assert [r["message"] for r in more.structured_output["records"]] == [f"{text} line 0"]
        tool = await client.get_tool("log_inspector")
        assert tool.requires_admin and tool.annotations.read_only


async def test_with_log_database_the_server_writes_its_records_and_reads_other_replicas(start_server):
    server = await start_server(log_database=True)
    text = marker()
    log_lines(text, 2)
    # Another replica's record, written straight to the shared table.
    table = LogTable(Store.from_config(server.toolhost.config))
    other = LogRecord(time=datetime.now(UTC), level="ERROR", logger="toolhost.other", message=f"{text} elsewhere")
    try:
        await asyncio.to_thread(table.append, [other], "replica-2:1:abc")
        await server.toolhost.logs.database_handler.writer.close()  # writes what waits
        stored = await asyncio.to_thread(table.read, LogQuery(LogFilter(text=text)))
    finally:
        table.store.close()
    assert sorted(r.message for r in stored) == [f"{text} elsewhere", f"{text} line 0", f"{text} line 1"]
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS) as client:
        page = await client.query_logs_page(text=text)
    # Each record once: this server's from its memory ring, the other replica's from the table.
    assert [(e.message, e.source) for e in page.records] == [
        (f"{text} elsewhere", "database"), (f"{text} line 1", "memory"), (f"{text} line 0", "memory")]
    assert page.records[0].fields["instance"] == "replica-2:1:abc"
    assert page.summary.sources == ("memory", "database")


async def test_file_readers_appear_in_the_summary_with_their_reason_when_unavailable(start_server, tmp_path):
    server = await start_server(log_files=(str(tmp_path / "missing" / "*.log"),))
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS) as client:
        page = await client.query_logs_page(page_size=1)
    assert page.summary.unavailable == {"file": f"no file matches {tmp_path / 'missing' / '*.log'}"}
    assert len(page.records) == 1


# --- the command line ---------------------------------------------------------------------------------------


async def test_toolhost_logs_prints_records_oldest_first_and_as_json(start_server, tmp_path):
    log_file = tmp_path / "app.log"
    server = await start_server(log_files=(str(log_file),))
    text = marker()
    log_lines(text, 3)
    log_file.write_text(json.dumps({"time": datetime.now(UTC).isoformat(), "level": "error", "logger": "app",
                                    "message": f"{text} from a file"}) + "\n")
    run = await run_cli("--target", server.target, "logs", "--grep", text, "-n", "3")
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert [line.split(": ", 1)[1] for line in lines] == [f"{text} line 1", f"{text} line 2", f"{text} from a file"]
    assert " WARNING  toolhost.test: " in lines[0] and " ERROR    app: " in lines[2]

    run = await run_cli("--target", server.target, "logs", "--grep", text, "--json", "--level", "error",
                        "--since", "10m")
    assert run.code == 0, run.err
    [record] = [json.loads(line) for line in run.out.splitlines()]
    assert record["source"] == "file" and record["fields"]["file"] == str(log_file) and record["level"] == "ERROR"


async def test_toolhost_logs_follow_prints_new_records_as_they_come(start_server):
    server = await start_server()
    server.toolhost.logs.inspector.poll_seconds = 0.05
    text = marker()
    log_lines(text, 1)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "toolhost_server.cli", "--target", server.target, "logs", "-f", "--grep", text,
        "-n", "1", env=cli_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        assert process.stdout is not None
        first = await within(process.stdout.readline(), "the backlog's line")
        assert first.decode().rstrip().endswith(f"{text} line 0")
        log_lines(f"{text} later", 1)
        second = await within(process.stdout.readline(), "the new record's line")
        assert second.decode().rstrip().endswith(f"{text} later line 0")
    finally:
        process.terminate()
        await process.wait()


# --- authentication ----------------------------------------------------------------------------------------


async def test_log_service_needs_credentials_and_the_admin_role(start_server, tmp_path):
    tokens = Tokens.generate()
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text(auth_file_text(tokens))
    server: RunningServer = await start_server(catalog_dirs=[write_catalog(tmp_path / "catalog")],
                                               auth_file=auth_file)
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS) as anonymous:
        with pytest.raises(toolhost.UnauthenticatedError):
            await anonymous.query_logs_page()
        with pytest.raises(toolhost.UnauthenticatedError):
            await anext(anonymous.tail_logs())
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS, token=tokens.agent,
                                    insecure_token_ok=True) as agent:
        with pytest.raises(toolhost.PermissionDeniedError, match="QueryLogs needs the admin role"):
            await agent.query_logs_page()
        with pytest.raises(toolhost.PermissionDeniedError, match="TailLogs needs the admin role"):
            await anext(agent.tail_logs())
        with pytest.raises(toolhost.NotFoundError):
            await agent.call_tool("log_inspector")
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS, token=tokens.admin,
                                    insecure_token_ok=True) as admin:
        assert (await admin.query_logs_page(page_size=1)).records
        assert (await admin.call_tool("log_inspector", limit=1)).success
    # The CLI, too: without a token the server refuses.
    run = await run_cli("--target", server.target, "logs")
    assert run.code == 1 and "UNAUTHENTICATED" in run.err


async def test_raw_grpc_errors_for_a_bad_request(start_server):
    server = await start_server()
    stub = log_service_pb2_grpc.LogServiceStub(server.channel)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.QueryLogs(log_service_pb2.QueryLogsRequest(page_size=-1))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
