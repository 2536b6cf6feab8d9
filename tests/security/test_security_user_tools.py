"""Attacks on user tools: a creator reaching for credentials its roles do not grant (directly, through another
caller's tool, through a restore), arguments that try to become code, a script that tries to run as the server's
user (on a root server with an unprivileged process_user; and where user tools would run as the server's own user,
which serves none unless the operator opts in), and hostile slugs and texts that try to reach the store or the
file system."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import pwd
import shutil
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest

from toolhost_server.auth import ANONYMOUS, AuthMethod, Caller, Permissions
from toolhost_server.errors import AlreadyExistsError, FailedPreconditionError, InvalidRequestError
from toolhost_server.user_tools.records import UserToolRecord

from helpers.calls import call
from helpers.paths import TESTS_DIR

SMITH = Caller("smith", frozenset({"smith"}), AuthMethod.TOKEN,
               Permissions(manage_tools=True, grantable_credentials=frozenset({"github"})))
MAKER = Caller("maker", frozenset({"maker"}), AuthMethod.TOKEN, Permissions(manage_tools=True))
# conftest's servers keep process_user root, where user tools would run as the server itself: not served. These
# run them as nobody, the default of a root server.
AS_NOBODY = {"process_user": "nobody"}


def user_tool(slug: str = "probe", script: str = "echo ok", **fields: Any) -> UserToolRecord:
    now = datetime.now(UTC)
    values: dict[str, Any] = {
        "slug": slug, "name": "", "description": "A probe.", "category": "", "system_prompt": "",
        "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}}, "script": script,
        "enabled": True, "timeout_seconds": None, "tags": (), "credentials": (), "version": 0, "created_at": now,
        "updated_at": now, "shadowed_by": ""}
    values.update(fields)
    return UserToolRecord(**values)


async def test_a_caller_cannot_reach_a_credential_by_rewriting_or_restoring_someone_elses_tool(start_server):
    server = await start_server(**AS_NOBODY)
    tools = server.toolhost.user_tools
    await tools.create(SMITH, user_tool("uses_github", script="echo using github"))
    await tools.update(SMITH, "uses_github", {"credentials": ["github"], "script": "echo with the credential"})

    # MAKER may manage tools but not grant github: printing it through the existing tool is refused.
    with pytest.raises(InvalidRequestError, match="credentials github: your roles may not give"):
        await tools.update(MAKER, "uses_github", {"script": "env"})
    # Nor through a restore of a version that holds it (a version keeps the whole record, credentials too).
    with pytest.raises(InvalidRequestError, match="credentials github: your roles may not give"):
        await tools.restore(MAKER, "uses_github", 2)
    stored = await tools.get(SMITH, "uses_github")
    assert (stored.version, stored.script) == (2, "echo with the credential")
    # Dropping the credential is allowed: then the script gets nothing to print.
    dropped = await tools.update(MAKER, "uses_github", {"script": "env", "credentials": []})
    assert dropped.credentials == ()
    # ... and bringing back the version that had it is refused, whoever made that version.
    with pytest.raises(InvalidRequestError, match="credentials github: your roles may not give"):
        await tools.restore(MAKER, "uses_github", 2)
    assert (await tools.get(SMITH, "uses_github")).credentials == ()
    restored = await tools.restore(SMITH, "uses_github", 2)
    assert (restored.credentials, restored.script) == (("github",), "echo with the credential")


@pytest.mark.parametrize("hostile", ["$(touch {marker})", "`touch {marker}`", "; touch {marker}",
                                     "\"; touch {marker}; echo \"", "-rf /", "line\nbreak && touch {marker}"])
async def test_arguments_reach_the_script_as_data_never_as_code(start_server, tmp_path: Path, hostile: str):
    # As the server's user (root here): an injected `touch` could write the marker, which nobody could not.
    server = await start_server(user_tools_as_server_user=True)
    marker = tmp_path / "executed"
    await server.toolhost.user_tools.create(MAKER, user_tool(script='printf %s "$TOOL_ARG_TEXT"'))
    text = hostile.format(marker=marker)
    response = await call(server, "probe", text=text)
    assert response.success, response.error
    assert response.output == text
    assert not marker.exists()


async def test_a_user_tool_runs_as_the_process_user_not_as_the_server(start_server):
    if os.geteuid() != 0:
        pytest.skip("only root can run a child as another user")  # CI runs as root
    nobody = pwd.getpwnam("nobody")
    server = await start_server(process_user="nobody")
    # The script's first line asks for another interpreter, and a catalog's run_as_server_user is no field of a
    # user tool: bash runs it, as nobody.
    await server.toolhost.user_tools.create(MAKER, user_tool(script="#!/usr/bin/env python3\nid -u"))
    response = await call(server, "probe")
    assert response.success, response.error
    assert response.output.strip() == str(nobody.pw_uid)
    spec = server.toolhost.registry.snapshot.get("probe").spec
    assert spec.runner == {"type": "script", "script": "#!/usr/bin/env python3\nid -u", "interpreter": "bash"}


@pytest.mark.parametrize("slug", ["../etc", "a/b", "a b", "a\0b", "a;drop", "ñame", "A", "a" * 65, "", "1abc",
                                  "a-b", "a.b", "\u212a", "a\u200b"])
async def test_a_hostile_slug_is_invalid_argument(start_server, slug: str):
    server = await start_server(**AS_NOBODY)
    with pytest.raises(InvalidRequestError, match="must match"):
        await server.toolhost.user_tools.create(MAKER, user_tool(slug))


@pytest.mark.parametrize(("fields", "message"), [
    ({"script": "echo \0 hidden"}, "script contains a NUL"),
    ({"description": "a\0b"}, "description contains a NUL"),
    ({"system_prompt": "\ud800"}, "system_prompt is not valid Unicode"),
    ({"name": "x" * 300}, "name is 300 characters long"),
    ({"script": "#" * (256 * 1024 + 1)}, "script is 262145 bytes long"),
    ({"input_schema": {"type": "object", "description": "\0"}}, "input_schema contains a NUL"),
    ({"input_schema": {"type": "object", "properties": {"x": {"type": "string", "pattern": "(" * 10}}}},
     "input_schema"),
    ({"tags": tuple(f"t{i}" for i in range(33))}, "tags: at most 32"),
    ({"credentials": ("github", "github")}, "each once"),
    ({"timeout_seconds": float("nan")}, "timeout_seconds"),
])
async def test_hostile_texts_are_refused_before_the_store(start_server, fields: dict[str, Any], message: str):
    server = await start_server(**AS_NOBODY)
    tools = server.toolhost.user_tools
    with pytest.raises(InvalidRequestError, match=message):
        await tools.create(SMITH, user_tool(**fields))
    assert (await tools.list(SMITH, 0, ""))[0] == []


async def test_deeply_nested_schema_is_refused_without_crashing(start_server):
    server = await start_server(**AS_NOBODY)
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(5000):
        schema = {"type": "object", "properties": {"x": schema}}
    with pytest.raises(InvalidRequestError, match="input_schema is nested too deeply"):
        await server.toolhost.user_tools.create(MAKER, user_tool(input_schema=schema))


async def test_a_user_tool_cannot_take_a_hidden_tools_name_nor_learn_that_it_exists(start_server, tmp_path: Path):
    server = await start_server(**AS_NOBODY)
    tools = server.toolhost.user_tools
    # `bash` is not served without a workspace, and `write` is hidden the same way: taken, with the message of
    # any taken name.
    messages = set()
    for slug in ("bash", "write", "echo"):
        with pytest.raises(AlreadyExistsError) as refused:
            await tools.create(MAKER, user_tool(slug))
        messages.add(str(refused.value).replace(repr(slug), "NAME"))
    assert len(messages) == 1


async def test_where_user_tools_would_run_as_the_server_itself_none_is_served_and_nothing_serves_one(
        start_server, tmp_path: Path, caplog: pytest.LogCaptureFixture):
    # process_user root on a root server (and any server not running as root): Config.process_identity() is None.
    data = tmp_path / "data"
    writer = await start_server(data_dir=str(data), user_tools_as_server_user=True)
    await writer.toolhost.user_tools.create(MAKER, user_tool("probe", script="id -u; cat /proc/1/environ"))
    caplog.set_level(logging.WARNING, logger="toolhost.user_tools")
    server = await start_server(data_dir=str(data), process_user="root")
    tools = server.toolhost.user_tools

    served = server.toolhost.registry.snapshot
    assert "probe" not in served
    assert {"tool_create", "tool_update", "tool_run"}.isdisjoint(served.names)
    assert {"tool_list", "tool_show", "tool_delete"} <= set(served.names)
    with pytest.raises(grpc.aio.AioRpcError) as not_served:
        await call(server, "probe")
    assert not_served.value.code() == grpc.StatusCode.NOT_FOUND

    for refused_change in (tools.create(MAKER, user_tool("another")), tools.update(MAKER, "probe", {"script": "id"}),
                           tools.restore(MAKER, "probe", 1), tools.set_enabled(MAKER, "probe", True)):
        with pytest.raises(FailedPreconditionError, match=r"process_user.*user_tools_as_server_user: true"):
            await refused_change
    assert [t.slug for t in (await tools.list(MAKER, 0, ""))[0]] == ["probe"]
    assert (await tools.get(MAKER, "probe")).version == 1

    # Each reload says why the enabled user tool is not served; the log says it once.
    for _ in range(2):
        report = await server.toolhost.reload(ANONYMOUS, "test")
        [problem] = [p for p in report.problems if p.file == "user tools"]
        assert problem.reason.startswith("1 enabled user tool is not served: user tools would run as the "
                                         "server's own user")
    assert len([r for r in caplog.records if "serving none of the" in r.getMessage()]) == 1
    assert "probe" not in server.toolhost.registry.snapshot

    # What serves nothing still works: disabling, deleting.
    assert (await tools.set_enabled(MAKER, "probe", False))[0].enabled is False
    assert (await tools.delete(MAKER, "probe")).slug == "probe"


async def test_the_operator_may_opt_in_and_the_script_then_runs_as_the_server_s_own_user(start_server):
    server = await start_server(process_user="root", user_tools_as_server_user=True)
    assert "tool_create" in server.toolhost.registry.snapshot
    await server.toolhost.user_tools.create(MAKER, user_tool(script="id -u"))
    response = await call(server, "probe")
    assert response.success, response.error
    assert response.output.strip() == str(os.geteuid())


async def test_a_server_that_is_not_root_serves_user_tools_only_when_the_operator_opts_in():
    # A toolhost that is not root, in a fresh interpreter that became nobody (see helpers.unprivileged_toolhost);
    # a test process that is not root runs it as itself.
    directory = Path(tempfile.mkdtemp(prefix="toolhost-user-tools-"))
    try:
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "helpers.unprivileged_toolhost", "nobody", str(directory),
            cwd=TESTS_DIR, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await child.communicate()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    assert child.returncode == 0, err.decode()
    answers = json.loads(out)
    server_uid = answers["uid"]
    assert server_uid != 0 and (os.geteuid() != 0 or server_uid == pwd.getpwnam("nobody").pw_uid)
    assert "does not run as root" in answers["default"] and "user_tools_as_server_user: true" in answers["default"]
    assert answers["opted_in"] == str(server_uid)  # as the server's own user, as the operator accepted
