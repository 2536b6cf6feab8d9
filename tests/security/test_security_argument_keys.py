"""Security review finding 1 (issue 16): argument keys were unbounded and copied into every audit sink before
lookup or validation, so a caller with no rights could grow the server's memory, log, spans and database by
hundreds of megabytes. Records now keep at most 64 keys of 64 characters and the count, in the log and in the
database's audit_records row alike; a call with more keys than its tool takes is refused before they are walked
or validated. The memory ring's byte bound is tested in tests/test_logs.py."""

from __future__ import annotations

import json
import logging

import grpc
import pytest

import toolhost
from toolhost.v1 import tool_service_pb2
from toolhost_server.audit import AuditRecord
from toolhost_server.store.audit_table import AuditTable
from toolhost_server.store.database import Store

from helpers.catalogs import write_tool

OPEN_TOOL = ("name: open_args\ndescription: Takes any arguments.\n"
             "runner: {type: python, entrypoint: 'catalog_functions:describe'}\ninput_schema: {type: object}\n")


@pytest.fixture(autouse=True)
def info_logging(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)  # the audit lines are INFO records in the memory ring


async def audit_of(server, call_id: str) -> dict[str, object]:
    async with toolhost.AsyncClient(server.target, timeout=30) as client:
        records = [entry.fields["audit"] async for entry in client.query_logs(source="memory")
                   if "audit" in entry.fields and entry.fields["audit"]["call_id"] == call_id]
    assert len(records) == 1, records
    return records[0]


async def stored_audit(server, call_id: str) -> AuditRecord:
    """The call's row in the audit_records table, once the server has written what waits."""
    await server.toolhost.audit.close()
    store = Store.from_config(server.toolhost.config)
    try:
        rows = [record for record in AuditTable(store).latest() if record.call_id == call_id]
    finally:
        store.close()
    assert len(rows) == 1, rows
    return rows[0]


async def refused(server, name: str, arguments: dict[str, object], call_id: str) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await server.stub.CallTool(tool_service_pb2.CallToolRequest(
            name=name, arguments_json=json.dumps(arguments), call_id=call_id))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    return caught.value


async def test_more_keys_than_an_open_schema_allows_are_refused_and_recorded_as_a_count(start_server, tmp_path):
    write_tool(tmp_path, "open_args", OPEN_TOOL)
    server = await start_server(catalog_dirs=[tmp_path])
    error = await refused(server, "open_args", {f"key{i}": i for i in range(300)}, "many-open")
    assert "the call has 300 argument keys, more than tool 'open_args' takes (256)" in (error.details() or "")
    audit = await audit_of(server, "many-open")
    assert (audit["argument_keys"], audit["argument_key_count"], audit["outcome"]) == ([], 300, "INVALID_REQUEST")
    # 256 keys are still a call like any other.
    response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(
        name="open_args", arguments_json=json.dumps({f"key{i}": i for i in range(256)})))
    assert response.success, response.error
    row = await stored_audit(server, "many-open")
    assert (row.argument_keys, row.argument_key_count, row.outcome) == ((), 300, "INVALID_REQUEST")


async def test_many_unknown_keys_to_a_closed_schema_are_refused_naming_a_few(start_server):
    server = await start_server()
    error = await refused(server, "echo", {"text": "x", **{f"junk{i:04}": i for i in range(5000)}}, "many-closed")
    details = error.details() or ""
    assert "/junk0000: unknown argument" in details and "/junk0016" not in details
    audit = await audit_of(server, "many-closed")
    assert (audit["argument_keys"], audit["argument_key_count"]) == ([], 5001)


async def test_an_unknown_tool_records_at_most_64_keys_of_64_characters_and_the_count(start_server):
    server = await start_server()
    arguments = {f"{i:03}" + "k" * 300: i for i in range(200)}
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await server.stub.CallTool(tool_service_pb2.CallToolRequest(
            name="no_such_tool", arguments_json=json.dumps(arguments), call_id="unknown-many"))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    audit = await audit_of(server, "unknown-many")
    keys = audit["argument_keys"]
    assert isinstance(keys, list) and len(keys) == 64 and all(len(key) == 64 for key in keys)
    assert audit["argument_key_count"] == 200
    row = await stored_audit(server, "unknown-many")
    assert (list(row.argument_keys), row.argument_key_count) == (keys, 200)


async def test_the_memory_ring_holds_the_newest_records_within_log_memory_bytes(start_server):
    # Each refused call leaves an audit record of 64 keys of 64 characters: without a byte bound the ring held
    # log_memory_records of them, whatever their size.
    bound = 200_000
    server = await start_server(log_memory_bytes=bound)
    keys = {f"{i:03}" + "k" * 300: i for i in range(200)}
    call_ids = [f"ring-{index:03}" for index in range(60)]
    for call_id in call_ids:
        with pytest.raises(grpc.aio.AioRpcError):
            await server.stub.CallTool(tool_service_pb2.CallToolRequest(
                name="no_such_tool", arguments_json=json.dumps(keys), call_id=call_id))
    async with toolhost.AsyncClient(server.target, timeout=30) as client:
        held = [entry.fields["audit"]["call_id"] async for entry in client.query_logs(source="memory")
                if "audit" in entry.fields]
    held.reverse()  # oldest first, as they were made
    assert held == call_ids[len(call_ids) - len(held):], "the ring must hold the newest records, in order"
    assert 0 < len(held) < len(call_ids)
    ring = server.toolhost.logs.ring
    assert len(held) * 64 * 64 <= ring.held_bytes <= bound
