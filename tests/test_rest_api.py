"""The seed's REST API (/ai/tools/list, search, execute, reload, /openapi.json) on the real HTTP listener in front
of a real server: the seed's curl lines as written, its bodies, trace ids (with tracing on and off) and
client_trace_id through audit and store (SQLite and PostgreSQL), errors and their statuses, the OpenAPI document,
and serve.py's wiring and shutdown. Hostile input is in security/test_security_rest.py."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from openapi_spec_validator import validate
from sqlalchemy import URL, insert
from starlette.applications import Starlette

from toolhost_server.audit import AuditRecord
from toolhost_server.store import schema_v1
from toolhost_server.store.audit_table import AuditTable
from toolhost_server.store.database import Store
from toolhost_server.store.engine import create_store_engine
from toolhost_server.store.migrations import MIGRATIONS, schema_version
from toolhost_server.web.app import http_routes

from helpers.auth import Tokens, auth_file_text
from helpers.auth import write_catalog as write_role_catalog
from helpers.catalogs import add_tool, write_tool
from helpers.guarded_http import raw_request
from helpers.held_calls import held_tool, new_hold
from helpers.otlp import otlp_receiver
from helpers.processes import leftover_processes, marker
from helpers.rest_http import rest_client, serving_rest
from helpers.servers import ServerProcess
from helpers.waiting import HANG_GUARD_SECONDS, eventually, within

# The seed's "Adding New Tools" steps, as its documentation writes them (only the port differs in the test).
SEED_TOOL_YAML = """\
name: my_new_tool
display_name: My New Tool
description: Does something useful
category: system
platform: cross-platform
version: 1.0.0
source: pipeline

parameters:
  - name: target
    type: string
    description: Target host or resource
    required: true

timeout_seconds: 30
requires_admin: false

tags:
  - custom
  - utility
"""
SEED_RELOAD = "curl -X POST http://localhost:8010/ai/tools/reload"
SEED_LIST = "curl http://localhost:8010/ai/tools/list | grep my_new_tool"
SEED_EXECUTE = """curl -X POST http://localhost:8010/ai/tools/execute \\
  -H "Content-Type: application/json" \\
  -d '{"name":"my_new_tool","params":{"target":"example.com"}}'"""
SEED_PORT = "8010"
W3C_TRACE_ID = re.compile(r"[0-9a-f]{32}")
ISO_Z = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
SECRET = "hunter2hunter2"


def my_new_tool(target: str) -> str:
    """What the pipeline toolhost runs for the seed's my_new_tool."""
    return f"checked {target}"


def leaky(text: str) -> str:
    return f"{text} password={SECRET}"


def with_credentials(text: str, credentials: Any) -> str:
    return text


def exit_three() -> dict[str, Any]:
    return {"type": "script", "script": "#!/bin/bash\necho partial\necho failing >&2\nexit 3\n"}


async def shell(line: str, port: int) -> tuple[int, str, str]:
    """`line` run by sh as written, the seed's port replaced by `port`; no proxy in the way."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    process = await asyncio.create_subprocess_exec(
        "sh", "-c", line.replace(SEED_PORT, str(port)), env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await within(process.communicate(), line)
    return await process.wait(), out.decode(), err.decode()


@pytest.fixture
def tokens() -> Tokens:
    return Tokens.generate()


@pytest.fixture
async def server(start_server, tmp_path):
    """No auth file (anonymous has every right), a catalog with tools of each outcome."""
    catalog = tmp_path / "catalog"
    write_tool(catalog, "leaky", "name: leaky\ndescription: Leaks a password.\n"
               "runner: {type: python, entrypoint: 'test_rest_api:leaky'}\n"
               "parameters: [{name: text, type: string, required: true}]\n")
    add_tool(catalog, "exits_three", exit_three())
    write_tool(catalog, "needs_winrm", "name: needs_winrm\ndescription: Needs credentials.\n"
               "credentials: [winrm]\nrunner: {type: python, entrypoint: 'test_rest_api:with_credentials'}\n"
               "parameters: [{name: text, type: string, required: true}]\n")
    write_tool(catalog, "tagged", "name: tagged\ndescription: Tagged tool.\ncategory: probes\nplatform: linux\n"
               "tags: [alpha, beta]\nrunner: {type: python, entrypoint: 'toolhost_server.tools.samples:greet'}\n"
               "parameters: [{name: name, type: string, required: true, description: Who, enum: [ann, bob]},"
               " {name: greeting, type: string, default: Hello}]\n"
               "intents: ['greet the (?P<name>ann|bob) please']\n")
    write_tool(catalog, "schema_only", "name: schema_only\ndescription: Defined by its schema.\ntags: [alpha]\n"
               "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:greet'}\n"
               "input_schema: {type: object, required: [name], properties: "
               "{name: {type: [string, 'null'], description: Who, default: x}}}\n")
    write_tool(catalog, "held", held_tool("held"))
    return await start_server(catalog_dirs=[catalog], max_in_flight_calls=1)


@pytest.fixture
async def rest(server):
    async with serving_rest(server) as serving:
        yield serving


@pytest.fixture
async def client(rest):
    async with rest_client(rest) as http:
        yield http


# --- the seed's curl lines ---------------------------------------------------------------------------------


async def test_the_seeds_curl_lines_add_reload_list_and_execute_a_pipeline_tool_as_written(start_server, tmp_path):
    """source: pipeline runs on the pipeline toolhost: a second server serves my_new_tool there."""
    pipeline_catalog = tmp_path / "pipeline"
    write_tool(pipeline_catalog, "my_new_tool", "name: my_new_tool\ndescription: Checks a target.\n"
               "runner: {type: python, entrypoint: 'test_rest_api:my_new_tool'}\n"
               "parameters: [{name: target, type: string, required: true}]\n")
    pipeline = await start_server(catalog_dirs=[pipeline_catalog])
    front_catalog = tmp_path / "tools" / "catalog"
    front_catalog.mkdir(parents=True)
    front = await start_server(catalog_dirs=[front_catalog], pipeline_target=pipeline.target)
    async with serving_rest(front) as rest:
        code, _, _ = await shell(SEED_LIST, rest.port)
        assert code == 1  # grep found nothing: not there before the file and the reload
        (front_catalog / "my_new_tool.yaml").write_text(SEED_TOOL_YAML)
        code, out, err = await shell(SEED_RELOAD, rest.port)
        assert code == 0, err
        reloaded = json.loads(out)
        assert reloaded["success"] is True and "my_new_tool" in reloaded["tools"]
        assert reloaded["catalog_dirs"] == [str(front_catalog)] and reloaded["count"] == len(reloaded["tools"])
        code, out, err = await shell(SEED_LIST, rest.port)
        assert code == 0 and "my_new_tool" in out, err
        code, out, err = await shell(SEED_EXECUTE, rest.port)
    assert code == 0, err
    executed = json.loads(out)
    assert executed["success"] is True and executed["error"] is None, executed
    assert (executed["tool"], executed["output"]) == ("my_new_tool", "checked example.com")


# --- list, reload ------------------------------------------------------------------------------------------


async def test_list_answers_the_seeds_body_with_every_visible_tool(client, server):
    response = await client.get("/ai/tools/list")
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-store"
    body = response.json()
    assert body["success"] is True and body["filters"] == {
        "platform": None, "category": None, "tags": None, "provider": None}
    names = [tool["name"] for tool in body["tools"]]
    assert names == sorted(server.toolhost.registry.snapshot.names) and body["total"] == len(names)
    tools = {tool["name"]: tool for tool in body["tools"]}
    tagged = tools["tagged"]
    assert {key: tagged[key] for key in ("display_name", "category", "platform", "source", "toolhost_source",
                                         "tags")} == {
        "display_name": "Tagged", "category": "probes", "platform": "linux", "source": "local",
        "toolhost_source": "catalog", "tags": ["alpha", "beta"]}
    assert tagged["parameters"] == [
        {"name": "name", "type": "string", "description": "Who", "required": True, "enum": ["ann", "bob"]},
        {"name": "greeting", "type": "string", "description": "", "required": False, "default": "Hello"}]
    assert tools["schema_only"]["parameters"] == [
        {"name": "name", "type": "string", "description": "Who", "required": True, "default": "x"}]
    assert tools["echo"]["toolhost_source"] == "builtin"


async def test_list_filters_by_platform_category_and_comma_separated_tags_all_of_which_must_match(client):
    async def names(**params: str) -> tuple[list[str], dict[str, Any]]:
        body = (await client.get("/ai/tools/list", params=params)).json()
        return [tool["name"] for tool in body["tools"]], body["filters"]

    assert await names(tags="alpha") == (["schema_only", "tagged"], {
        "platform": None, "category": None, "tags": ["alpha"], "provider": None})
    assert (await names(tags="alpha, beta"))[0] == ["tagged"]
    assert (await names(tags="alpha,gamma"))[0] == []
    assert await names(platform="linux", category="probes") == (["tagged"], {
        "platform": "linux", "category": "probes", "tags": None, "provider": None})
    assert (await names(category="nothing"))[0] == []


async def test_a_pipeline_tool_is_listed_with_the_seeds_source_pipeline(start_server, tmp_path):
    catalog = tmp_path / "catalog"
    (catalog / "remote.yaml").parent.mkdir(parents=True)
    (catalog / "remote.yaml").write_text(SEED_TOOL_YAML)
    server = await start_server(catalog_dirs=[catalog], pipeline_target="127.0.0.1:1")
    async with serving_rest(server) as rest, rest_client(rest) as client:
        tools = {tool["name"]: tool for tool in (await client.get("/ai/tools/list")).json()["tools"]}
    assert (tools["my_new_tool"]["source"], tools["my_new_tool"]["toolhost_source"]) == ("pipeline", "catalog")
    assert tools["echo"]["source"] == "local"


async def test_reload_without_a_body_reads_the_catalog_again(client, server, tmp_path):
    write_tool(tmp_path / "catalog", "added_later")
    response = await client.post("/ai/tools/reload")
    assert response.status_code == 200
    body = response.json()
    assert body["success"] is True and body["added"] == ["added_later"] and "added_later" in body["tools"]
    assert body["count"] == len(body["tools"]) == len(server.toolhost.registry.snapshot)
    assert body["missing_required"] == [] and body["catalog_dirs"] == [str(tmp_path / "catalog")]
    assert body["generation"] == server.toolhost.registry.snapshot.generation and body["errors"] == []


# --- execute -----------------------------------------------------------------------------------------------


async def test_execute_answers_the_seeds_fields_and_the_trace_id_in_a_header(client, caplog):
    with caplog.at_level(logging.INFO, logger="toolhost.audit"):
        response = await client.post("/ai/tools/execute", json={"name": "echo", "params": {"text": "hi"}})
    assert response.status_code == 200
    body = response.json()
    assert {key: body[key] for key in ("success", "tool", "output", "error", "error_message", "exit_code",
                                       "truncated", "redacted")} == {
        "success": True, "tool": "echo", "output": "hi", "error": None, "error_message": None, "exit_code": None,
        "truncated": False, "redacted": False}
    assert W3C_TRACE_ID.fullmatch(body["trace_id"]) and response.headers["x-trace-id"] == body["trace_id"]
    assert ISO_Z.fullmatch(body["timestamp"])
    assert abs(datetime.fromisoformat(body["timestamp"]) - datetime.now(UTC)).total_seconds() < HANG_GUARD_SECONDS
    assert isinstance(body["duration_ms"], float) and body["duration_ms"] >= 0
    [audit] = [record.audit for record in caplog.records if hasattr(record, "audit")]
    assert (audit["call_id"], audit["trace_id"], audit["client_trace_id"]) == (body["call_id"], body["trace_id"], "")


async def test_a_tool_that_fails_is_200_with_its_code_exit_code_and_output(client):
    body = (await client.post("/ai/tools/execute", json={"name": "exits_three"})).json()
    assert (body["success"], body["error"], body["exit_code"], body["output"]) == (
        False, "NON_ZERO_EXIT", 3, "partial\n")
    assert "failing" in body["error_message"] and body["stderr"] == "failing\n"


async def test_missing_credentials_is_the_seeds_lowercase_error_with_no_output(client):
    response = await client.post("/ai/tools/execute", json={"name": "needs_winrm", "params": {"text": "x"}})
    body = response.json()
    assert response.status_code == 200
    assert (body["success"], body["error"], body["output"]) == (False, "missing_credentials", None)
    assert "winrm" in body["error_message"]


async def test_secrets_are_redacted_from_the_output_and_flagged(client):
    body = (await client.post("/ai/tools/execute", json={"name": "leaky", "params": {"text": "a"}})).json()
    assert SECRET not in json.dumps(body) and body["redacted"] is True and "[REDACTED]" in body["output"]


# --- trace ids ---------------------------------------------------------------------------------------------


async def test_a_w3c_trace_id_becomes_the_calls_trace_id_with_tracing_off(client, caplog):
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    with caplog.at_level(logging.INFO, logger="toolhost.audit"):
        response = await client.post("/ai/tools/execute", json={"name": "echo", "params": {"text": "hi"},
                                                                 "trace_id": trace_id})
    assert response.json()["trace_id"] == trace_id == response.headers["x-trace-id"]
    [audit] = [record.audit for record in caplog.records if hasattr(record, "audit")]
    assert (audit["trace_id"], audit["client_trace_id"]) == (trace_id, "")


async def test_with_tracing_on_a_w3c_trace_id_is_the_recorded_and_exported_spans_trace(
        start_server, tmp_path, monkeypatch):
    """The body's trace id is given the sampled flag: the default parent-based sampler records the call."""
    for variable in ("OTEL_TRACES_EXPORTER", "OTEL_TRACES_SAMPLER", "OTEL_SDK_DISABLED",
                     "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(variable, raising=False)
    trace_id = "0af7651916cd43dd8448eb211c80319c"
    async with otlp_receiver() as (receiver, endpoint):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        server = await start_server()
        async with serving_rest(server) as rest, rest_client(rest) as client:
            joined = await client.post("/ai/tools/execute", json={"name": "echo", "params": {"text": "a"},
                                                                  "trace_id": trace_id})
            own = await client.post("/ai/tools/execute", json={"name": "echo", "params": {"text": "b"},
                                                               "trace_id": "order-42"})
        [span] = await receiver.trace(trace_id, 1)
        own_trace = own.headers["x-trace-id"]
        [own_span] = await receiver.trace(own_trace, 1)
    assert joined.json()["trace_id"] == trace_id == joined.headers["x-trace-id"]
    assert span.name == "execute_tool echo" and span.parent_id  # a child of the caller's (unrecorded) span
    assert own.json()["trace_id"] == "order-42" and W3C_TRACE_ID.fullmatch(own_trace) and own_trace != trace_id
    assert own_span.name == "execute_tool echo" and not own_span.parent_id


async def test_any_other_trace_id_is_the_client_trace_id_echoed_audited_and_logged(client, caplog):
    with caplog.at_level(logging.INFO, logger="toolhost.audit"):
        response = await client.post("/ai/tools/execute", json={"name": "echo", "params": {"text": "hi"},
                                                                 "trace_id": "optional-trace-id"})
    body = response.json()
    assert body["trace_id"] == "optional-trace-id"
    call_trace = response.headers["x-trace-id"]
    assert W3C_TRACE_ID.fullmatch(call_trace)
    [record] = [record for record in caplog.records if hasattr(record, "audit")]
    assert (record.audit["trace_id"], record.audit["client_trace_id"]) == (call_trace, "optional-trace-id")
    assert record.getMessage().endswith(" client_trace_id=optional-trace-id")


async def test_a_traceparent_header_is_honoured_when_the_body_names_no_w3c_trace(client):
    trace_id = "11112222333344445555666677778888"
    response = await client.post("/ai/tools/execute", json={"name": "echo", "params": {"text": "hi"}},
                                 headers={"traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"})
    assert response.headers["x-trace-id"] == trace_id == response.json()["trace_id"]


async def test_the_client_trace_id_reaches_the_store_and_old_rows_and_old_replicas_get_none(database: URL):
    """Migration 9 on SQLite and PostgreSQL: a version-8 database keeps its rows (client_trace_id ""), a replica
    of the previous release still inserts without the column, and a new record keeps its id."""
    engine = create_store_engine(database)
    try:
        old_row = {"time": datetime(2024, 5, 1, tzinfo=UTC), "caller": "anonymous", "auth_method": "none",
                   "tool": "echo", "call_id": "before", "trace_id": "ab" * 16, "duration_ms": 1.0, "outcome": "OK",
                   "argument_keys": ["text"]}
        with engine.begin() as connection:
            schema_v1.metadata.create_all(connection)
            connection.execute(insert(schema_v1.metadata.tables["audit_records"]), [old_row])
            schema_version.metadata.create_all(connection)
            for migration in MIGRATIONS[:8]:
                migration.apply(connection)
                connection.execute(insert(schema_version), [{
                    "version": migration.version, "applied_at": datetime.now(UTC), "toolhost_version": "0.2.0",
                    "description": migration.description}])
        store = Store(database)
        try:
            store.open()  # migrates to the latest version
            with engine.begin() as connection:  # a previous release's replica names no client_trace_id
                connection.execute(insert(schema_v1.metadata.tables["audit_records"]),
                                   [{**old_row, "call_id": "old-replica"}])
            table = AuditTable(store)
            table.append([AuditRecord(
                time=datetime.now(UTC), caller="anonymous", auth_method="none", tool="echo", call_id="new",
                trace_id="cd" * 16, duration_ms=0.5, outcome="OK", argument_keys=("text",), argument_key_count=1,
                client_trace_id="order-42/retry 1")])
            kept = {record.call_id: record.client_trace_id for record in table.latest()}
        finally:
            store.close()
    finally:
        engine.dispose()
    assert kept == {"before": "", "old-replica": "", "new": "order-42/retry 1"}


# --- search ------------------------------------------------------------------------------------------------


async def test_search_routes_an_intent_with_its_arguments_then_ranks(client):
    response = await client.get("/ai/tools/search", params={"q": "greet the bob please"})
    assert response.status_code == 200, response.text
    body = response.json()
    first = body["results"][0]
    assert (first["tool"]["name"], first["matched_intent"], first["arguments"]) == (
        "tagged", "greet the (?P<name>ann|bob) please", {"name": "bob"})
    assert body["query"] == "greet the bob please" and body["total"] == len(body["results"])
    ranked = (await client.get("/ai/tools/search", params={"query": "leaks a password", "limit": "1"})).json()
    assert [hit["tool"]["name"] for hit in ranked["results"]] == ["leaky"]
    assert ranked["results"][0]["matched_intent"] is None and ranked["results"][0]["arguments"] is None
    filtered = (await client.get("/ai/tools/search", params={"q": "greet the bob please", "platform": "windows"}))
    assert all(hit["tool"]["platform"] == "windows" for hit in filtered.json()["results"])


async def test_search_refuses_a_bad_limit_two_different_queries_and_an_overlong_one(client):
    for params, field in (({"q": "x", "limit": "-1"}, "limit"), ({"q": "x", "limit": "ten"}, "limit"),
                          ({"q": "a", "query": "b"}, "query")):
        response = await client.get("/ai/tools/search", params=params)
        assert response.status_code == 400, params
        assert [v["field"] for v in response.json()["violations"]] == [field]
    response = await client.get("/ai/tools/search", params={"q": "x" * 1001})
    assert response.status_code == 400 and response.json()["error"] == "INVALID_REQUEST"


# --- errors ------------------------------------------------------------------------------------------------


async def test_bad_arguments_are_400_with_each_field_as_a_pointer_into_the_body(client):
    response = await client.post("/ai/tools/execute", json={"name": "tagged", "params": {"name": "eve"},
                                                             "trace_id": "mine"})
    assert response.status_code == 400
    body = response.json()
    assert (body["success"], body["error"], body["tool"], body["trace_id"]) == (
        False, "INVALID_ARGUMENTS", "tagged", "mine")
    assert [v["field"] for v in body["violations"]] == ["/params/name"]


@pytest.mark.parametrize(("body", "field"), [
    ({"params": {}}, "/name"),
    ({"name": "echo", "params": [1]}, "/params"),
    ({"name": "echo", "trace_id": 7}, "/trace_id"),
    ({"name": "echo", "parms": {"text": "x"}}, "/parms"),
])
async def test_a_malformed_execute_body_is_400_naming_the_field(client, body, field):
    response = await client.post("/ai/tools/execute", json=body)
    assert response.status_code == 400
    assert [v["field"] for v in response.json()["violations"]] == [field]


async def test_an_unknown_tool_is_404_with_close_names(client):
    response = await client.post("/ai/tools/execute", json={"name": "ecoh"})
    assert response.status_code == 404
    body = response.json()
    assert body["error"] == "TOOL_NOT_FOUND" and body["suggestions"] == ["echo"] and "'echo'" in body["error_message"]


async def test_over_capacity_is_429_with_retry_after(client, server):
    hold, state = new_hold()
    running = asyncio.ensure_future(client.post("/ai/tools/execute", json={"name": "held", "params": {"hold": hold}}))
    await within(state.started.wait(), "the held call to start")
    refused = await client.post("/ai/tools/execute", json={"name": "echo", "params": {"text": "x"}})
    assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
    assert refused.json()["error"] == "OVER_CAPACITY"
    running.cancel()
    await within(state.stopped.wait(), "the held call to stop")


async def test_a_client_that_goes_away_stops_its_call(client, server):
    hold, state = new_hold()
    running = asyncio.ensure_future(client.post("/ai/tools/execute", json={"name": "held", "params": {"hold": hold}}))
    await within(state.started.wait(), "the held call to start")
    running.cancel()  # closes the connection
    await within(state.stopped.wait(), "the held call to stop")
    assert state.cancelled
    await eventually(lambda: server.toolhost.pipeline.in_flight == 0, "the call to be released")


async def test_while_draining_every_route_answers_503_with_retry_after(client, server):
    # Retry-After: a balancer or client that honours it retries soon (elsewhere), as after a 429.
    server.toolhost.pipeline.stop_accepting()
    for method, path in (("GET", "/ai/tools/list"), ("GET", "/ai/tools/search?q=echo"),
                         ("POST", "/ai/tools/reload")):
        response = await client.request(method, path)
        assert (response.status_code, response.json()["error"]) == (503, "SHUTTING_DOWN"), path
        assert response.headers["retry-after"] == "1", path
    response = await client.post("/ai/tools/execute", json={"name": "echo", "params": {"text": "x"}})
    assert (response.status_code, response.json()["error"]) == (503, "SHUTTING_DOWN")
    assert response.headers["retry-after"] == "1"


async def test_every_json_answer_forbids_sniffing_it_as_another_type(client):
    # The search body reflects its query: a browser must never read it as HTML.
    answers = [await client.get("/ai/tools/search", params={"q": "<script>alert(1)</script>"}),
               await client.get("/ai/tools/list"), await client.get("/openapi.json"),
               await client.post("/ai/tools/execute", json={"name": "echo", "params": {"text": "<b>x</b>"}}),
               await client.post("/ai/tools/execute", json={"name": "no_such_tool"}),
               await client.get("/ai/tools/search", params={"limit": "-1"})]
    assert [a.status_code for a in answers] == [200, 200, 200, 200, 404, 400]
    for answer in answers:
        assert answer.headers["x-content-type-options"] == "nosniff", answer.request.url
        assert answer.headers["content-type"] == "application/json", answer.request.url


async def test_a_call_running_when_the_grace_ends_is_stopped_and_answered_503(client, rest):
    hold, state = new_hold()
    running = asyncio.ensure_future(client.post("/ai/tools/execute", json={"name": "held", "params": {"hold": hold}}))
    await within(state.started.wait(), "the held call to start")
    rest.api.stop_calls()
    response = await within(running, "the stopped call's answer")
    assert response.status_code == 503 and "shut down before the call finished" in response.json()["error_message"]
    assert state.cancelled
    later = await client.post("/ai/tools/execute", json={"name": "echo", "params": {"text": "x"}})
    assert later.status_code == 503


async def test_body_type_and_size_are_the_guards_415_and_413(client, rest, server):
    response = await client.post("/ai/tools/execute", content=b'{"name": "echo"}',
                                 headers={"Content-Type": "text/plain"})
    assert response.status_code == 415
    limit = server.toolhost.config.max_message_bytes
    answer = await raw_request(rest.port, f"POST /ai/tools/execute HTTP/1.1\r\nHost: 127.0.0.1:{rest.port}\r\n"
                               f"Content-Type: application/json\r\nContent-Length: {limit + 1}\r\n\r\n")
    assert answer.status == 413


@pytest.fixture
async def authenticated(start_server, tmp_path, tokens):
    catalog = write_role_catalog(tmp_path / "catalog")
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text(auth_file_text(tokens))
    server = await start_server(catalog_dirs=[catalog], auth_file=str(auth_file))
    async with serving_rest(server) as serving:
        yield serving


async def test_without_a_token_or_with_a_bad_one_every_route_but_openapi_is_401_with_a_bearer_challenge(
        authenticated, tokens):
    routes = (("GET", "/ai/tools/list"), ("GET", "/ai/tools/search?q=x"), ("POST", "/ai/tools/reload"),
              ("POST", "/ai/tools/execute"))
    for token, challenge in ((None, 'Bearer realm="toolhost"'),
                             ("not-a-token-" + "x" * 40, 'Bearer realm="toolhost", error="invalid_token"')):
        async with rest_client(authenticated, token) as client:
            for method, path in routes:
                response = await client.request(method, path)
                assert response.status_code == 401, (method, path)
                assert response.headers["www-authenticate"] == challenge
                assert response.json()["error"] == "UNAUTHENTICATED"
            assert (await client.get("/openapi.json")).status_code == 200
    async with rest_client(authenticated) as client:
        message = (await client.get("/ai/tools/list")).json()["error_message"]
    assert "Authorization: Bearer <token>" in message


async def test_roles_decide_what_is_listed_called_and_reloaded(authenticated, tokens):
    async with rest_client(authenticated, tokens.agent) as agent:
        listed = [tool["name"] for tool in (await agent.get("/ai/tools/list")).json()["tools"]]
        assert listed == ["admin_tool", "echo_one", "net_probe"]
        refused = await agent.post("/ai/tools/execute", json={"name": "admin_tool", "params": {"name": "x"}})
        assert (refused.status_code, refused.json()["error"]) == (403, "PERMISSION_DENIED")
        called = await agent.post("/ai/tools/execute", json={"name": "echo_one", "params": {"name": "x"}})
        assert called.json()["output"] == "Hello, x."
        reload = await agent.post("/ai/tools/reload")
        assert (reload.status_code, reload.json()["error"]) == (403, "PERMISSION_DENIED")
    async with rest_client(authenticated, tokens.admin) as admin:
        assert (await admin.post("/ai/tools/reload")).json()["success"] is True


# --- OpenAPI -----------------------------------------------------------------------------------------------


async def test_the_openapi_document_is_valid_and_describes_exactly_the_routes_and_their_statuses(client, rest):
    response = await client.get("/openapi.json")
    assert response.status_code == 200
    document = response.json()
    validate(document)
    served = {(route.path, method.lower()) for route in http_routes(Starlette(routes=rest.api.routes))
              for method in route.methods if method != "HEAD"}
    described = {(path, method) for path, operations in document["paths"].items() for method in operations}
    assert described == served
    statuses = {(path, method): set(operation["responses"]) for path, operations in document["paths"].items()
                for method, operation in operations.items()}
    assert statuses[("/ai/tools/execute", "post")] >= {"200", "400", "401", "403", "404", "413", "415", "429", "503"}
    assert statuses[("/ai/tools/reload", "post")] >= {"200", "401", "403", "503"}
    assert statuses[("/ai/tools/list", "get")] >= {"200", "401", "503"}
    assert statuses[("/ai/tools/search", "get")] >= {"200", "400", "401", "503"}
    # Every property the execute body documents as required is in a real answer.
    executed = (await client.post("/ai/tools/execute", json={"name": "echo", "params": {"text": "x"}})).json()
    required = document["components"]["schemas"]["ExecuteResult"]["required"]
    assert set(required) <= set(executed)
    listed = (await client.get("/ai/tools/list")).json()
    assert set(document["components"]["schemas"]["Tool"]["required"]) <= set(listed["tools"][0])


# --- serve.py ----------------------------------------------------------------------------------------------


@pytest.mark.server
async def test_toolhost_serve_serves_the_rest_api_and_its_shutdown_stops_a_rest_call(tmp_path):
    mark = marker()
    add_tool(tmp_path, "sleeper", {"type": "script", "script": "#!/bin/bash\nexec sleep 1000\n"},
             "  - {name: mark, type: string, required: true}\n")
    process = ServerProcess("--catalog-dir", str(tmp_path), "--shutdown-delay-seconds", "0",
                            "--shutdown-grace-seconds", "0.2", "--kill-grace-seconds", "0.2")
    try:
        await process.start()
        found = await process.wait_for_log(rb"serving HTTP \(/mcp, /ai/tools, .* on 127\.0\.0\.1:(\d+)")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{int(found.group(1))}",
                                     timeout=HANG_GUARD_SECONDS) as client:
            echoed = await client.post("/ai/tools/execute", json={"name": "echo", "params": {"text": "over rest"}})
            assert echoed.json()["output"] == "over rest"
            call = asyncio.ensure_future(client.post("/ai/tools/execute",
                                                     json={"name": "sleeper", "params": {"mark": mark}}))
            await eventually(lambda: bool(leftover_processes(mark)), "the tool's process to start")
            assert process.process is not None
            process.process.send_signal(signal.SIGTERM)
            stopped = await within(call, "the answer to the call the shutdown stopped")
        assert stopped.status_code == 503
        assert await process.wait() == 0
        assert leftover_processes(mark) == []
    finally:
        await process.stop()


def test_curl_is_installed_by_make_test_on_a_fresh_machine():
    listed = (Path(__file__).parent.parent / "tools" / "os-packages.txt").read_text().split("\n")
    assert any(line.split() == ["test", "curl", "curl"] for line in listed)
