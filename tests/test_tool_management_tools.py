"""The tool-management tools (tool_create, tool_update, tool_delete, tool_list, tool_show, tool_run) called like
any tool on a real server: they act for the caller of the call, with its rights, and tool_run goes through the
call pipeline."""

from __future__ import annotations

import logging
import secrets

import pytest

import toolhost
from toolhost_server.auth import hash_token

from helpers.servers import RunningServer
from helpers.waiting import HANG_GUARD_SECONDS

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
LINE_COUNT = {"slug": "line_count", "description": "Counts the lines of a file.",
              "script": 'wc -l < "$TOOL_ARG_PATH"', "input_schema": SCHEMA}
# conftest's servers keep process_user root, the server's own user, for which user tools (and tool_create,
# tool_update, tool_run) are served only by the operator's opt-in; the scripts here read files under tmp_path,
# which only root may enter. tests/security/test_security_user_tools.py covers the refusal without it.
SERVED_AS_ROOT = {"user_tools_as_server_user": True}


def client_of(server: RunningServer, token: str | None = None) -> toolhost.AsyncClient:
    return toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS, token=token, insecure_token_ok=True)


async def test_an_agent_makes_runs_changes_and_removes_a_tool_with_tools(start_server, tmp_path):
    server = await start_server(**SERVED_AS_ROOT)
    three_lines = tmp_path / "three.txt"
    three_lines.write_text("a\nb\nc\n")
    async with client_of(server) as client:
        created = await client.call_tool("tool_create", LINE_COUNT, tags=["files"])
        assert created.success, created.error
        assert created.structured_output["version"] == 1 and created.structured_output["enabled"] is True
        assert created.structured_output["tags"] == ["files"] and created.structured_output["category"] == "custom"
        # A tool like any other: served at once, by its slug.
        assert (await client.call_tool("line_count", path=str(three_lines))).output.strip() == "3"

        ran = await client.call_tool("tool_run", slug="line_count", arguments={"path": str(three_lines)})
        assert ran.success and ran.output.strip() == "3"
        assert ran.structured_output["tool"] == "line_count" and ran.structured_output["call_id"] != ran.call_id

        updated = await client.call_tool("tool_update", slug="line_count", script='wc -c < "$TOOL_ARG_PATH"')
        assert updated.success and updated.structured_output["version"] == 2
        assert updated.structured_output["description"] == LINE_COUNT["description"]  # only the script changed
        ran = await client.call_tool("tool_run", slug="line_count", arguments={"path": str(three_lines)})
        assert ran.output.strip() == "6"  # the next call runs the new script

        shown = await client.call_tool("tool_show", slug="line_count")
        assert shown.structured_output["script"] == 'wc -c < "$TOOL_ARG_PATH"'
        assert shown.structured_output["input_schema"] == SCHEMA
        listed = await client.call_tool("tool_list")
        assert [t["slug"] for t in listed.structured_output["user_tools"]] == ["line_count"]
        assert listed.structured_output["next_page_token"] == "" and "line_count (v2, enabled)" in listed.output

        deleted = await client.call_tool("tool_delete", slug="line_count")
        assert deleted.success and deleted.structured_output["version"] == 2
        with pytest.raises(toolhost.NotFoundError):
            await client.call_tool("line_count", path=str(three_lines))
        assert (await client.call_tool("tool_list")).structured_output["user_tools"] == []


async def test_tool_list_pages(start_server):
    server = await start_server(**SERVED_AS_ROOT)
    async with client_of(server) as client:
        for slug in ("tool_b", "tool_a", "tool_c"):
            assert (await client.call_tool("tool_create", LINE_COUNT, slug=slug)).success
        first = await client.call_tool("tool_list", page_size=2)
        assert [t["slug"] for t in first.structured_output["user_tools"]] == ["tool_a", "tool_b"]
        token = first.structured_output["next_page_token"]
        assert token and f"page_token {token}" in first.output
        rest = await client.call_tool("tool_list", page_size=2, page_token=token)
        assert [t["slug"] for t in rest.structured_output["user_tools"]] == ["tool_c"]
        bad = await client.call_tool("tool_list", page_token="garbage")
        assert not bad.success and bad.error.code == "INVALID_PAGE_TOKEN"


async def test_the_cores_refusals_are_the_tools_failures_with_their_reason(start_server):
    server = await start_server(**SERVED_AS_ROOT)
    async with client_of(server) as client:
        assert (await client.call_tool("tool_create", LINE_COUNT)).success
        cases = [
            ("tool_create", {**LINE_COUNT, "slug": "echo"}, "ALREADY_EXISTS"),
            ("tool_create", {**LINE_COUNT, "slug": "other", "input_schema": {"type": 5}}, "INVALID_REQUEST"),
            ("tool_create", {**LINE_COUNT, "slug": "other", "credentials": ["github"]}, "INVALID_REQUEST"),
            ("tool_show", {"slug": "missing_tool"}, "RESOURCE_NOT_FOUND"),
            ("tool_update", {"slug": "missing_tool", "script": "true"}, "RESOURCE_NOT_FOUND"),
            ("tool_delete", {"slug": "missing_tool"}, "RESOURCE_NOT_FOUND"),
            # tool_run runs user tools only: a built-in tool is no user tool.
            ("tool_run", {"slug": "echo", "arguments": {"text": "x"}}, "RESOURCE_NOT_FOUND"),
        ]
        for tool, arguments, code in cases:
            result = await client.call_tool(tool, arguments)
            assert not result.success and result.error.code == code, (tool, arguments, result.error)
        assert [t.slug async for t in client.list_user_tools()] == ["line_count"]
        with pytest.raises(toolhost.InvalidArgumentError) as caught:
            await client.call_tool("tool_update", slug="line_count")  # nothing to change
        assert "at least one field" in caught.value.message
        with pytest.raises(toolhost.InvalidArgumentError):
            await client.call_tool("tool_create", {**LINE_COUNT, "slug": "Not A Slug"})


async def test_tool_run_goes_through_the_pipeline_checks_limits_and_audit(start_server, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="toolhost.audit")
    server = await start_server(**SERVED_AS_ROOT)
    async with client_of(server) as client:
        await client.create_user_tool("fails_three", description="Exits 3.",
                                      script='echo "partial $TOOL_ARG_PATH"; exit 3', input_schema=SCHEMA)
        invalid = await client.call_tool("tool_run", slug="fails_three", arguments={"path": 5})
        assert not invalid.success and invalid.error.code == "INVALID_ARGUMENTS"
        failed = await client.call_tool("tool_run", slug="fails_three", arguments={"path": "p"},
                                        call_id="outer-call")
        assert not failed.success and failed.error.code == "NON_ZERO_EXIT" and failed.exit_code == 3
        assert failed.structured_output["output"] == "partial p\n"
        inner_call = failed.structured_output["call_id"]

        await client.set_user_tool_enabled("fails_three", False)
        disabled = await client.call_tool("tool_run", slug="fails_three", arguments={"path": "p"})
        assert not disabled.success and disabled.error.code == "FAILED_PRECONDITION"
        assert "enable" in disabled.error.message
    records = {r.audit["call_id"]: r.audit for r in caplog.records
               if r.name == "toolhost.audit" and hasattr(r, "audit")}
    # Two calls audited: tool_run's, and the user tool's own inside it.
    assert records["outer-call"]["tool"] == "tool_run" and records["outer-call"]["outcome"] == "NON_ZERO_EXIT"
    assert records[inner_call]["tool"] == "fails_three" and records[inner_call]["outcome"] == "NON_ZERO_EXIT"


async def test_tool_run_output_is_redacted_like_a_call(start_server):
    secret = "s3cr3t-" + secrets.token_hex(12)
    server = await start_server(**SERVED_AS_ROOT)
    server.toolhost.redactor.learn([secret])  # as if a credential source held it
    async with client_of(server) as client:
        await client.create_user_tool("leaky", description="Prints a value.", script=f"echo {secret}")
        ran = await client.call_tool("tool_run", slug="leaky")
    assert ran.success and secret not in ran.output and secret not in str(ran.structured_output)


# --- rights -------------------------------------------------------------------------------------------------


def auth_file(tmp_path, tokens: dict[str, str]) -> str:
    path = tmp_path / "auth.yaml"
    path.write_text("""\
roles:
  agent:
    call: {tools: ["tool_*", line_count]}
  toolsmith:
    manage_tools: {credentials: [deploy]}
    call: {tools: ["tool_*"]}
  admin:
    admin: true
    call: {tools: ["*"]}
tokens:
""" + "".join(f"  - {{name: {role}-token, sha256: {hash_token(token)}, roles: [{role}]}}\n"
              for role, token in tokens.items()))
    return str(path)


@pytest.fixture
async def authenticated(start_server, tmp_path) -> tuple[RunningServer, dict[str, str]]:
    tokens = {role: secrets.token_urlsafe(32) for role in ("agent", "toolsmith", "admin")}
    return await start_server(auth_file=auth_file(tmp_path, tokens), **SERVED_AS_ROOT), tokens


async def test_a_caller_without_manage_tools_may_call_the_tools_but_they_refuse(authenticated):
    server, tokens = authenticated
    async with client_of(server, tokens["admin"]) as admin:
        await admin.create_user_tool("line_count", description="Counts lines.", script='wc -l < "$TOOL_ARG_PATH"',
                                     input_schema=SCHEMA)
    async with client_of(server, tokens["agent"]) as agent:
        for tool, arguments in [
            ("tool_create", {**LINE_COUNT, "slug": "agent_tool"}), ("tool_update", {"slug": "line_count",
                                                                                    "script": "id"}),
            ("tool_delete", {"slug": "line_count"}), ("tool_list", {}), ("tool_show", {"slug": "line_count"}),
            ("tool_run", {"slug": "line_count", "arguments": {"path": "/etc/hostname"}}),
        ]:
            result = await agent.call_tool(tool, arguments)
            assert not result.success and result.error.code == "PERMISSION_DENIED", (tool, result.error)
            assert "manage_tools" in result.error.message
        # The user tool itself, which its grant covers, it may call.
        assert (await agent.call_tool("line_count", path="/etc/hostname")).success
    async with client_of(server, tokens["admin"]) as admin:
        tool = await admin.get_user_tool("line_count")
        assert tool.version == 1 and tool.script == 'wc -l < "$TOOL_ARG_PATH"'
        assert [t.slug async for t in admin.list_user_tools()] == ["line_count"]


async def test_the_tools_act_as_their_caller_with_its_own_rights(authenticated):
    server, tokens = authenticated
    async with client_of(server, tokens["toolsmith"]) as toolsmith:
        created = await toolsmith.call_tool("tool_create", {**LINE_COUNT, "credentials": ["deploy"]})
        assert created.success, created.error
        # The credentials the role lists, and no other: a credential is what the caller's role may grant.
        refused = await toolsmith.call_tool("tool_create", {**LINE_COUNT, "slug": "other", "credentials": ["db"]})
        assert not refused.success and refused.error.code == "INVALID_REQUEST"
        # tool_run needs the right to call the user tool too: the toolsmith's grants cover tool_* only.
        ran = await toolsmith.call_tool("tool_run", slug="line_count", arguments={"path": "/etc/hostname"})
        assert not ran.success and ran.error.code == "TOOL_NOT_FOUND"
    async with client_of(server, tokens["admin"]) as admin:
        [version] = [v async for v in admin.list_user_tool_versions("line_count")]
        assert version.changed_by == "toolsmith-token"
        # An admin may grant no credential it does not list either.
        refused = await admin.call_tool("tool_update", slug="line_count", credentials=["db"])
        assert not refused.success and refused.error.code == "INVALID_REQUEST"
