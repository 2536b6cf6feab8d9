"""bash and its alias execute: a command runs in the workspace's directory as process tools run (process user,
minimal environment, group kill, redaction), is served only where a workspace allows it, the server is not open to
anyone and the command would not run as the server's own user, is granted only by name (under any name a catalog
file gives it), and writes only inside the workspace where the kernel has Landlock."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import pwd
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.json_format import MessageToDict

import toolhost
from toolhost.v1 import tool_service_pb2
from toolhost_server.auth import hash_token
from toolhost_server.runners.landlock import landlock_abi
from toolhost_server.workspaces import Workspace

from helpers.calls import call
from helpers.catalogs import write_tool
from helpers.processes import process_stat
from helpers.servers import RunningServer, ServerFactory
from helpers.waiting import eventually

IS_ROOT = os.geteuid() == 0


def structured(response: tool_service_pb2.CallToolResponse) -> dict[str, Any]:
    output: dict[str, Any] = MessageToDict(response.structured_output)
    return output


def give_to_nobody(top: Path) -> None:
    """Make `top` and everything in it the user nobody's, as a workspace bash writes to must be."""
    nobody = pwd.getpwnam("nobody")
    for path in (top, *top.rglob("*")):
        os.chown(path, nobody.pw_uid, nobody.pw_gid, follow_symlinks=False)


async def shell_server(start_server: ServerFactory, shell_dir: Path, **overrides) -> RunningServer:
    """A server whose workspace `w` (shell_dir/w) allows bash and `quiet` (shell_dir/quiet) does not. As root it
    runs bash as nobody, whose workspaces are; otherwise the workspaces accept bash as the server's user."""
    for name in ("w", "quiet"):
        (shell_dir / name).mkdir(exist_ok=True)
    workspaces = overrides.pop("workspaces", (Workspace("w", str(shell_dir / "w"), allow_bash=True),
                                              Workspace("quiet", str(shell_dir / "quiet"))))
    if IS_ROOT:
        for workspace in workspaces:
            give_to_nobody(Path(workspace.path))
    else:
        workspaces = tuple(dataclasses.replace(w, bash_as_server_user=True) for w in workspaces)
    return await start_server(workspaces=workspaces, **{"process_user": "nobody", **overrides})


async def tool_names(server: RunningServer, metadata=None) -> set[str]:
    listed = await server.stub.ListTools(tool_service_pb2.ListToolsRequest(), metadata=metadata)
    return {tool.name for tool in listed.tools}


def gone(pid: int) -> bool:
    stat = process_stat(pid)
    return stat is None or stat[0] == "Z"


@pytest.fixture
def shell_dir(tmp_path: Path) -> Iterator[Path]:
    """Where a test's workspaces go: as root, a directory the user nobody may enter (tmp_path's parents are
    root's only), removed afterwards; otherwise tmp_path."""
    if not IS_ROOT:
        yield tmp_path
        return
    top = Path(tempfile.mkdtemp(prefix="toolhost-bash-test-"))
    top.chmod(0o755)
    try:
        yield top
    finally:
        shutil.rmtree(top)


@pytest.fixture
def nobody_dir(shell_dir: Path) -> Path:
    if not IS_ROOT:
        pytest.skip("needs root: the server switches to the process user nobody only when it runs as root")
    return shell_dir


# --- running a command ------------------------------------------------------------------------------------------


async def test_a_command_runs_in_the_workspace_directory_and_reports_output_and_exit_code(start_server, shell_dir):
    """A non-zero exit is NON_ZERO_EXIT with the exit code, as for a process tool, and the output comes along."""
    server = await shell_server(start_server, shell_dir)
    response = await call(server, "bash", command="pwd; echo out; echo err >&2; exit 3")
    assert not response.success and response.error.code == "NON_ZERO_EXIT", response.error
    assert response.HasField("exit_code") and response.exit_code == 3
    result = structured(response)
    assert result["stdout"] == f"{shell_dir / 'w'}\nout\n"
    assert result["stderr"] == "err\n"
    assert result["exit_code"] == 3
    assert result["workspace"] == "w"
    assert response.output.endswith("[stderr]\nerr\n[exit code 3]"), response.output

    ok = structured(await call(server, "bash", command="touch made && ls"))
    assert ok["exit_code"] == 0 and ok["stdout"] == "made\n"
    assert (shell_dir / "w" / "made").is_file()


async def test_execute_is_the_same_tool_under_drowcoders_name(start_server, shell_dir):
    server = await shell_server(start_server, shell_dir)
    response = await call(server, "execute", command="pwd")
    assert response.success and response.tool == "execute"
    assert structured(response)["stdout"] == f"{shell_dir / 'w'}\n"
    described = await server.stub.GetTool(tool_service_pb2.GetToolRequest(name="execute"))
    assert "same tool" in described.tool.description and "NOT confined" in described.tool.description


async def test_a_signal_that_kills_the_command_is_reported_without_an_exit_code(start_server, shell_dir):
    server = await shell_server(start_server, shell_dir)
    response = await call(server, "bash", command="kill -KILL $$")
    assert not response.success and response.error.code == "NON_ZERO_EXIT"
    assert structured(response)["exit_code"] is None and not response.HasField("exit_code")
    assert response.output.endswith("[bash was killed by signal SIGKILL]"), response.output


async def test_a_streamed_call_gets_output_while_the_command_runs_and_cancelling_it_stops_the_command(
        start_server, shell_dir):
    server = await shell_server(start_server, shell_dir)
    gate = shell_dir / "w" / "gate"
    async with toolhost.AsyncClient(server.target, timeout=30) as client:
        os.mkfifo(gate, 0o666)
        os.chmod(gate, 0o666)
        stream = client.stream_call("bash", command="echo $$ > pid; echo first; read -r _ < gate; echo second; "
                                                    "exec sleep 1000")
        first = await anext(stream)
        # The command is still waiting on the gate (a FIFO): the chunk came while it ran.
        assert isinstance(first, toolhost.OutputChunk) and first.text == "first\n"
        await asyncio.to_thread(gate.write_text, "open\n")  # opening blocks until the command reads
        second = await anext(stream)
        assert isinstance(second, toolhost.OutputChunk) and second.text == "second\n"
        await stream.aclose()
    pid = int((shell_dir / "w" / "pid").read_text())
    await eventually(lambda: gone(pid))


async def test_the_environment_is_minimal_and_home_is_a_private_directory_removed_after(
        start_server, shell_dir, monkeypatch):
    secret = secrets.token_hex(16)
    monkeypatch.setenv("TOOLHOST_TEST_SERVER_SECRET", secret)
    server = await shell_server(start_server, shell_dir)
    result = structured(await call(server, "bash", command='env; touch "$HOME/mine" && echo home-writable'))
    variables = dict(line.split("=", 1) for line in result["stdout"].splitlines() if "=" in line)
    assert secret not in result["stdout"] and "TOOLHOST_TEST_SERVER_SECRET" not in variables
    assert set(variables) <= {"PATH", "LANG", "HOME", "TMPDIR", "PWD", "SHLVL", "_", "TOOLHOST_CALL_MARKER"}, variables
    assert variables["HOME"] == variables["TMPDIR"] and variables["HOME"] != str(shell_dir / "w")
    assert "home-writable" in result["stdout"]
    # The call's directory is out of sight once the call returned (removed just after).
    assert not os.path.exists(variables["HOME"])


async def test_timeout_seconds_stops_the_command_and_everything_it_started(start_server, shell_dir):
    server = await shell_server(start_server, shell_dir)
    response = await call(server, "bash", command="sleep 1000 & echo $! > pid; wait", timeout_seconds=0.5)
    assert not response.success and response.error.code == "TIMEOUT"
    assert "0.5s" in response.error.message and "timeout_seconds" in response.error.message
    assert gone(int((shell_dir / "w" / "pid").read_text()))


async def test_the_command_runs_as_the_process_user_when_the_server_is_root(start_server, nobody_dir):
    nobody = pwd.getpwnam("nobody")
    workspace = nobody_dir / "w"
    workspace.mkdir()
    os.chown(workspace, nobody.pw_uid, nobody.pw_gid)
    server = await start_server(process_user="nobody",
                                workspaces=(Workspace("w", str(workspace), allow_bash=True),))
    result = structured(await call(server, "bash", command="id -u; id -G; touch made"))
    assert result["stdout"].split() == [str(nobody.pw_uid), str(nobody.pw_gid)], result
    assert (workspace / "made").stat().st_uid == nobody.pw_uid


@pytest.mark.parametrize("command", ["-x", "+x", "--version", "-c", "--rcfile=/dev/null", "-"])
async def test_a_command_starting_with_a_dash_or_plus_is_the_command_not_an_option_of_bash(
        start_server, shell_dir, command):
    server = await shell_server(start_server, shell_dir)
    result = structured(await call(server, "bash", command=f"{command} 2>/dev/null; echo ran"))
    assert result["stdout"] == "ran\n" and result["exit_code"] == 0, result


async def test_a_workspace_directory_that_is_gone_is_reported(start_server, shell_dir):
    server = await shell_server(start_server, shell_dir)
    (shell_dir / "w").rmdir()
    response = await call(server, "bash", command="true")
    assert not response.success and response.error.code == "WORKSPACE_NOT_ACCESSIBLE", response.error
    assert "'w'" in response.error.message


async def test_a_credential_the_command_prints_is_redacted(start_server, shell_dir):
    token = secrets.token_urlsafe(24)
    credentials = shell_dir / "credentials"
    credentials.mkdir()
    (credentials / "deploy.token").write_text(token)
    server = await shell_server(start_server, shell_dir, credentials_dir=str(credentials))
    response = await call(server, "bash", command=f"echo token {token}; echo again {token} >&2")
    assert response.success and response.redacted
    assert token not in response.output and token not in str(response.structured_output)
    result = structured(response)
    assert result["stdout"] == "token [REDACTED]\n" and result["stderr"] == "again [REDACTED]\n"


# --- where it is served ---------------------------------------------------------------------------------------


async def test_bash_is_not_served_without_a_workspace_that_allows_it_and_the_log_says_why(
        start_server, shell_dir, caplog):
    caplog.set_level(logging.INFO, logger="toolhost")
    (shell_dir / "w").mkdir()
    server = await start_server(workspaces=(Workspace("w", str(shell_dir / "w")),))
    names = await tool_names(server)
    assert "list_workspaces" in names and not {"bash", "execute"} & names
    notes = [r.getMessage() for r in caplog.records if r.getMessage().startswith("not serving ")]
    assert any("bash, execute" in note and "allow_bash: true" in note for note in notes), notes


async def test_bash_is_not_served_on_a_non_loopback_address_without_authentication(start_server, shell_dir, caplog):
    caplog.set_level(logging.INFO, logger="toolhost")
    server = await shell_server(start_server, shell_dir, grpc_address="0.0.0.0:0", insecure=True)
    names = await tool_names(server)
    assert "list_workspaces" in names and not {"bash", "execute"} & names
    notes = [r.getMessage() for r in caplog.records if r.getMessage().startswith("not serving ")]
    assert any("bash, execute" in note and "not a loopback address" in note for note in notes), notes


async def test_bash_is_not_served_when_only_http_listens_beyond_loopback_without_authentication(
        start_server, shell_dir, caplog):
    # /mcp calls tools as gRPC does: a loopback gRPC address does not make a wildcard http_address safe.
    caplog.set_level(logging.INFO, logger="toolhost")
    server = await shell_server(start_server, shell_dir, http_address="0.0.0.0:0", insecure=True)
    names = await tool_names(server)
    assert "list_workspaces" in names and not {"bash", "execute"} & names
    notes = [r.getMessage() for r in caplog.records if r.getMessage().startswith("not serving ")]
    assert any("bash, execute" in note and "0.0.0.0:0, which is not a loopback address" in note
               for note in notes), notes


async def test_bash_is_not_served_where_it_would_run_as_the_servers_own_user(start_server, shell_dir, caplog):
    """process_user root on a root server, as on a server that is not root: the command would have the server's
    rights (its credentials, its database). Only a workspace that accepts that, by name, gets bash."""
    caplog.set_level(logging.INFO, logger="toolhost")
    (shell_dir / "w").mkdir()
    (shell_dir / "accepting").mkdir()
    server = await start_server(process_user="root",
                                workspaces=(Workspace("w", str(shell_dir / "w"), allow_bash=True),))
    names = await tool_names(server)
    assert "list_workspaces" in names and not {"bash", "execute"} & names
    notes = [r.getMessage() for r in caplog.records if r.getMessage().startswith("not serving ")]
    assert any("bash, execute" in note and "server's own user" in note and "process_user" in note
               for note in notes), notes
    listed = structured(await call(server, "list_workspaces"))
    assert [w["bash"] for w in listed["workspaces"]] == [False]

    accepting = await start_server(process_user="root", workspaces=(
        Workspace("w", str(shell_dir / "w"), allow_bash=True),
        Workspace("accepting", str(shell_dir / "accepting"), allow_bash=True, bash_as_server_user=True)))
    result = structured(await call(accepting, "bash", command="id -u", workspace="accepting"))
    assert result["stdout"] == f"{os.geteuid()}\n"
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call(accepting, "bash", command="touch x", workspace="w")
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "server's own user" in refused.value.details() and "'accepting'" in refused.value.details()
    assert not (shell_dir / "w" / "x").exists()


async def test_a_workspace_without_allow_bash_is_refused_naming_those_that_allow_it(start_server, shell_dir):
    server = await shell_server(start_server, shell_dir)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call(server, "bash", command="touch x", workspace="quiet")
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "'quiet' does not allow bash" in refused.value.details() and "'w'" in refused.value.details()
    assert not (shell_dir / "quiet" / "x").exists()


async def test_only_a_grant_naming_bash_lets_a_role_call_it(start_server, shell_dir):
    everything, shell = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    auth = shell_dir / "auth.yaml"
    auth.write_text(f"""\
roles:
  everything:
    list: {{tools: ["*"]}}
    call: {{tools: ["*"], categories: [file_ops]}}
  shell:
    list: {{tools: [bash, list_workspaces]}}
    call: {{tools: [bash]}}
tokens:
  - {{name: everything-token, sha256: {hash_token(everything)}, roles: [everything]}}
  - {{name: shell-token, sha256: {hash_token(shell)}, roles: [shell]}}
""")
    server = await shell_server(start_server, shell_dir, auth_file=str(auth))
    as_everything = (("authorization", f"Bearer {everything}"),)
    as_shell = (("authorization", f"Bearer {shell}"),)
    visible = await tool_names(server, as_everything)
    assert "list_workspaces" in visible and not {"bash", "execute"} & visible
    for name in ("bash", "execute"):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call(server, name, command="touch x", metadata=as_everything)
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND, name
    assert not (shell_dir / "w" / "x").exists()
    # A grant of bash covers its alias too (a grant of the target covers the alias).
    assert {"bash", "execute"} <= await tool_names(server, as_shell)
    for name in ("bash", "execute"):
        response = await call(server, name, command="pwd", metadata=as_shell)
        assert response.success and structured(response)["stdout"] == f"{shell_dir / 'w'}\n"


async def test_a_catalog_file_serving_bash_under_another_name_keeps_the_grant_by_name_only(start_server, shell_dir):
    """By the built-in's name (implementation: bash) or by its class (a python entrypoint): a `*` grant covers
    neither; a grant naming the new name does."""
    catalog = shell_dir / "catalog"
    command = "parameters:\n  - {name: command, type: string, required: true}\n"
    write_tool(catalog, "sh", f"name: sh\ndescription: A shell.\nsource: local\nimplementation: bash\n{command}")
    write_tool(catalog, "sh2", (
        "name: sh2\ndescription: A shell.\nsource: local\n"
        "runner: {type: python, entrypoint: 'toolhost_server.tools.workspace_shell:BashTool'}\n" + command))
    everything, named = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    auth = shell_dir / "auth.yaml"
    auth.write_text(f"""\
roles:
  everything:
    call: {{tools: ["*"], categories: [file_ops]}}
  named:
    call: {{tools: [sh, sh2]}}
tokens:
  - {{name: everything-token, sha256: {hash_token(everything)}, roles: [everything]}}
  - {{name: named-token, sha256: {hash_token(named)}, roles: [named]}}
""")
    server = await shell_server(start_server, shell_dir, auth_file=str(auth), catalog_dirs=[catalog])
    as_everything = (("authorization", f"Bearer {everything}"),)
    as_named = (("authorization", f"Bearer {named}"),)
    assert not {"sh", "sh2", "bash"} & await tool_names(server, as_everything)
    for name in ("sh", "sh2"):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call(server, name, command="touch x", metadata=as_everything)
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND, name
    assert not (shell_dir / "w" / "x").exists()
    assert {"sh", "sh2"} <= await tool_names(server, as_named)
    for name in ("sh", "sh2"):
        response = await call(server, name, command="pwd", metadata=as_named)
        assert response.success and structured(response)["stdout"] == f"{shell_dir / 'w'}\n", response


# --- Landlock -------------------------------------------------------------------------------------------------


def require_landlock() -> None:
    if landlock_abi() == 0:
        pytest.skip("this kernel offers no Landlock, so bash's writes are not confined here (the tool says "
                    "writes_confined: false)")


async def test_writes_outside_the_workspace_are_refused_where_the_kernel_has_landlock(start_server, shell_dir):
    require_landlock()
    outside = shell_dir / "outside"
    outside.mkdir()
    outside.chmod(0o777)  # only Landlock may refuse: the user's own permissions would allow these writes
    server = await shell_server(start_server, shell_dir)
    response = await call(server, "bash", command=(
        f"echo in > inside.txt && echo inside-ok; echo out > {outside}/file.txt; "
        f"python3 -c 'import os; os.open(\"{outside}/py.txt\", os.O_WRONLY | os.O_CREAT)'"))
    result = structured(response)
    assert result["writes_confined"] is True
    assert "inside-ok" in result["stdout"] and (shell_dir / "w" / "inside.txt").read_text() == "in\n"
    assert f"{outside}/file.txt: Permission denied" in result["stderr"]
    assert "PermissionError: [Errno 13]" in result["stderr"]  # EACCES, also for a program other than bash
    assert result["exit_code"] != 0
    assert list(outside.iterdir()) == []


async def test_a_read_only_workspace_is_not_writable_by_bash_under_landlock(start_server, shell_dir):
    require_landlock()
    (shell_dir / "ro").mkdir()
    (shell_dir / "ro" / "kept.txt").write_text("kept\n")
    server = await shell_server(start_server, shell_dir, workspaces=(
        Workspace("ro", str(shell_dir / "ro"), read_only=True, allow_bash=True),))
    result = structured(await call(server, "bash", command=(
        'cat kept.txt; echo changed > kept.txt; rm kept.txt; echo tmp > "$TMPDIR/t" && echo tmp-ok; '
        "echo discarded > /dev/null && echo devnull-ok")))
    assert result["stdout"] == "kept\ntmp-ok\ndevnull-ok\n", result
    assert (shell_dir / "ro" / "kept.txt").read_text() == "kept\n"
