"""The script runner through the real server: arguments as variables, the private script file, kill, errors."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import grpc
import pytest

from toolhost.v1 import tool_service_pb2
from toolhost_server.model import ToolSource, ToolSpec
from toolhost_server.runners import Invocation, RunnerSettings, build_runner
from toolhost_server.runners.script import argument_variable, interpreter_of

from helpers.calls import call
from helpers.catalogs import add_tool
from helpers.processes import leftover_processes, marker, zombie_children
from helpers.status import violations
from helpers.waiting import eventually

PARAMETERS = """\
  - {name: name, type: string, required: true}
  - {name: count, type: integer, default: 2}
  - {name: opts, type: object}
  - {name: flag, type: boolean}
  - {name: missing, type: string}
  - {name: dashed-name, type: string}
"""


@pytest.fixture
async def server(start_server, tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLHOST_TEST_SECRET", "hunter2-server-secret")
    catalog = tmp_path / "catalog"
    add_tool(catalog, "args", {"type": "script", "env": {"GREETING": "hello"}, "script": (
        "#!/bin/bash\n"
        'printf "%s\\n" "$TOOL_ARG_NAME" "$TOOL_ARG_COUNT" "$TOOL_ARG_OPTS" "$TOOL_ARG_FLAG" '
        '"${TOOL_ARG_MISSING-unset}" "$TOOL_ARG_DASHED_NAME" "$GREETING"\n'
        "env | cut -d= -f1 | sort | tr '\\n' ' '\n")}, PARAMETERS)
    add_tool(catalog, "where", {"type": "script", "script": (
        '#!/bin/sh\necho "$0"\nstat -c %a "$0"\npwd\necho "$HOME"\n')})
    add_tool(catalog, "env_python", {"type": "script", "script": (
        "#!/usr/bin/env python3\nimport sys\nprint('python', sys.version_info[0])\n")})
    add_tool(catalog, "explicit", {"type": "script", "interpreter": [sys.executable, "-I", "-S"],
                                   "script": "import sys\nprint('explicit', sys.flags.isolated)\n"})
    add_tool(catalog, "no_shell", {"type": "script", "install_hint": "toolhost-shell-package",
                                   "script": "#!/usr/bin/toolhost-no-such-shell\necho hi\n"})
    add_tool(catalog, "fails", {"type": "script", "script": "#!/bin/bash\necho partial\necho oops >&2\nexit 4\n"})
    return await start_server(catalog_dirs=[catalog], kill_grace_seconds=0.2)


async def test_arguments_arrive_as_variables_never_as_script_text(server, tmp_path):
    canary = tmp_path / "PWNED"
    hostile = f"$(touch {canary}); `touch {canary}` ' \" $HOME"
    response = await call(server, "args", {"name": hostile, "opts": {"b": 1, "a": [True]}, "flag": False,
                                           "dashed-name": "-x"})
    assert response.success, response.error
    lines = response.output.split("\n")
    assert lines[:7] == [hostile, "2", '{"a": [true], "b": 1}', "false", "unset", "-x", "hello"]
    assert not canary.exists()
    # The environment is the minimal one plus the runner's env and the arguments given.
    assert lines[7].split() == sorted(["GREETING", "HOME", "LANG", "PATH", "PWD", "SHLVL", "TOOLHOST_CALL_MARKER",
                                       "TOOL_ARG_COUNT", "TOOL_ARG_DASHED_NAME", "TOOL_ARG_FLAG", "TOOL_ARG_NAME",
                                       "TOOL_ARG_OPTS", "_"])


async def test_the_script_file_is_private_and_removed(server):
    response = await call(server, "where")
    assert response.success, response.error
    path, mode, cwd, home = response.output.split()
    assert mode == "700"
    assert os.path.dirname(path) == cwd == home
    assert not any(map(os.path.lexists, (path, cwd)))


async def test_the_interpreter_comes_from_the_shebang_or_the_config(server):
    assert (await call(server, "env_python")).output == "python 3\n"
    assert (await call(server, "explicit")).output == "explicit 1\n"


async def test_a_missing_interpreter_is_program_not_found(server):
    response = await call(server, "no_shell")
    assert not response.success and response.error.code == "PROGRAM_NOT_FOUND"
    assert response.error.message == ("toolhost-no-such-shell is not installed on this server "
                                      "(install toolhost-shell-package)")


async def test_a_failing_script_reports_its_status_and_stderr(server):
    response = await call(server, "fails")
    assert not response.success and response.error.code == "NON_ZERO_EXIT" and response.exit_code == 4
    assert response.error.message == "bash exited with status 4: oops"
    assert response.output == "partial\n" and response.stderr == "oops\n"


async def test_a_nul_byte_in_an_argument_is_refused(server):
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(server, "args", {"name": "a\u0000b"})
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert violations(caught.value)[0][0] == "/name"


async def test_a_script_timeout_kills_its_whole_tree(start_server, tmp_path):
    tag = marker()
    script = ("#!/bin/bash\ntrap '' TERM\nsetsid sleep 1000 &\n"
              f"{sys.executable} -I -S -c 'import os, time; os.setsid(); time.sleep(1000)' &\nsleep 1000\n")
    add_tool(tmp_path, "hangs", {"type": "script", "script": script, "env": {"TEST_MARKER": tag}},
             extra="timeout_seconds: 0.5\n")
    server = await start_server(catalog_dirs=[tmp_path], kill_grace_seconds=0.2)
    pending = asyncio.create_task(call(server, "hangs"))
    await eventually(lambda: len(leftover_processes(tag)) >= 4)
    response = await pending
    assert not response.success and response.error.code == "TIMEOUT"
    assert leftover_processes(tag) == []
    await eventually(lambda: zombie_children() == [])


BAD_CONFIGS = {
    "no_script": ({"type": "script"}, "needs `script:`"),
    "no_shebang": ({"type": "script", "script": "echo hi\n"}, "#! line"),
    "bad_interpreter": ({"type": "script", "script": "echo hi", "interpreter": "bash -e"}, "interpreter must"),
    "reserved_env": ({"type": "script", "script": "#!/bin/sh\n", "env": {"TOOL_ARG_X": "1"}}, "set by toolhost"),
    "typo": ({"type": "script", "script": "#!/bin/sh\n", "interpeter": "sh"}, "did you mean 'interpreter'"),
}


async def test_bad_script_configs_are_reported_at_load(start_server, tmp_path):
    for name, (runner, _) in BAD_CONFIGS.items():
        add_tool(tmp_path, name, runner)
    add_tool(tmp_path, "clash", {"type": "script", "script": "#!/bin/sh\n"},
             "  - {name: a-b, type: string}\n  - {name: a_b, type: string}\n")
    server = await start_server(catalog_dirs=[tmp_path])
    report = await server.stub.Reload(tool_service_pb2.ReloadRequest())
    by_file = {Path(e.file).stem: e.reason for e in report.errors}
    for name, (_, reason) in BAD_CONFIGS.items():
        assert reason in by_file.get(name, ""), (name, by_file.get(name))
    assert "both arrive as TOOL_ARG_A_B" in by_file["clash"]
    assert not {*BAD_CONFIGS, "clash"} & set(report.tools)


def test_argument_variable_names_and_shebang_parsing():
    assert argument_variable("dashed-name.x") == "TOOL_ARG_DASHED_NAME_X"
    assert interpreter_of(None, "#!/usr/bin/env bash\n") == ("bash",)
    assert interpreter_of(None, "#!/bin/bash -eu -o pipefail\r\n") == ("/bin/bash", "-eu -o pipefail")
    assert interpreter_of(None, "#!/usr/bin/env -S bash -e\n") == ("/usr/bin/env", "-S bash -e")
    assert interpreter_of(["python3", "-u"], "print(1)") == ("python3", "-u")


async def test_whole_floats_reach_the_script_as_integers_where_the_schema_says_integer():
    schema = {"type": "object", "properties": {
        "count": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "sizes": {"type": "array", "items": {"type": "integer"}},
        "ratio": {"type": "number"},
    }}
    tool = ToolSpec(name="direct", description="A tool built in the test.", input_schema=schema, runner={
        "type": "script", "script": '#!/bin/sh\nprintf "%s|" "$TOOL_ARG_COUNT" "$TOOL_ARG_SIZES" "$TOOL_ARG_RATIO"\n'},
        source=ToolSource.CATALOG, origin="test")
    outcome = await build_runner(tool, RunnerSettings()).run(
        Invocation(tool, {"count": 3.0, "sizes": [1.0, 2.0], "ratio": 4.0}, "call", 10))
    assert outcome.output == "3|[1, 2]|4.0|"
