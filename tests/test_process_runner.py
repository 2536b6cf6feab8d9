"""The process runner, through the real server and directly: argv building, environment, capture, kill."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest

from toolhost.v1 import tool_service_pb2
from toolhost_server.errors import InvalidArgumentsError
from toolhost_server.model import Parameter, ToolSource, ToolSpec
from toolhost_server.runners import (
    Invocation,
    Runner,
    RunnerSettings,
    build_runner,
    process_dirs,
    process_table,
)
from toolhost_server.runners.process_launch import SAFE_PATH
from toolhost_server.runners.process_output import CappedStream
from toolhost_server.runners.process_reaper import spawned_leaders
from toolhost_server.runners.process_signals import signal_processes
from toolhost_server.runners.process_tree import ProcessTree
from toolhost_server.schema import derive_input_schema

from helpers.calls import call
from helpers.catalogs import add_tool
from helpers.processes import leftover_processes, marker, process_stat, server_zombies, zombie_children
from helpers.status import violations
from helpers.waiting import HANG_GUARD_SECONDS, eventually, within

PY = sys.executable
PRINT_ARGV = "import json, sys; print(json.dumps(sys.argv[1:]))"
# A tree that does its best to survive: the leader and one grandchild ignore SIGTERM, and both grandchildren
# leave the leader's session (one through the setsid program, one by calling os.setsid()).
STUBBORN_TREE = (
    "import signal, subprocess, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "subprocess.Popen(['setsid', 'sleep', '1000'])\n"
    "subprocess.Popen([sys.executable, '-I', '-S', '-c', 'import os, signal, time; os.setsid(); "
    "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(1000)'])\n"
    "time.sleep(1000)\n"
)
# STUBBORN_TREE (its processes ignore SIGTERM from birth) whose leader, once the others run, creates `ready`
# in $REPORT_DIR, and `terminated` there on each SIGTERM: so a test sees the tree whole, and a stop begin.
REPORTING_STUBBORN_TREE = (
    "import os, signal, subprocess, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "subprocess.Popen(['setsid', 'sleep', '1000'])\n"
    "subprocess.Popen([sys.executable, '-I', '-S', '-c', 'import os, time; os.setsid(); time.sleep(1000)'])\n"
    "report = os.environ['REPORT_DIR']\n"
    "signal.signal(signal.SIGTERM, lambda *_: open(os.path.join(report, 'terminated'), 'w').close())\n"
    "open(os.path.join(report, 'ready'), 'w').close()\n"
    "time.sleep(1000)\n"
)


async def until_tree_or_answer(tag: str, count: int, pending: asyncio.Future[Any]) -> None:
    """Until `count` processes of the call marked `tag` run; a failure if the call was answered before."""
    await eventually(lambda: len(leftover_processes(tag)) >= count or pending.done(),
                     what=f"{count} processes of the call")
    assert not pending.done(), f"the call ended before its {count} processes ran: {pending.result()}"


def spec(runner: dict[str, Any], parameters: tuple[Parameter, ...] = ()) -> ToolSpec:
    return ToolSpec(name="direct", description="A tool built in the test.", input_schema=derive_input_schema(
        parameters), runner=runner, source=ToolSource.CATALOG, origin="test", parameters=parameters)


def direct_runner(runner: dict[str, Any], parameters: tuple[Parameter, ...] = (),
                  settings: RunnerSettings | None = None) -> tuple[Runner, ToolSpec]:
    tool = spec(runner, parameters)
    return build_runner(tool, settings or RunnerSettings(kill_grace_seconds=0.2)), tool


ARGV_PARAMETERS = """\
  - {name: text, type: string, required: true}
  - {name: count, type: integer, default: 3}
  - {name: flag, type: boolean, default: true}
  - {name: items, type: array}
  - {name: options, type: object}
  - {name: maybe, type: string}
  - {name: dashed, type: string, allow_leading_dash: true}
"""


@pytest.fixture
async def server(start_server, tmp_path, monkeypatch):
    # Set before the server starts: a child must not see the server's own environment.
    monkeypatch.setenv("TOOLHOST_TEST_SECRET", "hunter2-server-secret")
    add_tool(tmp_path, "argv_echo", {"type": "process", "argv": [
        PY, "-I", "-S", "-c", PRINT_ARGV, "--", "{text}", "{count}", "{flag}", "{items}", "{options}", "{maybe}",
        "{dashed}"]}, ARGV_PARAMETERS)
    add_tool(tmp_path, "show_env", {"type": "process", "argv": [PY, "-I", "-S", "-c",
             "import json, os, sys; print(json.dumps({'env': dict(os.environ), 'cwd': os.getcwd(), "
             "'stdin': sys.stdin.read()}))"], "env": {"STATIC_SETTING": "from-the-catalog"}})
    add_tool(tmp_path, "fails", {"type": "process", "argv": [PY, "-I", "-S", "-c",
             "import sys; print('partial result'); print('first problem', file=sys.stderr); "
             "print('  the last problem  ', file=sys.stderr); sys.exit(3)"]})
    add_tool(tmp_path, "killed", {"type": "process", "argv": [PY, "-I", "-S", "-c",
             "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]})
    add_tool(tmp_path, "missing", {"type": "process", "argv": ["toolhost-no-such-program", "--version"],
                                   "install_hint": "toolhost-no-such-package"})
    add_tool(tmp_path, "binary", {"type": "process", "argv": [PY, "-I", "-S", "-c",
             "import sys; sys.stdout.buffer.write(b'ok \\xff\\xfe end'); sys.stderr.buffer.write(b'\\xc3(')"]})
    add_tool(tmp_path, "flood", {"type": "process", "argv": ["head", "-c", "5000000", "/dev/zero"]},
             extra="timeout_seconds: 20\n")
    add_tool(tmp_path, "noisy_stderr", {"type": "process", "argv": [PY, "-I", "-S", "-c",
             "import sys; sys.stdout.write('x' * 10); sys.stderr.write('é' * 3000)"]})
    return await start_server(catalog_dirs=[tmp_path], kill_grace_seconds=0.2, max_output_bytes=1000)


async def test_each_placeholder_arrives_as_exactly_one_argument(server):
    hostile = "a b; rm -rf / $(id) `id` | cat > /tmp/x * \"'"
    response = await call(server, "argv_echo", {"text": hostile, "items": ["x y", 2, False, {"k": 1}],
                                                "options": {"b": [1], "a": "z"}})
    assert response.success, response.error
    assert json.loads(response.output) == [
        "--", hostile, "3", "true", "x y", "2", "false", '{"k":1}', '{"a":"z","b":[1]}']
    assert response.exit_code == 0 and response.HasField("exit_code")


async def test_absent_optional_parameters_and_empty_arrays_give_no_element(server):
    response = await call(server, "argv_echo", {"text": "", "count": 7, "flag": False, "items": []})
    assert json.loads(response.output) == ["--", "", "7", "false"]


@pytest.mark.parametrize(("arguments", "field"), [
    ({"text": "-rf"}, "/text"),
    ({"text": "ok", "items": ["fine", "--exec=x"]}, "/items/1"),
    ({"text": "ok", "count": -1}, "/count"),
])
async def test_a_leading_dash_is_refused_as_invalid_argument(server, arguments, field):
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(server, "argv_echo", arguments)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    found = violations(caught.value)
    assert [f for f, _ in found] == [field]
    assert "option" in found[0][1] and "allow_leading_dash" in found[0][1]


async def test_a_parameter_with_allow_leading_dash_passes_it_verbatim(server):
    response = await call(server, "argv_echo", {"text": "ok", "dashed": "--help"})
    assert response.success and json.loads(response.output)[-1] == "--help"


@pytest.mark.parametrize("arguments", [{"text": "a\u0000b"}, {"text": "ok", "dashed": "x\u0000"},
                                       {"text": "ok", "items": ["\u0000"]}])
async def test_a_nul_byte_is_always_refused(server, arguments):
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(server, "argv_echo", arguments)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "NUL" in violations(caught.value)[0][1]


async def test_the_child_gets_a_minimal_environment_and_a_fresh_directory(server):
    first = json.loads((await call(server, "show_env")).output)
    second = json.loads((await call(server, "show_env")).output)
    env = first["env"]
    assert "TOOLHOST_TEST_SECRET" not in env and "hunter2-server-secret" not in json.dumps(first)
    assert set(env) == {"PATH", "LANG", "HOME", "STATIC_SETTING", "TOOLHOST_CALL_MARKER"}
    assert env["PATH"] == SAFE_PATH and env["LANG"] == "C.UTF-8"
    assert env["STATIC_SETTING"] == "from-the-catalog"
    assert env["TOOLHOST_CALL_MARKER"] != second["env"]["TOOLHOST_CALL_MARKER"]
    # Each call runs in its own temporary directory (also its HOME), removed when the call ends.
    assert first["cwd"] != second["cwd"] and env["HOME"] == first["cwd"]
    assert not any(map(os.path.lexists, (first["cwd"], second["cwd"])))
    assert first["stdin"] == ""


LITTER = ("import os; os.makedirs('a/b'); open('a/b/f', 'w').write('x'); open('g', 'w').write('y'); "
          "os.chmod('g', 0); print(os.getcwd())")


def call_dirs_left(directory: Path) -> list[str]:
    """What calls left in `directory`: anything but the spare the worker keeps ready."""
    return [name for name in os.listdir(directory) if not name.startswith(process_dirs.SPARE_PREFIX)]


async def test_a_call_directory_is_gone_when_the_call_returns_and_removed_with_its_contents(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    runner, tool = direct_runner({"type": "process", "argv": [PY, "-I", "-S", "-c", LITTER]})
    outcome = await runner.run(Invocation(tool, {}, "call", 10))
    assert outcome.failure is None, outcome.failure
    cwd = outcome.output.strip()
    assert os.path.dirname(cwd) == str(tmp_path) and os.path.basename(cwd).startswith("toolhost-call-")
    # Out of sight at once (renamed); removed, with what the tool left, by the worker just after.
    assert not os.path.lexists(cwd)
    await eventually(lambda: not call_dirs_left(tmp_path))


async def test_a_call_directory_that_cannot_be_renamed_is_removed_before_the_call_returns(tmp_path, monkeypatch):
    # The hidden name of a finished call's directory made in a directory that does not exist: the rename
    # fails for real (only this module's naming is replaced, not os.rename, which other threads use).
    named = process_dirs._name

    def name_in_nowhere(parent: str, prefix: str) -> str:
        if prefix == process_dirs.REMOVED_PREFIX:
            return named(str(tmp_path / "no-such-directory"), prefix)
        return named(parent, prefix)

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(process_dirs, "_name", name_in_nowhere)
    runner, tool = direct_runner({"type": "process", "argv": [PY, "-I", "-S", "-c", LITTER]})
    outcome = await runner.run(Invocation(tool, {}, "call", 10))
    assert outcome.failure is None, outcome.failure
    assert call_dirs_left(tmp_path) == []


async def test_each_call_gets_a_directory_no_call_had_whether_made_ahead_or_not(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    runner, tool = direct_runner({"type": "process", "argv": [PY, "-I", "-S", "-c", "import os; print(os.getcwd())"]})
    seen = []
    for index in range(6):
        if index % 2:  # let the worker make the next directory ahead (a spare): the call takes it
            await eventually(lambda: len(os.listdir(tmp_path)) == 1)
            (spare,) = os.listdir(tmp_path)
            assert spare.startswith(process_dirs.SPARE_PREFIX) and not os.listdir(tmp_path / spare)
        outcome = await runner.run(Invocation(tool, {}, f"call-{index}", 10))
        cwd = outcome.output.strip()
        assert os.path.dirname(cwd) == str(tmp_path) and os.path.basename(cwd).startswith("toolhost-call-")
        seen.append(cwd)
    assert len(set(seen)) == len(seen)
    await eventually(lambda: not call_dirs_left(tmp_path))


def test_the_hidden_directories_of_servers_that_are_gone_are_removed(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    alive = process_table.read_stat(os.getpid())
    assert alive is not None
    dead, here, started = gone.pid, alive.pid, alive.start_time
    (tmp_path / f".toolhost-spare-{dead}-{started}-1").mkdir()
    (tmp_path / f".toolhost-removed-{dead}-{started}-2" / "left" / "by").mkdir(parents=True)
    (tmp_path / f".toolhost-removed-{dead}-{started}-2" / "tool").write_text("data")
    # The same pid, started at another time: a server gone whose pid a new process (in a restarted container,
    # the new server itself as pid 1) has since.
    (tmp_path / f".toolhost-removed-{here}-{started + 1}-3").mkdir()
    (tmp_path / f".toolhost-spare-99999999999999999999999-{started}-4").mkdir()
    kept = [f".toolhost-spare-{here}-{started}-5", f".toolhost-removed-{here}-{started}-6", ".toolhost-spare-x-1-7",
            "toolhost-call-8",
            # Names anyone can put in /tmp, which must neither be read as numbers nor stop the others' removal.
            f".toolhost-spare-\u00b2-{started}-9", f".toolhost-removed-{dead}-\u00b2-10"]
    for name in kept:
        (tmp_path / name).mkdir()
    (tmp_path / f".toolhost-spare-{dead}-{started}-11").write_text("not a directory")
    process_dirs.clear_stale(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == sorted([*kept, f".toolhost-spare-{dead}-{started}-11"])


async def test_a_spare_directory_a_tool_wrote_into_is_not_given_to_the_next_call(tmp_path, monkeypatch):
    # A tool running as the server's user can find the spare made during its call and leave files (a HOME's
    # dotfiles) or open it to others; the next call, perhaps another caller's, must start in a fresh directory.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    show = "import os; print(os.getcwd(), sorted(os.listdir()), oct(os.stat('.').st_mode & 0o777))"
    runner, tool = direct_runner({"type": "process", "argv": [PY, "-I", "-S", "-c", show]})
    for tamper in (lambda spare: (spare / ".gitconfig").write_text("[core]"), lambda spare: spare.chmod(0o777)):
        await runner.run(Invocation(tool, {}, "before", 10))
        await eventually(lambda: any(n.startswith(process_dirs.SPARE_PREFIX) for n in os.listdir(tmp_path)))
        (spare,) = [tmp_path / n for n in os.listdir(tmp_path) if n.startswith(process_dirs.SPARE_PREFIX)]
        tamper(spare)
        outcome = await runner.run(Invocation(tool, {}, "next", 10))
        assert outcome.failure is None, outcome.failure
        assert outcome.output.split(" ", 1)[1].strip() == "[] 0o700"
        # The tampered directory goes the way of a finished call's.
        await eventually(lambda: not call_dirs_left(tmp_path))


async def test_a_configured_cwd_is_used_and_home_is_nonexistent(start_server, tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    catalog = tmp_path / "catalog"
    add_tool(catalog, "where", {"type": "process", "cwd": str(workdir), "argv": [
        PY, "-I", "-S", "-c", "import os; print(os.getcwd(), os.environ['HOME'])"]})
    server = await start_server(catalog_dirs=[catalog])
    response = await call(server, "where")
    assert response.output.split() == [str(workdir), "/nonexistent"]
    assert workdir.is_dir()


async def test_stdout_stderr_and_a_non_zero_exit(server):
    response = await call(server, "fails")
    assert not response.success and response.error.code == "NON_ZERO_EXIT"
    assert response.exit_code == 3
    assert response.output == "partial result\n"
    assert response.stderr == "first problem\n  the last problem  \n"
    assert response.error.message == f"{os.path.basename(PY)} exited with status 3: the last problem"


async def test_death_by_signal_has_no_exit_code_and_names_the_signal(server):
    response = await call(server, "killed")
    assert not response.success and response.error.code == "NON_ZERO_EXIT"
    assert not response.HasField("exit_code")
    assert "killed by signal SIGKILL" in response.error.message


async def test_a_missing_program_is_program_not_found_with_the_install_hint(server):
    response = await call(server, "missing")
    assert not response.success and response.error.code == "PROGRAM_NOT_FOUND"
    assert response.error.message == ("toolhost-no-such-program is not installed on this server "
                                      "(install toolhost-no-such-package)")


async def test_invalid_utf8_is_replaced(server):
    response = await call(server, "binary")
    assert response.success
    assert response.output == "ok \ufffd\ufffd end"
    assert response.stderr == "\ufffd("


async def test_output_is_capped_while_the_child_runs_to_completion(server):
    response = await call(server, "flood")
    # head only exits 0 after writing all 5 MB: the server kept reading past the 1000-byte cap.
    assert response.success and response.exit_code == 0
    assert response.truncated and response.original_size_bytes == 5_000_000
    assert response.output == "\0" * 1000


async def test_the_larger_stream_gives_the_original_size_and_characters_are_not_cut(server):
    response = await call(server, "noisy_stderr")
    assert response.truncated and response.original_size_bytes == 6000  # 3000 two-byte characters
    assert response.output == "x" * 10
    assert response.stderr == "é" * 500  # 1000 bytes kept: exactly 500 characters, none split


def test_capped_stream_memory_stays_at_the_limit():
    stream = CappedStream(1000)
    chunk = b"y" * 65536
    for _ in range(200):
        stream.feed(chunk)
    assert stream.size == 200 * 65536 and stream.truncated
    assert len(stream.text()) == 1000
    assert len(stream._kept) == 1000 and len(stream._tail) <= 1024


def test_the_quoted_last_line_never_starts_inside_a_word_cut_by_the_tail():
    stream = CappedStream(10)
    # The tail keeps the last 1024 bytes, which begin 11 bytes before the end of the access key id: its
    # second half, which nothing could recognise as a secret any more.
    stream.feed(b"x" * 2000 + b" AKIAIOSFODNN7EXAMPLE" + b" y" * 500 + b" failed here\n")
    assert stream.last_line().startswith("y y y") and "EXAMPLE" not in stream.last_line()
    whole = CappedStream(10)
    whole.feed(b"short line\nlast line\n")
    assert whole.last_line() == "last line"


async def test_a_timeout_kills_the_whole_tree_before_the_response(start_server, tmp_path):
    tag = marker()
    add_tool(tmp_path, "stubborn", {"type": "process", "argv": [PY, "-I", "-S", "-c", STUBBORN_TREE],
                                    "env": {"TEST_MARKER": tag}}, extra="timeout_seconds: 3\n")
    server = await start_server(catalog_dirs=[tmp_path], kill_grace_seconds=0.2)
    pending = asyncio.create_task(call(server, "stubborn"))
    # The leader and both grandchildren exist before the timeout (long enough to start three Pythons).
    await until_tree_or_answer(tag, 3, pending)
    response = await pending
    assert not response.success and response.error.code == "TIMEOUT"
    assert response.duration_ms >= 3000  # not before the tool's timeout
    assert leftover_processes(tag) == []
    await eventually(lambda: zombie_children() == [], what="the tree's zombies reaped")


async def test_a_normal_exit_leaves_no_background_process(start_server, tmp_path):
    tag = marker()
    # One child holds stdout open and left the session; the other also ignores SIGTERM.
    program = ("import subprocess, sys\n"
               "subprocess.Popen(['setsid', 'sleep', '1000'])\n"
               "subprocess.Popen([sys.executable, '-I', '-S', '-c', 'import os, signal, time; os.setsid(); "
               "signal.signal(signal.SIGTERM, signal.SIG_IGN); print(\"child up\", flush=True); "
               "time.sleep(1000)'])\n"
               "print('leader done', flush=True)\n")
    add_tool(tmp_path, "daemonizes", {"type": "process", "argv": [PY, "-I", "-S", "-c", program],
                                      "env": {"TEST_MARKER": tag}}, extra="timeout_seconds: 60\n")
    server = await start_server(catalog_dirs=[tmp_path], kill_grace_seconds=0.2)
    response = await call(server, "daemonizes")
    # Not held until the timeout (which would be a TIMEOUT failure) by the background processes' copies of
    # the pipes.
    assert response.success, response.error
    assert "leader done" in response.output
    assert leftover_processes(tag) == []
    await eventually(lambda: zombie_children() == [], what="the tree's zombies reaped")


def running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except FileNotFoundError:
        return False


async def test_an_orphan_without_the_marker_that_keeps_the_output_pipe_is_stopped(start_server, tmp_path):
    # Empty environment (no marker) and its own session: only the stdout pipe it inherited gives it away.
    program = ("import subprocess\n"
               "child = subprocess.Popen(['/usr/bin/setsid', '/usr/bin/sleep', '1000'], env={})\n"
               "print(child.pid, flush=True)\n")
    add_tool(tmp_path, "escapes", {"type": "process", "argv": [PY, "-I", "-S", "-c", program]},
             extra="timeout_seconds: 60\n")
    server = await start_server(catalog_dirs=[tmp_path], kill_grace_seconds=0.2)
    response = await call(server, "escapes")
    # Not held until the timeout (a TIMEOUT failure) by the orphan's copy of the pipe.
    assert response.success, response.error
    assert not running(int(response.output))
    await eventually(lambda: zombie_children() == [], what="the tree's zombies reaped")


async def test_the_callers_deadline_is_deadline_exceeded_and_leaves_nothing(start_server, tmp_path):
    tag = marker()
    add_tool(tmp_path, "stubborn", {"type": "process", "argv": [PY, "-I", "-S", "-c", STUBBORN_TREE],
                                    "env": {"TEST_MARKER": tag}}, extra="timeout_seconds: 30\n")
    server = await start_server(catalog_dirs=[tmp_path], kill_grace_seconds=0.2)
    pending = asyncio.ensure_future(call(server, "stubborn", timeout=3))
    # The whole tree runs before the deadline (long enough to start three Pythons).
    await until_tree_or_answer(tag, 3, pending)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await pending
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    # The client gives up at its deadline on its own; the server's kill (grace 0.2 s) ends after.
    await eventually(lambda: leftover_processes(tag) == [] and zombie_children() == [],
                     what="the tree stopped and reaped after the deadline")


async def test_many_timeouts_leave_no_processes_and_no_open_descriptors(start_server, tmp_path):
    # The audit store opens its database files at its first batch, in the middle of the count: it is off here,
    # where the process runner's descriptors are what is counted.
    tag = marker()
    add_tool(tmp_path, "hangs", {"type": "process", "argv": [
        "sh", "-c", "setsid sleep 1000 & sleep 1000"], "env": {"TEST_MARKER": tag}},
        extra="timeout_seconds: 0.05\n")
    server = await start_server(catalog_dirs=[tmp_path], kill_grace_seconds=0.2, audit_database=False)
    assert (await call(server, "hangs")).error.code == "TIMEOUT"
    descriptors = len(os.listdir("/proc/self/fd"))
    for _ in range(50):
        response = await call(server, "hangs")
        assert response.error.code == "TIMEOUT"
        assert leftover_processes(tag) == []
    assert len(os.listdir("/proc/self/fd")) <= descriptors
    await eventually(lambda: zombie_children() == [], what="the trees' zombies reaped")


async def test_a_second_cancellation_does_not_cut_the_grace_short(tmp_path):
    tag = marker()
    grace = 2.0  # time enough to see the SIGTERM and cancel again while the stop waits
    runner, tool = direct_runner({"type": "process", "argv": [PY, "-I", "-S", "-c", REPORTING_STUBBORN_TREE],
                                  "env": {"TEST_MARKER": tag, "REPORT_DIR": str(tmp_path)}},
                                 settings=RunnerSettings(kill_grace_seconds=grace))
    task = asyncio.create_task(runner.run(Invocation(tool, {}, "call-1", 30)))
    await eventually((tmp_path / "ready").exists, what="the stubborn tree running")
    tree = leftover_processes(tag)
    started = time.monotonic()
    task.cancel()
    await eventually((tmp_path / "terminated").exists, what="SIGTERM reaching the tree")
    # Mid-grace: the SIGTERM-ignoring processes still run, and a second cancellation arrives (as the gRPC
    # server's does after the pipeline's timeout).
    assert len(tree) == 3 and all(map(running, tree)), "the grace ended before the test could cancel again"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert leftover_processes(tag) == []
    assert time.monotonic() - started >= grace, "SIGKILL came before the grace period ended"


async def test_cancellations_at_any_moment_even_mid_spawn_leave_nothing():
    tag = marker()
    runner, tool = direct_runner({"type": "process", "argv": [PY, "-I", "-S", "-c", STUBBORN_TREE],
                                  "env": {"TEST_MARKER": tag}})

    async def cancelled_after(delay: float) -> None:
        task = asyncio.create_task(runner.run(Invocation(tool, {}, "call", 30)))
        await asyncio.sleep(delay)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    # From before the spawn, through it, to well after: none of them may hang or leave a process.
    await within(asyncio.gather(*(cancelled_after(i * 0.004) for i in range(40))), "40 cancelled calls ending")
    assert leftover_processes(tag) == []


async def test_concurrent_calls_do_not_stop_each_other(tmp_path):
    tag, gate = marker(), tmp_path / "go"
    # The slow calls run until the test has made its quick calls.
    runner, tool = direct_runner({"type": "process", "argv": [
        "sh", "-c", 'while [ ! -e "$GATE" ]; do sleep 0.01; done; echo $1', "sh", "{n}"],
        "env": {"GATE": str(gate), "TEST_MARKER": tag}}, (Parameter("n", "integer", required=True),))
    quick, _ = direct_runner({"type": "process", "argv": ["true"]})
    slow = [asyncio.create_task(runner.run(Invocation(tool, {"n": n}, f"c{n}", HANG_GUARD_SECONDS)))
            for n in range(5)]
    await eventually(lambda: len(leftover_processes(tag)) >= 5, what="the 5 slow calls running")
    for _ in range(20):
        assert (await quick.run(Invocation(tool, {}, "q", 10))).failure is None
    gate.touch()
    outcomes = await within(asyncio.gather(*slow), "the slow calls ending")
    assert [o.output for o in outcomes] == [f"{n}\n" for n in range(5)]


async def test_values_become_text_as_documented():
    runner, tool = direct_runner({"type": "process", "argv": [PY, "-I", "-S", "-c", PRINT_ARGV, "{a}", "{b}", "{c}"]},
                                 (Parameter("a", "number"), Parameter("b", "boolean"), Parameter("c", "array")))
    outcome = await runner.run(Invocation(tool, {"a": 1.5, "b": False, "c": [None, "x", [1]]}, "call", 10))
    assert json.loads(outcome.output) == ["1.5", "false", "null", "x", "[1]"]
    with pytest.raises(InvalidArgumentsError) as caught:
        await runner.run(Invocation(tool, {"a": -2, "c": ["-x", "ok", "-y"]}, "call", 10))
    assert [v.pointer for v in caught.value.violations] == ["/a", "/c/0", "/c/2"]


BAD_CONFIGS = {
    "unknown_placeholder": ({"type": "process", "argv": ["ping", "{hots}"]}, "names no parameter"),
    "no_argv": ({"type": "process"}, "needs `argv:`"),
    "empty_argv": ({"type": "process", "argv": []}, "needs `argv:`"),
    "spliced": ({"type": "process", "argv": ["ping", "--count={host}"]}, "whole element"),
    # A trailing newline must not pass for the end of the element (as with re's `$`).
    "newline_after_placeholder": ({"type": "process", "argv": ["ping", "{host}\n"]}, "whole element"),
    "program_placeholder": ({"type": "process", "argv": ["{host}"]}, "must be fixed"),
    "number_element": ({"type": "process", "argv": ["ping", "-c", 3]}, "must be a string"),
    "typo_key": ({"type": "process", "agrv": ["ping"]}, "did you mean 'argv'"),
    "relative_cwd": ({"type": "process", "argv": ["ping"], "cwd": "work"}, "absolute path"),
    "missing_cwd": ({"type": "process", "argv": ["ping"], "cwd": "/no/such/dir"}, "not an existing directory"),
    "bad_env": ({"type": "process", "argv": ["ping"], "env": {"A B": "x"}}, "not a variable name"),
    "newline_env": ({"type": "process", "argv": ["ping"], "env": {"A\n": "x"}}, "not a variable name"),
    "reserved_env": ({"type": "process", "argv": ["ping"], "env": {"TOOLHOST_CALL_MARKER": "x"}},
                     "set by toolhost"),
}


async def test_bad_runner_configs_are_reported_at_load(start_server, tmp_path):
    for name, (runner, _) in BAD_CONFIGS.items():
        add_tool(tmp_path, name, runner, "  - {name: host, type: string, required: true}\n")
    add_tool(tmp_path, "good", {"type": "process", "argv": ["ping", "-c", "1", "--", "{host}"]},
             "  - {name: host, type: string, required: true}\n")
    server = await start_server(catalog_dirs=[tmp_path])
    report = await server.stub.Reload(tool_service_pb2.ReloadRequest())
    by_file = {Path(e.file).stem: e.reason for e in report.errors}
    for name, (_, reason) in BAD_CONFIGS.items():
        assert reason in by_file.get(name, ""), (name, by_file.get(name))
    assert "good" in report.tools
    assert not set(BAD_CONFIGS) & set(report.tools)


async def test_stopping_cancelled_midway_kills_at_once(tmp_path):
    """What the event loop's shutdown does to a kill in progress: it still leaves nothing running."""
    tag = marker()
    child = await asyncio.create_subprocess_exec(
        PY, "-I", "-S", "-c", REPORTING_STUBBORN_TREE,
        env={"TOOLHOST_CALL_MARKER": tag, "PATH": SAFE_PATH, "REPORT_DIR": str(tmp_path)})
    await eventually((tmp_path / "ready").exists, what="the stubborn tree running")
    tree = leftover_processes(tag)
    # As the launcher does: asyncio reaps the leader it spawned, so the tree must leave it alone.
    spawned_leaders.add(child.pid)
    # A grace no test outlives: the stop can only end during the test by killing when cancelled.
    tree_of_call = ProcessTree(tag, leader=child.pid)
    stopping = asyncio.create_task(tree_of_call.stop(grace_seconds=3600))
    await eventually((tmp_path / "terminated").exists, what="SIGTERM reaching the tree")
    assert len(tree) == 3 and all(map(running, tree)), "the SIGTERM-ignoring processes wait for the grace"
    stopping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await within(stopping, "the cancelled stop ending (instead of waiting out its grace)")
    assert leftover_processes(tag) == []
    assert await child.wait() == -9
    spawned_leaders.discard(child.pid)
    tree_of_call.close()


# A daemon no scan can tell from a stranger: it clears its environment (so no marker), leaves the session and
# closes the call's pipes; the tool waits until it has done all that, then prints its pid and ends.
UNRECOGNISABLE_DAEMON = (
    "env -i setsid sh -c 'echo $$ > ready; exec sleep {seconds}' </dev/null >/dev/null 2>&1 &\n"
    "while [ ! -s ready ]; do sleep 0.01; done; cat ready\n")


async def test_daemons_the_server_adopted_are_reaped_whenever_they_exit(start_server, tmp_path):
    add_tool(tmp_path, "daemon", {"type": "process", "argv": ["sh", "-c",
                                                              UNRECOGNISABLE_DAEMON.format(seconds=0.5)]})
    # Without a cgroup per call, which would stop them with their calls.
    server = await start_server(catalog_dirs=[tmp_path], kill_grace_seconds=0.2, process_cgroup_parent="off")
    daemons = []
    for _ in range(5):
        response = await call(server, "daemon")
        assert response.success, response.error
        daemons.append(int(response.output))

    def adopted(pid: int) -> bool:
        stat = process_stat(pid)
        return stat is not None and stat[1] == os.getpid()

    # They outlive their calls (nothing recognises them), exit later, and must then be reaped, not left as
    # zombies of the server for ever.
    await eventually(lambda: not any(map(adopted, daemons)) and server_zombies() == [],
                     what="the adopted daemons reaped")


async def test_reaping_strays_never_takes_the_exit_status_of_a_call():
    # Without a cgroup per call, so that the daemons outlive their calls.
    uncontained = RunnerSettings(kill_grace_seconds=0.2, process_cgroup_parent="off")
    daemon, tool = direct_runner({"type": "process", "argv": ["sh", "-c", UNRECOGNISABLE_DAEMON.format(seconds=0)]},
                                 settings=uncontained)
    exits, _ = direct_runner({"type": "process", "argv": ["sh", "-c", "exit 7"]}, settings=uncontained)
    # Strays die and are reaped while other calls' leaders are being spawned and exit: each call must still
    # get its own leader's status (a stolen one would be reported as 255).
    outcomes = await asyncio.gather(*(daemon.run(Invocation(tool, {}, f"d{i}", 30)) for i in range(10)),
                                    *(exits.run(Invocation(tool, {}, f"e{i}", 30)) for i in range(30)))
    assert [o.exit_code for o in outcomes[10:]] == [7] * 30
    assert all(o.failure is None for o in outcomes[:10])
    await eventually(lambda: server_zombies() == [], what="the strays reaped")


_proc_listings: list[int] | None = None
_audit_hook_added = False


def _note_proc_listing(event: str, args: tuple[Any, ...]) -> None:
    if _proc_listings is not None and event in ("os.listdir", "os.scandir") and args and args[0] in ("/proc",
                                                                                                       b"/proc"):
        _proc_listings.append(threading.get_ident())


@contextmanager
def proc_listings() -> Iterator[list[int]]:
    """The threads that list /proc (as a full process scan does) meanwhile, one entry per listing."""
    global _proc_listings, _audit_hook_added
    if not _audit_hook_added:
        sys.addaudithook(_note_proc_listing)  # an audit hook cannot be removed; it is idle outside this block
        _audit_hook_added = True
    _proc_listings = found = []
    try:
        yield found
    finally:
        _proc_listings = None


async def test_many_calls_stopping_at_once_scan_proc_off_the_event_loop():
    tag = marker()
    runner, tool = direct_runner({"type": "process", "argv": ["sh", "-c", "trap '' TERM; sleep 1000 & sleep 1000"],
                                  "env": {"TEST_MARKER": tag}}, settings=RunnerSettings(kill_grace_seconds=0.3))
    tasks = [asyncio.create_task(runner.run(Invocation(tool, {}, f"c{i}", 30))) for i in range(20)]
    await eventually(lambda: len(leftover_processes(tag)) >= 40, what="40 processes of 20 calls")
    with proc_listings() as listings:
        for task in tasks:  # all 20 time out at once
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(r, asyncio.CancelledError) for r in results)
    assert leftover_processes(tag) == []
    # The kills rescanned /proc several times during the grace, each time in a worker thread, and calls that
    # asked for a scan while one ran shared the next (without that, each call scans at least 3 times).
    assert listings and threading.get_ident() not in listings
    assert len(listings) < 2 * len(tasks)


async def test_whole_floats_are_written_as_integers_where_the_schema_says_integer():
    properties = {
        "n": {"type": "integer"},
        "maybe": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]},
        "counts": {"type": "array", "items": {"oneOf": [{"type": "integer"}, {"type": "string"}]}},
        "ref": {"$ref": "#/$defs/count"},
        "box": {"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"}}},
        "x": {"type": "number"},
        "either": {"type": ["integer", "number"]},
    }
    schema = {"type": "object", "properties": properties, "$defs": {"count": {"type": ["integer", "null"]}}}
    argv = [PY, "-I", "-S", "-c", PRINT_ARGV, *(f"{{{name}}}" for name in properties)]
    tool = ToolSpec(name="direct", description="A tool built in the test.", input_schema=schema,
                    runner={"type": "process", "argv": argv}, source=ToolSource.CATALOG, origin="test")
    runner = build_runner(tool, RunnerSettings())
    arguments = {"n": 3.0, "maybe": 4.0, "counts": [1.0, "a", 2.0], "ref": 5.0, "box": {"n": 6.0, "x": 7.0},
                 "x": 8.0, "either": 9.0}
    outcome = await runner.run(Invocation(tool, arguments, "call", 10))
    assert json.loads(outcome.output) == ["3", "4", "1", "a", "2", "5", '{"n":6,"x":7.0}', "8.0", "9.0"]
    # A fraction stays one (the schema check would refuse it for an integer anyway).
    outcome = await runner.run(Invocation(tool, {"n": 2.5, "x": 1e16}, "call", 10))
    assert json.loads(outcome.output) == ["2.5", "1e+16"]


async def test_a_reused_leader_pid_does_not_make_a_strangers_session_the_calls():
    # As if the call's leader had been reaped and its pid taken by an unrelated session leader: nothing of
    # that session belongs to the call.
    stranger = await asyncio.create_subprocess_exec("sleep", "1000", start_new_session=True)
    try:
        await ProcessTree(marker(), leader=stranger.pid).stop(grace_seconds=0.1)
        assert running(stranger.pid)
    finally:
        stranger.kill()
        await stranger.wait()


# Reports each SIGUSR1 and SIGUSR2 it gets on stdout, after a first line saying it is ready for them.
# (os.write: a handler may run while the main thread is inside a print, which must not be re-entered.)
SIGNAL_REPORTER = (
    "import os, signal, time\n"
    "for number in (signal.SIGUSR1, signal.SIGUSR2):\n"
    "    signal.signal(number, lambda n, _: os.write(1, signal.Signals(n).name.encode() + b'\\n'))\n"
    "os.write(1, b'ready\\n')\n"
    "while True: time.sleep(1000)\n")


async def test_a_process_seen_in_an_older_scan_is_not_signalled_once_its_pid_is_someone_elses():
    stranger = await asyncio.create_subprocess_exec(PY, "-I", "-S", "-c", SIGNAL_REPORTER,
                                                    stdout=asyncio.subprocess.PIPE)
    assert stranger.stdout is not None
    try:
        assert await within(stranger.stdout.readline(), "the stranger's handlers installed") == b"ready\n"
        seen = process_table.read_stat(stranger.pid)
        assert seen is not None
        # The same pid with another start time: what a scan saw of a process that has since exited, its pid
        # reused by the stranger. Then a signal to the stranger as it is: a SIGUSR1 delivered before it (or
        # pending with it: the lower number is handled first) would be reported first.
        signal_processes([dataclasses.replace(seen, start_time=seen.start_time - 1)], signal.SIGUSR1)
        signal_processes([seen], signal.SIGUSR2)
        assert await within(stranger.stdout.readline(), "the stranger's report of a signal") == b"SIGUSR2\n"
        signal_processes([seen], signal.SIGKILL)
        assert await within(stranger.wait(), "the stranger's death by SIGKILL") == -signal.SIGKILL
    finally:
        if stranger.returncode is None:
            stranger.kill()
            await stranger.wait()
