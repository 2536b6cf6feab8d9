"""Attacks on user tools: a creator reaching for credentials its roles do not grant (directly, through another
caller's tool, through a restore), arguments that try to become code, a script that tries to run as the server's
user, and hostile slugs and texts that try to reach the store or the file system."""

from __future__ import annotations

import os
import pwd
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from toolhost_server.auth import AuthMethod, Caller, Permissions
from toolhost_server.errors import AlreadyExistsError, InvalidRequestError
from toolhost_server.user_tools.records import UserToolRecord

from helpers.calls import call

SMITH = Caller("smith", frozenset({"smith"}), AuthMethod.TOKEN,
               Permissions(manage_tools=True, grantable_credentials=frozenset({"github"})))
MAKER = Caller("maker", frozenset({"maker"}), AuthMethod.TOKEN, Permissions(manage_tools=True))


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
    server = await start_server()
    tools = server.toolhost.user_tools
    await tools.create(SMITH, user_tool("uses_github", script="echo using github"))
    await tools.update(SMITH, "uses_github", {"credentials": ["github"], "script": "echo with the credential"})

    # MAKER may manage tools but not grant github: printing it through the existing tool is refused.
    with pytest.raises(InvalidRequestError, match="credentials github: your roles may not give"):
        await tools.update(MAKER, "uses_github", {"script": "env"})
    with pytest.raises(InvalidRequestError, match="credentials github: your roles may not give"):
        await tools.restore(MAKER, "uses_github", 1)
    stored = await tools.get(SMITH, "uses_github")
    assert (stored.version, stored.script) == (2, "echo with the credential")
    # Dropping the credential is allowed: then the script gets nothing to print.
    dropped = await tools.update(MAKER, "uses_github", {"script": "env", "credentials": []})
    assert dropped.credentials == ()


@pytest.mark.parametrize("hostile", ["$(touch {marker})", "`touch {marker}`", "; touch {marker}",
                                     "\"; touch {marker}; echo \"", "-rf /", "line\nbreak && touch {marker}"])
async def test_arguments_reach_the_script_as_data_never_as_code(start_server, tmp_path: Path, hostile: str):
    server = await start_server()
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
    server = await start_server()
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
    server = await start_server()
    tools = server.toolhost.user_tools
    with pytest.raises(InvalidRequestError, match=message):
        await tools.create(SMITH, user_tool(**fields))
    assert (await tools.list(SMITH, 0, ""))[0] == []


async def test_deeply_nested_schema_is_refused_without_crashing(start_server):
    server = await start_server()
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(5000):
        schema = {"type": "object", "properties": {"x": schema}}
    with pytest.raises(InvalidRequestError, match="input_schema is nested too deeply"):
        await server.toolhost.user_tools.create(MAKER, user_tool(input_schema=schema))


async def test_a_user_tool_cannot_take_a_hidden_tools_name_nor_learn_that_it_exists(start_server, tmp_path: Path):
    server = await start_server()
    tools = server.toolhost.user_tools
    # `bash` is not served without a workspace, and `write` is hidden the same way: taken, with the message of
    # any taken name.
    messages = set()
    for slug in ("bash", "write", "echo"):
        with pytest.raises(AlreadyExistsError) as refused:
            await tools.create(MAKER, user_tool(slug))
        messages.add(str(refused.value).replace(repr(slug), "NAME"))
    assert len(messages) == 1
