"""/mcp over streamable HTTP, stateless, with the SDK's own client in both protocol eras against a real server
and the real HTTP listener: listing, calls, errors, progress, cancellation, authentication and roles, change
notifications, and proof that every call goes through the one pipeline (audit, metrics, spans, redaction).

The mapping of tools and results to MCP's types is pinned by test_mcp_protocol.py; here it is the transport.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import signal
import ssl
import tempfile
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from prometheus_client.parser import text_string_to_metric_families

from toolhost_server.auth import ANONYMOUS
from toolhost_server.mcp.local_backend import PAGE_SIZE
from toolhost_server.mcp.protocol_server import WRAPPED_RESULT_KEY

from helpers.auth import Tokens, auth_file_text
from helpers.auth import write_catalog as write_role_catalog
from helpers.catalogs import add_tool, write_tool
from helpers.certificates import CertificateAuthority
from helpers.held_calls import held_tool, new_hold
from helpers.mcp_http import ERAS, jsonrpc_headers, mcp_client, post_jsonrpc, request, serving_mcp
from helpers.otlp import otlp_receiver
from helpers.processes import leftover_processes, marker
from helpers.servers import ServerProcess
from helpers.waiting import eventually, within

GENERATED = PAGE_SIZE + 5
SECRET = "hunter2hunter2"  # a value the redactor hides after `password=`
ADMIN = ANONYMOUS  # full rights, as the reloads below need


def numbers(count: int) -> list[int]:
    """A structured output that is a JSON array, not an object."""
    return list(range(count))


def record(name: str) -> dict[str, Any]:
    return {"name": name, "length": len(name)}


def leak_password(text: str) -> str:
    return f"{text} password={SECRET}"


def fail_with_password() -> str:
    raise ValueError(f"cannot log in with password={SECRET}")


TOOLS = {
    "numbers": """
name: numbers
display_name: Number List
description: Counts.
runner: {type: python, entrypoint: "test_mcp_http:numbers"}
output_schema: {type: array, items: {type: integer}}
annotations: {read_only: true, idempotent: true}
parameters: [{name: count, type: integer, required: true, minimum: 0}]
""",
    "record": """
name: record
display_name: Name Record
description: A record about a name.
runner: {type: python, entrypoint: "test_mcp_http:record"}
output_schema:
  type: object
  properties: {name: {type: string}, length: {type: integer}}
annotations: {destructive: true, open_world: true}
parameters: [{name: name, type: string, required: true, max_length: 20}]
""",
    "leaky": """
name: leaky
description: Writes a password in its output.
runner: {type: python, entrypoint: "test_mcp_http:leak_password"}
parameters: [{name: text, type: string, required: true}]
""",
    "failing": """
name: failing
description: Fails with a password in its message.
runner: {type: python, entrypoint: "test_mcp_http:fail_with_password"}
""",
    "progress": """
name: progress
description: Reports progress.
runner: {type: python, entrypoint: 'catalog_functions:ReportsProgress'}
parameters: [{name: steps, type: integer, required: true}]
""",
}


@pytest.fixture
def tokens() -> Tokens:
    return Tokens.generate()


@pytest.fixture
async def server(start_server, tmp_path, tokens):
    """A server with an auth file (admin, agent and viewer tokens), more than a page of tools, and tools of
    every kind a test below calls."""
    catalog = write_role_catalog(tmp_path / "catalog")
    for name, text in TOOLS.items():
        write_tool(catalog, name, text)
    write_tool(catalog, "held", held_tool("held"))
    add_tool(catalog, "sleeper", {"type": "script", "script": "#!/bin/bash\nexec sleep 1000\n"},
             "  - {name: mark, type: string, required: true}\n")
    for index in range(GENERATED):
        write_tool(catalog, f"gen_{index:03d}", f"name: gen_{index:03d}\ndescription: Generated.\n"
                   "category: generated\n"
                   "runner: {type: python, entrypoint: 'test_mcp_http:numbers'}\n"
                   "parameters: [{name: count, type: integer, required: true}]\n")
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text(auth_file_text(tokens))
    return await start_server(catalog_dirs=[catalog], auth_file=str(auth_file), kill_grace_seconds=0.2)


@pytest.fixture
async def mcp(server):
    async with serving_mcp(server) as serving:
        yield serving


async def every_tool(client: Client) -> tuple[dict[str, types.Tool], int]:
    """Every tool by name, following the cursors, and how many pages that took."""
    tools: dict[str, types.Tool] = {}
    cursor = None
    pages = 0
    while True:
        page = await client.list_tools(cursor=cursor)
        pages += 1
        tools.update((tool.name, tool) for tool in page.tools)
        if not page.next_cursor:
            return tools, pages
        cursor = page.next_cursor


@pytest.mark.parametrize("era", ERAS)
async def test_tools_list_pages_through_every_tool_with_schemas_title_and_all_four_hints(mcp, tokens, era):
    async with mcp_client(mcp.url, tokens.admin, era=era) as client:
        tools, pages = await every_tool(client)
        with pytest.raises(MCPError) as bad_cursor:
            await client.list_tools(cursor="not-a-cursor-this-server-issued")
    assert pages >= 2
    assert {f"gen_{i:03d}" for i in range(GENERATED)} <= tools.keys()
    assert bad_cursor.value.error.code == types.INVALID_PARAMS
    record_tool = tools["record"]
    assert record_tool.title == "Name Record"
    assert record_tool.input_schema["required"] == ["name"]
    assert record_tool.input_schema["properties"]["name"]["maxLength"] == 20
    assert record_tool.output_schema == {"type": "object", "properties": {"name": {"type": "string"},
                                                                        "length": {"type": "integer"}}}
    wire = record_tool.model_dump(by_alias=True, exclude_none=True)["annotations"]
    # Every hint is sent, false ones too: an absent destructive or open-world hint means true in MCP.
    assert {key: wire[key] for key in ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")} == {
        "readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": True}
    hints = tools["numbers"].annotations
    assert hints is not None
    assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint) == (
        True, False, True, False)
    # A schema that is not an object is the tool's own only where the era allows one.
    assert tools["numbers"].output_schema == (None if era == "legacy" else {"type": "array",
                                                                            "items": {"type": "integer"}})


@pytest.mark.parametrize("era", ERAS)
async def test_a_call_answers_text_and_structured_content(mcp, tokens, era):
    async with mcp_client(mcp.url, tokens.admin, era=era) as client:
        record_result = await client.call_tool("record", {"name": "ada"})
        numbers_result = await client.call_tool("numbers", {"count": 3})
    assert record_result.is_error is False
    assert record_result.structured_content == {"name": "ada", "length": 3}
    assert isinstance(record_result.content[0], types.TextContent)
    assert json.loads(record_result.content[0].text) == {"name": "ada", "length": 3}
    # The handshake era allows only an object: a list is wrapped there, and sent as it is since 2026-07-28.
    assert numbers_result.structured_content == ({WRAPPED_RESULT_KEY: [0, 1, 2]} if era == "legacy" else [0, 1, 2])
    assert isinstance(numbers_result.content[0], types.TextContent)
    assert json.loads(numbers_result.content[0].text) == [0, 1, 2]


@pytest.mark.parametrize("era", ERAS)
async def test_failures_and_bad_arguments_are_tool_errors_and_an_unknown_tool_is_invalid_params(mcp, tokens, era):
    async with mcp_client(mcp.url, tokens.admin, era=era) as client:
        failed = await client.call_tool("failing", {})
        bad = await client.call_tool("record", {"name": "x" * 30, "extra": 1})
        missing = await client.call_tool("record", {})
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("no_such_tool", {})
    assert failed.is_error is True
    assert isinstance(failed.content[0], types.TextContent)
    assert failed.content[0].text.startswith("TOOL_EXCEPTION: ")
    for result, fields in ((bad, ["/name", "/extra"]), (missing, ["/name"])):
        assert result.is_error is True
        assert isinstance(result.content[0], types.TextContent)
        lines = result.content[0].text.splitlines()
        assert lines[0].startswith("INVALID_ARGUMENTS: ")
        assert sorted(line.split(":")[0] for line in lines[1:]) == sorted(fields), lines
    assert "required" in missing.content[0].text  # type: ignore[union-attr]
    assert unknown.value.error.code == types.INVALID_PARAMS
    assert unknown.value.error.message.startswith("Unknown tool: ")


@pytest.mark.parametrize("era", ERAS)
async def test_progress_notifications_arrive_while_the_tool_runs(mcp, tokens, era):
    reports: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append((progress, total, message))

    async with mcp_client(mcp.url, tokens.admin, era=era) as client:
        result = await client.call_tool("progress", {"steps": 3}, progress_callback=on_progress)
    assert result.is_error is False and result.content[0].text == "counted to 3"  # type: ignore[union-attr]
    assert [(progress, total) for progress, total, _ in reports] == [(1, 3), (2, 3), (3, 3)]
    # The tool's messages carry a password: they are redacted as the output is.
    assert all(message is not None and message.startswith("step ") and SECRET not in message
               for _, _, message in reports)


async def cancel_while_running(client: Client, name: str, arguments: dict[str, Any],
                               running: Any) -> None:
    """Call `name` and cancel the call once `running()` (awaitable) says the tool runs, as a host does when
    its user presses stop: a handshake-era client POSTs notifications/cancelled, a 2026-07-28 one closes the
    call's stream."""
    async with anyio.create_task_group() as group:
        group.start_soon(client.call_tool, name, arguments)
        await within(running(), f"the call of {name} to start")
        group.cancel_scope.cancel()


@pytest.mark.parametrize("era", ERAS)
async def test_cancelling_a_call_stops_the_python_tool(mcp, tokens, era):
    hold_name, hold = new_hold()
    async with mcp_client(mcp.url, tokens.admin, era=era) as client:
        await cancel_while_running(client, "held", {"hold": hold_name}, hold.started.wait)
        await within(hold.stopped.wait(), "the cancelled tool to stop")
        assert hold.cancelled
        # The client goes on working after its cancel.
        assert (await client.call_tool("record", {"name": "after"})).is_error is False
    assert len(mcp.endpoint.calls) == 0


@pytest.mark.parametrize("era", ERAS)
async def test_cancelling_a_call_stops_the_process_tool(mcp, server, tokens, era):
    mark = marker()

    async def process_running() -> None:
        await eventually(lambda: bool(leftover_processes(mark)), "the tool's process to start")

    async with mcp_client(mcp.url, tokens.admin, era=era) as client:
        await cancel_while_running(client, "sleeper", {"mark": mark}, process_running)
        # While the client stays connected: closing its connection would end the call anyway.
        await eventually(lambda: not leftover_processes(mark), "the cancelled tool's process to be gone")
        await eventually(lambda: server.toolhost.pipeline.in_flight == 0)


async def test_a_call_still_running_when_the_server_stops_ends_with_an_error_saying_so(mcp, tokens):
    hold_name, hold = new_hold()
    async with mcp_client(mcp.url, tokens.admin, era="legacy") as client:
        call = asyncio.ensure_future(client.call_tool("held", {"hold": hold_name}))
        await within(hold.started.wait(), "the call to start")
        mcp.endpoint.calls.stop_all()  # what serve.py does once the shutdown grace is over
        with pytest.raises(MCPError) as stopped:
            await within(call, "the stopped call's answer")
    assert hold.cancelled
    assert stopped.value.error.code == types.INTERNAL_ERROR and "shut down" in stopped.value.error.message


async def test_no_token_or_a_bad_token_is_401_with_a_bearer_challenge(mcp, tokens):
    listing = request("tools/list", {}, "legacy")
    missing, _ = await post_jsonrpc(mcp.url, listing, None)
    wrong, _ = await post_jsonrpc(mcp.url, listing, "not-a-token-of-this-server")
    assert missing.status_code == wrong.status_code == 401
    assert missing.headers["www-authenticate"] == 'Bearer realm="toolhost"'
    assert wrong.headers["www-authenticate"] == 'Bearer realm="toolhost", error="invalid_token"'
    assert missing.json()["error"] == wrong.json()["error"] == "unauthenticated"
    assert "Authorization: Bearer" in missing.json()["message"]
    assert "not-a-token" not in wrong.text


async def test_only_post_is_served(mcp, tokens):
    async with httpx.AsyncClient() as client:
        for method in ("GET", "DELETE"):
            answer = await client.request(method, mcp.url, headers={"Authorization": f"Bearer {tokens.admin}",
                                                                     "Accept": "text/event-stream"})
            assert answer.status_code == 405, method
            assert answer.headers["allow"] == "POST"


@pytest.mark.parametrize("era", ERAS)
async def test_a_role_limited_token_sees_only_its_tools_and_is_refused_a_visible_one(mcp, tokens, era):
    async with mcp_client(mcp.url, tokens.agent, era=era) as client:
        tools, _ = await every_tool(client)
        denied = await client.call_tool("admin_tool", {"name": "x"})
        allowed = await client.call_tool("echo_one", {"name": "agent"})
    assert sorted(tools) == ["admin_tool", "echo_one", "net_probe"]  # as ListTools shows that token
    assert denied.is_error is True
    assert denied.content[0].text.startswith("PERMISSION_DENIED: ")  # type: ignore[union-attr]
    assert allowed.is_error is False and allowed.content[0].text == "Hello, agent."  # type: ignore[union-attr]


async def test_capabilities_offer_list_changed_only_where_it_can_be_delivered(mcp, tokens):
    async with mcp_client(mcp.url, tokens.admin, era="legacy") as legacy:
        legacy_tools = legacy.server_capabilities.tools
    async with mcp_client(mcp.url, tokens.admin, era="auto") as modern:
        modern_tools = modern.server_capabilities.tools
        version = modern.protocol_version
    # Stateless HTTP has no stream for a handshake-era client to be notified on: it must re-list itself.
    assert legacy_tools is not None and not legacy_tools.list_changed
    assert version == "2026-07-28"
    assert modern_tools is not None and modern_tools.list_changed is True


async def test_list_changed_follows_only_the_tools_the_caller_sees(mcp, server, tokens, tmp_path):
    catalog = tmp_path / "catalog"
    toolhost = server.toolhost
    admin_events: list[object] = []
    agent_events: list[object] = []
    admin_changed = asyncio.Event()
    agent_changed = asyncio.Event()

    async def read(subscription: Any, events: list[object], changed: asyncio.Event) -> None:
        async for event in subscription:
            events.append(event)
            changed.set()

    async def reload() -> None:
        report = await toolhost.reload(ADMIN, "test")
        assert report.success

    async with mcp_client(mcp.url, tokens.admin) as admin, mcp_client(mcp.url, tokens.agent) as agent, \
            admin.listen(tools_list_changed=True) as admin_stream, \
            agent.listen(tools_list_changed=True) as agent_stream, anyio.create_task_group() as group:
        group.start_soon(read, admin_stream, admin_events, admin_changed)
        group.start_soon(read, agent_stream, agent_events, agent_changed)
        # A tool the agent cannot see: the admin is told, the agent is not.
        write_tool(catalog, "secret_two", "name: secret_two\ndescription: Hidden from agents.\ncategory: testing\n"
                   "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:greet'}\n"
                   "parameters: [{name: name, type: string, required: true}]\n")
        await reload()
        await within(admin_changed.wait(), "the admin's notice of the hidden tool")
        # The admin's notice crossed HTTP to this client after both listeners woke for that generation: a
        # notice to the agent would be on its way, ahead of any later one on its stream.
        assert agent_events == []
        write_tool(catalog, "echo_two")
        await reload()
        await within(agent_changed.wait(), "the agent's notice of the visible tool")
        # The first notice the agent got is for the tool it can see: it is there when it lists again.
        agent_now, _ = await every_tool(agent)
        assert "echo_two" in agent_now and "secret_two" not in agent_now
        assert len(agent_events) == 1
        group.cancel_scope.cancel()
    assert len(admin_events) == 2


async def test_an_mcp_call_is_audited_counted_traced_and_redacted_by_the_one_pipeline(
        start_server, tmp_path, tokens, monkeypatch, caplog):
    catalog = write_role_catalog(tmp_path / "catalog")
    write_tool(catalog, "leaky", TOOLS["leaky"])
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text(auth_file_text(tokens))
    for variable in ("OTEL_TRACES_EXPORTER", "OTEL_TRACES_SAMPLER", "OTEL_SDK_DISABLED",
                     "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(variable, raising=False)
    async with otlp_receiver() as (receiver, endpoint):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # export within 50 ms rather than 5 s
        server = await start_server(catalog_dirs=[catalog], auth_file=str(auth_file))
        with caplog.at_level(logging.INFO, logger="toolhost.audit"):
            async with serving_mcp(server) as mcp, mcp_client(mcp.url, tokens.admin, era="legacy") as client:
                result = await client.call_tool("leaky", {"text": "hello"})
        audit = [record.audit for record in caplog.records if hasattr(record, "audit")]
        assert [(a["tool"], a["caller"], a["auth_method"], a["outcome"]) for a in audit] == [
            ("leaky", "admin-token", "token", "OK")]
        spans = await receiver.trace(audit[0]["trace_id"], 1)
    assert result.is_error is False
    text = result.content[0].text  # type: ignore[union-attr]
    assert SECRET not in text and text.startswith("hello password=") and "[REDACTED]" in text
    tool_span = [span for span in spans if span.name == "execute_tool leaky"]
    assert len(tool_span) == 1
    assert tool_span[0].attributes["gen_ai.tool.call.id"] == audit[0]["call_id"]
    assert tool_span[0].attributes["toolhost.outcome"] == "OK"
    assert tool_span[0].attributes["toolhost.redacted"] is True
    counted = {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
               for family in text_string_to_metric_families(server.toolhost.metrics.render().decode())
               for sample in family.samples}
    assert counted[("toolhost_tool_calls_total", (("outcome", "OK"), ("tool", "leaky")))] == 1


@pytest.mark.server
async def test_toolhost_serve_serves_mcp_and_its_shutdown_stops_an_mcp_call(tmp_path):
    """serve.py's wiring: /mcp on the HTTP listener, and a SIGTERM whose grace ends while an MCP call runs
    stops that call's process, answers the client, and exits."""
    mark = marker()
    add_tool(tmp_path, "sleeper", {"type": "script", "script": "#!/bin/bash\nexec sleep 1000\n"},
             "  - {name: mark, type: string, required: true}\n")
    process = ServerProcess("--catalog-dir", str(tmp_path), "--shutdown-delay-seconds", "0",
                            "--shutdown-grace-seconds", "0.2", "--kill-grace-seconds", "0.2")
    try:
        await process.start()
        http_port = int((await process.wait_for_log(rb"serving HTTP \(/mcp, .* on 127\.0\.0\.1:(\d+)")).group(1))
        async with mcp_client(f"http://127.0.0.1:{http_port}/mcp", era="legacy") as client:
            echoed = await client.call_tool("echo", {"text": "over mcp"})
            assert echoed.content[0].text == "over mcp"  # type: ignore[union-attr]
            call = asyncio.ensure_future(client.call_tool("sleeper", {"mark": mark}))
            await eventually(lambda: bool(leftover_processes(mark)), "the tool's process to start")
            assert process.process is not None
            process.process.send_signal(signal.SIGTERM)
            with pytest.raises(MCPError) as stopped:
                await within(call, "the answer to the call the shutdown stopped")
        assert "shut down" in stopped.value.error.message
        assert await process.wait() == 0
        assert leftover_processes(mark) == []
    finally:
        await process.stop()


@pytest.mark.parametrize("with_auth_file", [False, True])
async def test_over_mutual_tls_the_client_ca_alone_admits_and_an_auth_file_wants_a_token(
        start_server, tmp_path, tokens, with_auth_file):
    """uvicorn shows an app neither the TLS connection nor the peer's certificate, so /mcp cannot tell whose
    certificate it is. The handshake verified it against the client CA, though: without an auth file that CA
    is the whole access list, and with one a bearer token says who calls."""
    authority = CertificateAuthority(tmp_path / "pki")
    server_pair = authority.issue_server("server")
    client_pair = authority.issue_client("client", "agent-7")
    settings: dict[str, Any] = {"tls_cert_file": str(server_pair.certificate), "tls_key_file": str(server_pair.key),
                                "tls_client_ca_file": str(authority.certificate)}
    if with_auth_file:
        (tmp_path / "auth.yaml").write_text(auth_file_text(tokens))
        settings["auth_file"] = str(tmp_path / "auth.yaml")
    server = await start_server(catalog_dirs=[write_role_catalog(tmp_path / "catalog")], **settings)
    tls = ssl.create_default_context(cafile=str(authority.certificate))
    tls.load_cert_chain(str(client_pair.certificate), str(client_pair.key))
    async with serving_mcp(server) as mcp:
        assert mcp.url.startswith("https://")
        listing = request("tools/list", {}, "legacy")
        async with httpx.AsyncClient(verify=tls) as http:
            without_token = await http.post(mcp.url, json=listing, headers=jsonrpc_headers("legacy"))
        if with_auth_file:
            assert without_token.status_code == 401
            async with mcp_client(mcp.url, tokens.agent, era="legacy", tls=tls) as client:
                tools, _ = await every_tool(client)
            assert sorted(tools) == ["admin_tool", "echo_one", "net_probe"]
        else:
            assert without_token.status_code == 200
            async with mcp_client(mcp.url, era="legacy", tls=tls) as client:
                result = await client.call_tool("echo_one", {"name": "mtls"})
            assert result.content[0].text == "Hello, mtls."  # type: ignore[union-attr]


@pytest.mark.parametrize("era", ERAS)
async def test_a_draining_server_answers_a_call_with_a_retryable_protocol_error(mcp, server, tokens, era):
    """Not a tool failure the model reads: an error the host retries, on another replica, as gRPC's UNAVAILABLE."""
    async with mcp_client(mcp.url, tokens.admin, era=era) as client:
        server.toolhost.pipeline.stop_accepting()
        with pytest.raises(MCPError) as refused:
            await client.call_tool("record", {"name": "late"})
    assert refused.value.error.code == types.INTERNAL_ERROR
    assert refused.value.error.message == "the server is shutting down; retry on another replica"


CLIENT_LOGGERS = ("mcp.client", "client", "httpx", "httpcore")


async def test_at_debug_level_no_result_or_request_body_reaches_the_log(mcp, tokens, caplog):
    """sse_starlette logs every chunk it sends at DEBUG, and the SDK logs malformed frames: tool results (file
    contents, database rows) would reach the log ring, the log database and LogService readers."""
    caplog.set_level(logging.DEBUG)
    marker_text = "result-text-that-stays-out-of-the-log"
    async with mcp_client(mcp.url, tokens.admin, era="legacy") as client:
        result = await client.call_tool("record", {"name": marker_text[:20]})
        assert result.is_error is False
    await post_jsonrpc(mcp.url, b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": "' + b"q" * 64
                       + b'"}', tokens.admin)
    # The test's own client logs what it receives: only the server's side counts.
    server_side = [record for record in caplog.records if not record.name.startswith(CLIENT_LOGGERS)]
    logged = "\n".join(record.getMessage() for record in server_side)
    assert any(record.levelno == logging.DEBUG and record.name.startswith("mcp.server") for record in server_side), \
        "no DEBUG line of the SDK's server was captured: the test would prove nothing"
    assert marker_text[:20] not in logged and "q" * 64 not in logged


@pytest.mark.server
async def test_toolhost_serve_gives_an_mcp_call_the_same_shutdown_grace_as_grpc(tmp_path):
    """gRPC's stop returns at once when no RPC runs; the MCP call in flight still gets the grace, and its
    result. The tool waits on a FIFO until the test releases it, once the server says it is waiting."""
    mark = marker()
    # Where the tool's user (nobody, when the server runs as root) can reach it: tmp_path is root's alone.
    fifos = Path(tempfile.mkdtemp(prefix="toolhost-test-fifo-"))
    fifos.chmod(0o755)
    release = fifos / "release"
    os.mkfifo(release)
    release.chmod(0o666)
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    script = f"#!/bin/bash\nread line < {release}\necho \"released: $line\"\n"
    add_tool(catalog, "waiter", {"type": "script", "script": script},
             "  - {name: mark, type: string, required: true}\n")
    process = ServerProcess("--catalog-dir", str(catalog), "--shutdown-delay-seconds", "0",
                            "--shutdown-grace-seconds", "60", "--kill-grace-seconds", "0.2")
    try:
        await process.start()
        http_port = int((await process.wait_for_log(rb"serving HTTP \(/mcp, .* on 127\.0\.0\.1:(\d+)")).group(1))
        async with mcp_client(f"http://127.0.0.1:{http_port}/mcp", era="legacy") as client:
            call = asyncio.ensure_future(client.call_tool("waiter", {"mark": mark}))
            await eventually(lambda: bool(leftover_processes(mark)), "the tool's process to start")
            assert process.process is not None
            process.process.send_signal(signal.SIGTERM)
            await process.wait_for_log(rb"waiting up to \d+\.\ds more for 1 calls over HTTP")
            writer = os.open(release, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO if the tool was already stopped
            try:
                os.write(writer, b"go\n")
            finally:
                os.close(writer)
            result = await within(call, "the answer to the call the grace let finish")
        assert result.is_error is False and result.content[0].text.strip() == "released: go"  # type: ignore[union-attr]
        assert await process.wait() == 0
    finally:
        await process.stop()
        shutil.rmtree(fifos)
