"""Which grants cover aliases and name-only tools (auth.permissions.ToolSet), and which built-in tools a server
leaves out, saying why once at start (Tool.unserved_because)."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from toolhost.v1 import tool_service_pb2
from toolhost_server.auth.auth_file import read_auth_file
from toolhost_server.auth.permissions import EVERY_TOOL, Permissions, ToolSet
from toolhost_server.model import ToolSource, ToolSpec
from toolhost_server.workspaces import Workspace

READ = ToolSpec("read", "Reads a file.", {"type": "object"}, {"type": "python"}, ToolSource.BUILTIN, "test",
                category="file_ops")
LOAD = dataclasses.replace(READ, name="load", alias_of="read")
BASH = dataclasses.replace(READ, name="bash", grant_by_name_only=True)
EXECUTE = dataclasses.replace(BASH, name="execute", alias_of="bash")


def test_a_grant_of_the_target_covers_its_alias_and_a_grant_of_the_alias_covers_only_the_alias():
    assert ToolSet(names=("read",)).covers(LOAD)
    assert ToolSet(names=("re*",)).covers(LOAD)  # a glob matching the target matches the alias
    assert ToolSet(names=("load",)).covers(LOAD)
    assert not ToolSet(names=("load",)).covers(READ)
    assert ToolSet(categories=frozenset({"file_ops"})).covers(LOAD)


def test_a_name_only_tool_is_granted_by_its_exact_name_and_by_no_glob_or_category():
    for covering in (ToolSet(names=("bash",)), ToolSet(names=("ls", "bash"))):
        assert covering.covers(BASH) and covering.covers(EXECUTE)  # the alias, by its target's name
    assert ToolSet(names=("execute",)).covers(EXECUTE)
    assert not ToolSet(names=("execute",)).covers(BASH)
    for not_covering in (ToolSet(names=("*",)), ToolSet(names=("b*",)), ToolSet(names=("bas?",)),
                         ToolSet(names=("[b]ash",)), ToolSet(categories=frozenset({"file_ops"}))):
        assert not not_covering.covers(BASH) and not not_covering.covers(EXECUTE), not_covering
    # The callers the server does not tell apart (no authentication, a trusted socket) keep every tool.
    assert EVERY_TOOL.covers(BASH) and Permissions(call=EVERY_TOOL).may_call(EXECUTE)


def test_an_auth_file_role_with_every_name_is_not_the_unauthenticated_callers_set(tmp_path):
    """`tools: ["*"]` in the auth file means every tool a glob may grant: not bash, unlike a server without
    authentication, whose callers are the operator."""
    auth = tmp_path / "auth.yaml"
    auth.write_text("roles:\n  everyone:\n    admin: true\n    call: {tools: ['*']}\n"
                    "  shell:\n    call: {tools: [bash]}\n")
    table = read_auth_file(auth)
    everyone, shell = table.roles["everyone"], table.roles["shell"]
    assert not everyone.unrestricted
    assert everyone.may_call(READ) and not everyone.may_call(BASH)
    assert shell.may_call(BASH) and not shell.may_call(READ)


@pytest.mark.server
async def test_workspace_tools_are_served_only_with_a_workspace_and_the_server_says_so_once(
        start_server, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="toolhost")
    bare = await start_server()
    names = {tool.name for tool in (await bare.stub.ListTools(tool_service_pb2.ListToolsRequest())).tools}
    assert "list_workspaces" not in names and "echo" in names
    notes = [r.getMessage() for r in caplog.records if r.getMessage().startswith("not serving ")
             and "list_workspaces" in r.getMessage()]  # other packs (the file search tools) say their own reason
    assert len(notes) == 1 and "no workspace is configured" in notes[0], notes

    caplog.clear()
    (tmp_path / "w").mkdir()
    served = await start_server(workspaces=(Workspace("w", str(tmp_path / "w")),))
    names = {tool.name for tool in (await served.stub.ListTools(tool_service_pb2.ListToolsRequest())).tools}
    assert "list_workspaces" in names
    assert not any("no workspace is configured" in r.getMessage() for r in caplog.records)
