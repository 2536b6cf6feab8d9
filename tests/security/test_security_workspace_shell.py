"""Attacks on bash: processes that try to outlive their call, writes that try to leave the workspace under
Landlock (symlinks, hard links, renames, /proc), a command that signals, or connects to a socket of, another
caller's command, ioctl on a device, a setuid program that tries to regain root, the server's environment read
through /proc, and hostile arguments and outputs."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.json_format import MessageToDict

from toolhost.v1 import tool_service_pb2
from toolhost_server.runners.landlock import landlock_abi
from toolhost_server.tools.workspace_shell import BASH_OUTPUT_BYTES
from toolhost_server.workspaces import Workspace

from helpers.calls import call
from helpers.processes import process_stat
from helpers.servers import RunningServer, ServerFactory


def structured(response: tool_service_pb2.CallToolResponse) -> dict[str, Any]:
    output: dict[str, Any] = MessageToDict(response.structured_output)
    return output


IS_ROOT = os.geteuid() == 0


async def shell_server(start_server: ServerFactory, workspace: Path, **overrides: Any) -> RunningServer:
    """A server whose workspace `w` allows bash. As root it runs bash as nobody, whose workspace is; otherwise
    the workspace accepts bash as the server's user."""
    workspace.mkdir(exist_ok=True)
    served = Workspace("w", str(workspace), allow_bash=True)
    if IS_ROOT:
        nobody = pwd.getpwnam("nobody")
        os.chown(workspace, nobody.pw_uid, nobody.pw_gid)
    else:
        served = dataclasses.replace(served, bash_as_server_user=True)
    return await start_server(workspaces=(served,), **{"process_user": "nobody", **overrides})


def gone(pid: int) -> bool:
    stat = process_stat(pid)
    return stat is None or stat[0] == "Z"


def require_landlock() -> None:
    if landlock_abi() == 0:
        pytest.skip("this kernel offers no Landlock: bash's writes are not confined here")


@pytest.fixture
def shell_dir(tmp_path: Path) -> Iterator[Path]:
    """Where a test's workspace goes: as root, a directory the user nobody may enter (tmp_path's parents are
    root's only), removed afterwards; otherwise tmp_path."""
    if not IS_ROOT:
        yield tmp_path
        return
    top = Path(tempfile.mkdtemp(prefix="toolhost-bash-attack-"))
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


def run_as(user: pwd.struct_passwd, *argv: str) -> str:
    """What `argv` prints, run as `user` without toolhost (and so without no_new_privs)."""
    return subprocess.run(argv, user=user.pw_uid, group=user.pw_gid, extra_groups=[], capture_output=True,
                          text=True, check=True).stdout.strip()


def nobody_workspace(top: Path) -> Path:
    nobody = pwd.getpwnam("nobody")
    workspace = top / "w"
    workspace.mkdir()
    os.chown(workspace, nobody.pw_uid, nobody.pw_gid)
    return workspace


# --- processes that try to outlive the call ---------------------------------------------------------------------

ESCAPES = ("setsid sleep 1000 & echo $! > setsid.pid; "
           "(nohup sleep 1000 >/dev/null 2>&1 & echo $! > nohup.pid); "
           "bash -c 'sleep 1000 & echo $! > disowned.pid; disown' ; "
           "(trap '' TERM HUP; exec sleep 1000) & echo $! > ignores-term.pid; ")


@pytest.mark.parametrize("ending", ["sleep 1000", "true"], ids=["timed-out", "exited"])
async def test_no_process_of_the_command_outlives_its_call(start_server, shell_dir, ending):
    workspace = shell_dir / "w"
    server = await shell_server(start_server, workspace)
    # Stopping what is left after an exit takes the kill grace (one of them ignores SIGTERM): within the timeout.
    response = await call(server, "bash", command=ESCAPES + ending, timeout_seconds=1 if ending != "true" else 60)
    assert response.success == (ending == "true"), response.error
    pids = {path.name: int(path.read_text()) for path in workspace.glob("*.pid")}
    assert len(pids) == 4, pids
    assert [name for name, pid in pids.items() if not gone(pid)] == []


# --- writes leaving the workspace under Landlock ----------------------------------------------------------------

async def test_writes_cannot_leave_the_workspace_by_symlink_hard_link_rename_or_proc(start_server, shell_dir):
    require_landlock()
    outside = shell_dir / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("original\n")
    # Only Landlock may refuse: the user's own permissions would allow every one of these writes.
    outside.chmod(0o777)
    (outside / "victim.txt").chmod(0o666)
    workspace = shell_dir / "w"
    server = await shell_server(start_server, workspace)
    attempts = {
        "symlink": f"ln -s {outside} link && echo x > link/through-symlink.txt",
        "symlink-file": f"ln -s {outside}/victim.txt victim-link && echo changed > victim-link",
        "hard-link": f"ln {outside}/victim.txt hard && echo changed > hard",
        "rename-out": f"echo x > moving && mv moving {outside}/moved",
        "rename-in": f"mv {outside}/victim.txt stolen",
        "proc-cwd": "echo x > /proc/self/cwd/../outside/through-proc.txt",
        "mkdir": f"mkdir {outside}/made",
        "truncate": f"truncate -s 0 {outside}/victim.txt",
        "remove": f"rm -f {outside}/victim.txt",
        "fifo": f"mkfifo {outside}/fifo",
        "python": f"python3 -c 'open(\"{outside}/py.txt\", \"w\")'",
    }
    for name, command in attempts.items():
        result = structured(await call(server, "bash", command=command))
        assert result["writes_confined"] is True
        assert result["exit_code"] != 0, (name, result)
        assert "Permission denied" in result["stderr"] or "Invalid cross-device link" in result["stderr"], (
            name, result)
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
    assert (outside / "victim.txt").read_text() == "original\n"


# --- one caller's command against another's --------------------------------------------------------------------

def require_landlock_abi(version: int, what: str) -> None:
    if landlock_abi() < version:
        pytest.skip(f"this kernel's Landlock (ABI {landlock_abi()}) has no {what} (ABI {version})")


async def test_a_command_cannot_signal_another_calls_processes(start_server, shell_dir):
    """Every caller's command runs as the same process user; Landlock's signal scope keeps each call's processes
    apart. The victim learns nothing and finishes; the attacker's kill (of the process and of its group) is
    EPERM."""
    require_landlock_abi(6, "signal scope")
    workspace = shell_dir / "w"
    server = await shell_server(start_server, workspace)
    # FIFOs carry the victim's pid to the attacker and the attacker's "done" back: each side blocks on the other.
    for fifo in ("victim.pid", "attacked"):
        os.mkfifo(workspace / fifo, 0o666)
        os.chmod(workspace / fifo, 0o666)
    victim = call(server, "bash", command=(
        "echo $$ > victim.pid; read -r _ < attacked; echo victim-finished"))
    attacker = call(server, "bash", command=(
        "pid=$(cat victim.pid); "
        'kill -KILL "$pid"; echo "kill=$?"; kill -KILL -- "-$pid"; echo "group=$?"; '
        'kill -STOP "$pid"; echo "stop=$?"; echo done > attacked'))
    victim_response, attacker_response = await asyncio.gather(victim, attacker)
    attack = structured(attacker_response)
    assert attack["stdout"] == "kill=1\ngroup=1\nstop=1\n", attack
    assert attack["stderr"].count("Operation not permitted") == 3, attack
    assert victim_response.success, victim_response.error
    assert structured(victim_response)["stdout"] == "victim-finished\n"


async def test_a_command_cannot_connect_to_another_calls_abstract_unix_socket(start_server, shell_dir):
    require_landlock_abi(6, "abstract unix socket scope")
    workspace = shell_dir / "w"
    server = await shell_server(start_server, workspace)
    name = "toolhost-test-" + os.urandom(6).hex()
    # FIFOs: the connector starts once the listener listens, the listener ends once the connector tried.
    for fifo in ("listening", "tried"):
        os.mkfifo(workspace / fifo, 0o666)
        os.chmod(workspace / fifo, 0o666)
    listener = call(server, "bash", command=(
        "python3 -c 'import socket\n"
        f"s = socket.socket(socket.AF_UNIX); s.bind(\"\\0{name}\"); s.listen()\n"
        "open(\"listening\", \"w\").write(\"ready\")\n"
        "open(\"tried\").read()\n"
        "print(\"listener-finished\")'"))
    connector = call(server, "bash", command=(
        "cat listening > /dev/null; "
        "python3 -c 'import socket\n"
        "try:\n"
        f"    socket.socket(socket.AF_UNIX).connect(\"\\0{name}\"); print(\"connected\")\n"
        "except OSError as exc: print(exc.errno)'; echo done > tried"))
    listened, connected = await asyncio.gather(listener, connector)
    assert structured(listened)["stdout"] == "listener-finished\n", structured(listened)
    assert structured(connected)["stdout"] == "1\n", structured(connected)  # EPERM


async def test_a_command_cannot_ioctl_a_device_it_opens(start_server, shell_dir):
    """stty asks the device for its terminal settings (an ioctl): refused (EACCES) rather than answered (ENOTTY
    from /dev/null). The stdin the command was given, opened before Landlock applied, is not affected."""
    require_landlock_abi(5, "ioctl right on devices")
    server = await shell_server(start_server, shell_dir / "w")
    result = structured(await call(server, "bash", command="stty < /dev/null; stty"))
    assert result["stderr"].splitlines() == [
        "stty: 'standard input': Permission denied", "stty: 'standard input': Inappropriate ioctl for device"], result


async def test_a_setuid_program_does_not_regain_root_for_the_process_user(start_server, nobody_dir):
    require_landlock()
    nobody = pwd.getpwnam("nobody")
    program = nobody_dir / "setuid-id"
    shutil.copy("/usr/bin/id", program)
    program.chmod(0o4755)
    # Control: run as nobody outside toolhost, the setuid bit does work here (else the test proves nothing).
    effective_uid = run_as(nobody, str(program), "-u")
    if effective_uid != "0":
        pytest.skip(f"setuid programs do not run as root on this filesystem (uid {effective_uid})")
    server = await shell_server(start_server, nobody_workspace(nobody_dir), process_user="nobody")
    result = structured(await call(server, "bash", command=f"{program} -u; grep NoNewPrivs /proc/self/status"))
    assert result["stdout"].split() == [str(nobody.pw_uid), "NoNewPrivs:", "1"], result


async def test_the_servers_environment_cannot_be_read_through_proc(start_server, nobody_dir, monkeypatch):
    secret = "toolhost-server-only-" + os.urandom(8).hex()
    monkeypatch.setenv("TOOLHOST_TEST_SERVER_SECRET", secret)
    server = await shell_server(start_server, nobody_workspace(nobody_dir), process_user="nobody")
    response = await call(server, "bash", command=f"cat /proc/{os.getpid()}/environ; cat /proc/$PPID/environ")
    result = structured(response)
    assert secret not in result["stdout"] and secret not in result["stderr"]
    assert result["stderr"].count("Permission denied") == 2, result


# --- hostile arguments and outputs ------------------------------------------------------------------------------

@pytest.mark.parametrize(("arguments", "pointer"), [
    ({"command": "echo a\u0000b"}, "/command"),
    ({"command": "echo \ud800"}, "/command"),
    ({"command": "echo " + "\u00e9" * 70_000}, ""),  # 140 KB: more than the kernel passes as one argument
    ({"command": "x" * 100_001}, "/command"),
    ({"command": ""}, "/command"),
    ({"command": "true", "timeout_seconds": 0}, "/timeout_seconds"),
    ({"command": "true", "timeout_seconds": -1}, "/timeout_seconds"),
    ({"command": "true", "workspace": "../w"}, "/workspace"),
    ({"command": "true", "workspace": "w\u0000"}, "/workspace"),
], ids=["nul", "lone-surrogate", "too-large-for-exec", "too-long", "empty", "zero-timeout", "negative-timeout",
        "workspace-path", "workspace-nul"])
async def test_hostile_arguments_are_refused(start_server, shell_dir, arguments, pointer):
    server = await shell_server(start_server, shell_dir / "w")
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call(server, "bash", arguments)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, refused.value.details()
    assert pointer in refused.value.details()


@pytest.mark.parametrize("command", [
    "yes | head -c 5000000",
    "head -c 2000000 /dev/zero",  # NUL bytes: six times larger JSON-escaped
    "head -c 2000000 /dev/urandom",  # not UTF-8
    "head -c 2000000 /dev/zero >&2; yes | head -c 2000000",
], ids=["lines", "nul-bytes", "binary", "both-streams"])
async def test_huge_and_binary_output_is_cut_to_fit(start_server, shell_dir, command):
    server = await shell_server(start_server, shell_dir / "w")
    response = await call(server, "bash", command=command)
    assert response.success, response.error
    result = structured(response)
    assert result["truncated"] is True and result["exit_code"] == 0
    assert len(json.dumps(result, ensure_ascii=False).encode()) <= BASH_OUTPUT_BYTES
    assert len(response.output.encode()) <= BASH_OUTPUT_BYTES
