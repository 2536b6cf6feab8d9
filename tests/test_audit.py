"""The audit trail: one record per call, however it ends, with argument keys and never their values."""

from __future__ import annotations

import asyncio
import logging
import shlex
from datetime import UTC, datetime

import pytest

import toolhost
from toolhost_server.audit import AuditRecord, AuditTrail, estimated_size, logfmt_value
from toolhost_server.store.audit_table import AuditTable
from toolhost_server.store.database import Store

from helpers.catalogs import write_tool
from helpers.log_events import log_wakeups, until_logged
from postgres_cluster import DATABASES

SECRET_ARGUMENT = "value-that-must-not-be-audited"


def audit_records(caplog: pytest.LogCaptureFixture) -> list[dict]:
    return [r.audit for r in caplog.records if r.name == "toolhost.audit" and hasattr(r, "audit")]


async def test_every_call_leaves_one_record_with_keys_not_values(start_server, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="toolhost.audit")
    write_tool(tmp_path, "greet_someone")
    server = await start_server(catalog_dirs=[tmp_path])
    async with toolhost.AsyncClient(server.target, timeout=30) as client:
        ok = await client.call_tool("echo", text=SECRET_ARGUMENT, call_id="call-ok")
        with pytest.raises(toolhost.NotFoundError):
            await client.call_tool("no_such_tool", secret=SECRET_ARGUMENT, call_id="call-missing")
        with pytest.raises(toolhost.InvalidArgumentError):
            await client.call_tool("greet_someone", name=5, call_id="call-invalid")
        streamed = [e async for e in client.stream_call("echo", text="streamed", call_id="call-streamed")]
    assert ok.success and isinstance(streamed[-1], toolhost.ToolResult)
    records = {r["call_id"]: r for r in audit_records(caplog)}
    assert set(records) == {"call-ok", "call-missing", "call-invalid", "call-streamed"}
    assert records["call-ok"]["outcome"] == "OK" and records["call-ok"]["tool"] == "echo"
    assert records["call-ok"]["argument_keys"] == ["text"]
    assert records["call-ok"]["caller"] == "anonymous" and records["call-ok"]["auth_method"] == "anonymous"
    assert records["call-ok"]["duration_ms"] > 0 and records["call-ok"]["time"].endswith("+00:00")
    assert records["call-missing"]["outcome"] == "TOOL_NOT_FOUND"
    assert records["call-missing"]["argument_keys"] == ["secret"]
    assert records["call-invalid"]["outcome"] == "INVALID_ARGUMENTS"
    assert records["call-streamed"]["outcome"] == "OK"
    assert SECRET_ARGUMENT not in caplog.text


async def test_secrets_a_caller_puts_in_the_fields_it_chooses_never_reach_the_audit_line(start_server, caplog):
    # The audit trail redacts the tool name, call id and argument keys at the source (the log filters then pass
    # the record on untouched): a caller pasting a key into any of them must not get it logged.
    caplog.set_level(logging.INFO, logger="toolhost.audit")
    key = "AKIAIOSFODNN7EXAMPLE"
    server = await start_server()
    async with toolhost.AsyncClient(server.target) as client:
        with pytest.raises(toolhost.NotFoundError):
            await client.call_tool(f"tool_{key}", {f"arg {key}": 1}, call_id=f"id-{key}")
    [record] = audit_records(caplog)
    assert record["outcome"] == "TOOL_NOT_FOUND"
    assert "[REDACTED]" in record["tool"] and "[REDACTED]" in record["call_id"]
    assert record["argument_keys"] == ["arg [REDACTED]"]
    assert key not in caplog.text and key not in str(record)


async def test_names_a_caller_chose_are_quoted_in_the_audit_line(start_server, caplog):
    # Unquoted, a tool name `x outcome=OK caller=root` would add two fields for a logfmt reader (a call id is
    # checked for such characters: it is quoted only if that check ever loosens).
    caplog.set_level(logging.INFO, logger="toolhost.audit")
    server = await start_server()
    async with toolhost.AsyncClient(server.target) as client:
        with pytest.raises(toolhost.NotFoundError):
            await client.call_tool('x outcome=OK caller=root "', {"a b": 1, "c=d": 2}, call_id="my-id")
    [record] = [r for r in caplog.records if hasattr(r, "audit")]
    fields = [word.split("=", 1) for word in shlex.split(record.getMessage())[1:]]
    assert [key for key, _ in fields] == ["tool", "caller", "outcome", "duration_ms", "call_id", "argument_keys"]
    values = dict(fields)
    assert (values["tool"], values["caller"], values["outcome"]) == ('x outcome=OK caller=root "', "anonymous",
                                                                     "TOOL_NOT_FOUND")
    assert (values["call_id"], values["argument_keys"]) == ("my-id", "a b,c=d")


def test_a_plain_value_is_written_as_it_is_and_any_other_quoted() -> None:
    assert [logfmt_value(v) for v in ("echo", "order-42/retry#1", "a,b")] == ["echo", "order-42/retry#1", "a,b"]
    assert [logfmt_value(v) for v in ("", "a b", 'a"b', "a=b", "a\\b", "caf\u00e9", "\u2028")] == [
        '""', '"a b"', '"a\\"b"', '"a=b"', '"a\\\\b"', '"caf\\u00e9"', '"\\u2028"']


async def test_a_cancelled_call_is_recorded_as_cancelled(start_server, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="toolhost.audit")
    write_tool(tmp_path, "nap", "name: nap\ndescription: Sleeps.\n"
               "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:nap'}\n"
               "parameters: [{name: delay, type: number, required: true}]\n")
    server = await start_server(catalog_dirs=[tmp_path])
    with log_wakeups("toolhost.audit") as logged:
        async with toolhost.AsyncClient(server.target) as client:
            with pytest.raises(toolhost.DeadlineExceededError):
                await client.call_tool("nap", delay=5, timeout=0.3, call_id="call-cancelled")
        # The record is written when the server has stopped the call, which may be after the client gave up.
        await until_logged(logged, lambda: bool(audit_records(caplog)), "the cancelled call's audit record")
    [record] = audit_records(caplog)
    assert record["call_id"] == "call-cancelled" and record["outcome"] in ("CANCELLED", "DEADLINE_EXCEEDED")


async def test_records_reach_the_store_in_batches_off_the_call_path():
    stored: list[list[AuditRecord]] = []
    trail = AuditTrail(stored.append, batch_size=3, flush_seconds=0.05)
    trail.start()
    record = AuditRecord(time=datetime.now(UTC), caller="c", auth_method="token", tool="echo", call_id="x",
                         trace_id="", duration_ms=1.0, outcome="OK", argument_keys=("text",))
    for _ in range(7):
        trail.record(record)
    await trail.close()
    assert [len(batch) for batch in stored] == [3, 3, 1]


async def test_close_returns_when_a_full_batch_woke_the_writer_just_before():
    # The writer waits for its wake-up; a full batch sets it, and close() cancels the writer before it ran
    # again. On Python 3.11 asyncio.wait_for swallowed that cancellation and close() never returned.
    stored: list[list[AuditRecord]] = []
    trail = AuditTrail(stored.append, batch_size=2, flush_seconds=60)
    trail.start()
    await asyncio.sleep(0)  # the writer starts waiting
    for index in range(2):
        trail.record(AuditRecord(datetime.now(UTC), "c", "token", "echo", str(index), "", 1.0, "OK", ()))
    closing = asyncio.ensure_future(trail.close())
    done, _ = await asyncio.wait({closing}, timeout=10)
    assert closing in done, "close() did not return"
    assert [len(batch) for batch in stored] == [2]


async def test_a_store_that_falls_behind_drops_the_oldest_and_counts_them():
    records = [AuditRecord(datetime.now(UTC), "c", "token", "echo", str(index), "", 1.0, "OK", ())
               for index in range(8)]
    stored: list[list[AuditRecord]] = []
    # Room for five records of this size: the bound is in bytes, each record's estimated once.
    trail = AuditTrail(stored.append, batch_size=1000, flush_seconds=60,
                       max_waiting_bytes=5 * estimated_size(records[0]))
    trail.start()
    for record in records:
        trail.record(record)
    assert trail.dropped == 3
    await trail.close()
    assert [r.call_id for batch in stored for r in batch] == ["3", "4", "5", "6", "7"]


@pytest.fixture(params=DATABASES)
def database_url(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "sqlite":
        return ""  # the default: toolhost.db in the server's data_dir
    return request.getfixturevalue("postgres_url").render_as_string(hide_password=False)


async def test_records_are_written_to_the_database_in_batches(start_server, database_url):
    server = await start_server(database_url=database_url)
    async with toolhost.AsyncClient(server.target, timeout=30) as client:
        for index in range(5):
            await client.call_tool("echo", text=SECRET_ARGUMENT, call_id=f"db-{index}")
    await server.toolhost.audit.close()  # writes what is still waiting
    table = AuditTable(Store.from_config(server.toolhost.config))
    try:
        stored = await asyncio.to_thread(table.latest, 10)
    finally:
        table.store.close()
    assert sorted(r.call_id for r in stored) == [f"db-{i}" for i in range(5)]
    assert {(r.tool, r.outcome, r.argument_keys, r.caller) for r in stored} == {("echo", "OK", ("text",), "anonymous")}
    assert all(r.time.tzinfo is not None and r.duration_ms > 0 for r in stored)
    assert server.toolhost.audit.failed == 0 and server.toolhost.audit.dropped == 0
