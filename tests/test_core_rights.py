"""The core checks the admin's requests itself (Reload, the log queries), whichever surface passes them on, and
hands Python tools the server parts they use through their ToolContext, never a process global."""

from __future__ import annotations

import json
import logging
import secrets

import pytest

from toolhost.v1 import tool_service_pb2
from toolhost_server.auth import AuthMethod, Caller
from toolhost_server.auth.permissions import EVERY_TOOL, Permissions
from toolhost_server.errors import PermissionDeniedError
from toolhost_server.logs.query import LogFilter

from helpers.catalogs import write_tool

# Sees and calls every tool, but is no admin: what the core must refuse the admin's requests to.
USER = Caller("user", frozenset({"user"}), AuthMethod.TOKEN, Permissions(list=EVERY_TOOL, call=EVERY_TOOL))
ADMIN = Caller("ops", frozenset({"admin"}), AuthMethod.TOKEN,
               Permissions(list=EVERY_TOOL, call=EVERY_TOOL, admin=True))


async def test_the_core_refuses_reload_and_log_requests_to_a_caller_without_the_admin_role(
        start_server, tmp_path, caplog):
    caplog.set_level(logging.INFO)  # the reload's records reach the memory ring
    server = await start_server(catalog_dirs=[tmp_path])
    core = server.toolhost
    write_tool(tmp_path, "added_later")  # what a reload would bring in

    with pytest.raises(PermissionDeniedError, match="Reload needs the admin role"):
        await core.reload(USER, "test")
    assert "added_later" not in core.registry.snapshot  # nothing was reloaded
    with pytest.raises(PermissionDeniedError, match="QueryLogs needs the admin role"):
        await core.query_logs(USER, LogFilter())
    # Refused when asked, before the first record: a stream that would only fail later could leak a backlog.
    with pytest.raises(PermissionDeniedError, match="TailLogs needs the admin role"):
        core.follow_logs(USER, LogFilter(), backlog=10)

    report = await core.reload(ADMIN, "test")
    assert report.success and report.added == ("added_later",)
    page = await core.query_logs(ADMIN, LogFilter(text="reload"))
    assert page.records
    follower = core.follow_logs(ADMIN, LogFilter(text="reload"), backlog=1)
    try:
        record = await anext(follower)
    finally:
        await follower.aclose()
    assert "reload" in record.message.lower()


async def test_log_inspector_reads_the_logs_of_the_server_that_serves_the_call(start_server, tmp_path, caplog):
    """Two servers in one process: each one's log_inspector reads its own readers (here, only the first has a
    log file), whichever started last."""
    caplog.set_level(logging.INFO)
    marker = f"only-in-the-file-{secrets.token_hex(6)}"
    log_file = tmp_path / "app.log"
    log_file.write_text(json.dumps({"time": "2026-01-01T00:00:00Z", "level": "WARNING", "logger": "app",
                                    "message": marker}) + "\n")
    with_file = await start_server(log_files=(str(log_file),))
    without_file = await start_server()

    found = []
    for server in (with_file, without_file):
        response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(
            name="log_inspector", arguments_json=json.dumps({"text": marker, "source": "file"})))
        assert response.success, response.error
        found.append([record["message"] for record in json.loads(response.output)["records"]])
    assert found == [[marker], []]
