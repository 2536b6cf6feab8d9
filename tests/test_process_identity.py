"""A root server runs process and script tools as an unprivileged user, unless the operator says otherwise."""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest

from helpers.calls import call
from helpers.catalogs import write_tool

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only a root server switches users")
# A skip here would be visible in the summary (-ra); CI runs as root, so these run there.

NOBODY = 65534


def tool(name: str, runner: str) -> str:
    return f"name: {name}\ndescription: Reports who runs it.\nrunner: {runner}\n"


async def test_process_and_script_tools_run_as_nobody_by_default(start_server, tmp_path):
    write_tool(tmp_path, "who_process", tool("who_process", "{type: process, argv: [id, -u]}"))
    write_tool(tmp_path, "who_script", tool("who_script", '{type: script, script: "#!/bin/sh\\nid -u; id -G; '
                                                           'touch \\"$HOME/written\\" && echo home-ok\\n"}'))
    write_tool(tmp_path, "who_root", tool("who_root", "{type: process, argv: [id, -u], run_as_server_user: true}"))
    server = await start_server(catalog_dirs=[tmp_path], process_user="")
    # Switching users forks without vfork; with gRPC's fork handlers active about a third of these children
    # died before exec (see toolhost_server/__init__.py), so many calls make that visible.
    for process in await asyncio.gather(*(call(server, "who_process") for _ in range(30))):
        assert process.success and process.output.strip() == str(NOBODY), process.error
    script = await call(server, "who_script")
    lines = script.output.split()
    # nobody's uid, only nobody's own group (none of root's), and a private home it may write to.
    assert script.success and lines[0] == str(NOBODY) and lines[1] == str(65534) and lines[2] == "home-ok"
    assert (await call(server, "who_root")).output.strip() == "0"


async def test_a_configured_process_user_is_used(start_server, tmp_path):
    write_tool(tmp_path, "who", tool("who", "{type: process, argv: [id, -un]}"))
    server = await start_server(catalog_dirs=[tmp_path], process_user="daemon")
    assert (await call(server, "who")).output.strip() == "daemon"


async def test_an_unprivileged_tool_cannot_read_the_servers_environment(start_server, tmp_path, monkeypatch):
    canary = f"canary-{uuid.uuid4().hex}"
    monkeypatch.setenv("TOOLHOST_TEST_SECRET", canary)
    write_tool(tmp_path, "snoop", tool("snoop", '{type: script, script: "#!/bin/sh\\n'
                                               'cat /proc/$PPID/environ; echo; env\\n"}'))
    server = await start_server(catalog_dirs=[tmp_path], process_user="")
    response = await call(server, "snoop")
    assert canary not in response.output and canary not in response.stderr
    assert "Permission denied" in response.stderr  # the attempt was made and refused


def test_an_unknown_process_user_is_a_configuration_error():
    from toolhost_server.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="process_user names no user of this system"):
        load_config({"process_user": "no-such-user-here"}, {})
