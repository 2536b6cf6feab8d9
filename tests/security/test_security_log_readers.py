"""Security review finding 7 (issue 16): QueryLogs and TailLogs returned records read from `log_files` and other
replicas' database rows unredacted, while log_inspector redacted them. Every record passes the redactor when it
is read, on every surface."""

from __future__ import annotations

import asyncio
import json
import secrets
from datetime import UTC, datetime

from google.protobuf import json_format

from toolhost.v1 import log_service_pb2, log_service_pb2_grpc, tool_service_pb2
from toolhost_server.logs.query import LogFilter, LogQuery
from toolhost_server.logs.record import LogRecord
from toolhost_server.store.database import Store
from toolhost_server.store.log_table import LogTable

KEY_ID = "AKIAIOSFODNN7EXAMPLE"  # recognised by its shape
BEARER = "Authorization: Bearer s3cr3t-t0ken-value-42"


def everything_said(records: list[log_service_pb2.LogRecord]) -> str:
    return "\n".join(f"{r.logger} {r.message} {json.dumps(json_format.MessageToDict(r.fields))}" for r in records)


async def query(server, **filters: str) -> list[log_service_pb2.LogRecord]:
    stub = log_service_pb2_grpc.LogServiceStub(server.channel)
    response = await stub.QueryLogs(log_service_pb2.QueryLogsRequest(
        filter=log_service_pb2.LogFilter(**filters), page_size=100))
    return list(response.records)


async def tail_backlog(server, count: int, **filters: str) -> list[log_service_pb2.LogRecord]:
    stub = log_service_pb2_grpc.LogServiceStub(server.channel)
    stream = stub.TailLogs(log_service_pb2.TailLogsRequest(filter=log_service_pb2.LogFilter(**filters),
                                                             backlog=count))
    records = []
    async for response in stream:
        records.append(response.record)
        if len(records) == count:
            break
    stream.cancel()
    return records


async def inspector(server, **arguments: str) -> str:
    response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(
        name="log_inspector", arguments_json=json.dumps(arguments)))
    assert response.success, response.error
    return response.output


def assert_redacted(text: str) -> None:
    assert KEY_ID not in text and "s3cr3t-t0ken" not in text, text
    assert "[REDACTED]" in text


async def test_records_read_from_log_files_are_redacted_on_every_surface(start_server, tmp_path):
    marker = f"file-{secrets.token_hex(4)}"
    log_file = tmp_path / "app.log"
    log_file.write_text(json.dumps({
        "time": datetime.now(UTC).isoformat(), "level": "ERROR", "logger": "app",
        "message": f"{marker} uploading with {KEY_ID}", "request": {"headers": BEARER}}) + "\n")
    server = await start_server(log_files=(str(log_file),))

    records = await query(server, source="file", text=marker)
    assert len(records) == 1
    assert_redacted(everything_said(records))
    assert_redacted(everything_said(await tail_backlog(server, 1, source="file", text=marker)))
    assert_redacted(await inspector(server, source="file", text=marker))


async def test_another_replicas_database_rows_are_redacted_on_every_surface(start_server):
    server = await start_server(log_database=True)
    marker = f"row-{secrets.token_hex(4)}"
    other = LogRecord(time=datetime.now(UTC), level="ERROR", logger="toolhost.other",
                      message=f"{marker} {BEARER}", fields={"key": KEY_ID})
    table = LogTable(Store.from_config(server.toolhost.config))
    try:
        await asyncio.to_thread(table.append, [other], "replica-2:1:abc")
        stored = await asyncio.to_thread(table.read, LogQuery(LogFilter(text=marker)))
    finally:
        table.store.close()
    assert [record.message for record in stored] == [f"{marker} {BEARER}"]  # as written: unredacted

    records = await query(server, source="database", text=marker)
    assert len(records) == 1
    assert_redacted(everything_said(records))
    assert_redacted(everything_said(await tail_backlog(server, 1, source="database", text=marker)))
    assert_redacted(await inspector(server, source="database", text=marker))
