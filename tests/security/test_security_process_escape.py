"""Finding 13: a process that forks and exits in a chain, keeping the call's marker, outlived the tree kill at a
normal end and at TIMEOUT (each generation was gone before a scan of /proc read it, its child not there yet
when the scan listed /proc). Now walks from the server freeze and kill the chain, and where the server can make
cgroups each call gets one, killed whole.

Whether a chain process is left is not judged by a scan of /proc, which the chain outruns as it outran the
server's: every generation holds the write end of a FIFO the test reads, so the FIFO reports end of file exactly
when no process of the chain is left. The cgroup tests use a directory below this process's own cgroup where
it may make cgroups; otherwise, as root, they mount a cgroup2 hierarchy; otherwise they are skipped, saying why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolhost_server.runners import process_cgroup, process_sweep
from toolhost_server.runners.base import RunnerSettings
from toolhost_server.runners.process_cgroup import CGROUPS_OFF, CgroupParent, call_cgroups
from toolhost_server.runners.process_launch import SAFE_PATH, ChildCommand, run_command
from toolhost_server.runners.process_steps import run_steps, run_steps_blocking
from toolhost_server.runners.process_sweep import ProcessChase
from toolhost_server.runners.process_table import CALL_MARKER_VARIABLE

from helpers.calls import call
from helpers.catalogs import add_tool
from helpers.processes import leftover_processes, marker, zombie_children
from helpers.waiting import eventually, within

PY = sys.executable
# The leader starts a chain and, once it has gone 50 generations, says "chaining" and exits (or, with HANG set,
# waits for its timeout). Each generation forks and exits at once, so none lives longer than a fork; the chain
# runs in a session of its own (out of reach of a signal to the leader's process group), and holds the FIFO
# $REPORT_DIR/alive open, not the call's output, so the call can end while it runs. It writes its cgroup to
# $REPORT_DIR/cgroup, and ends itself when $REPORT_DIR/stop exists (the test's cleanup, should it survive).
FORK_CHAIN = """\
import os, sys, time
report = os.environ['REPORT_DIR']
started, ready = os.pipe()
if os.fork() == 0:
    os.close(started)
    os.setsid()
    alive = os.open(os.path.join(report, 'alive'), os.O_WRONLY)
    quiet = os.open(os.devnull, os.O_RDWR)
    for stream in (0, 1, 2):
        os.dup2(quiet, stream)
    generation = 0
    while not os.path.exists(os.path.join(report, 'stop')):
        if os.fork():
            os._exit(0)
        generation += 1
        if generation == 50:
            with open(os.path.join(report, 'cgroup'), 'wb') as out:
                out.write(open('/proc/self/cgroup', 'rb').read())
            os.write(ready, b'x')
    os._exit(0)
os.close(ready)
os.read(started, 1)
print('chaining', flush=True)
open(os.path.join(report, 'chaining'), 'w').close()
if os.environ.get('HANG'):
    time.sleep(1000)
"""


@contextlib.contextmanager
def chain_watch(report: Path) -> Iterator[int]:
    """The read end of the FIFO every process of the chain holds; on leaving, any chain still running is told to
    stop (and ends at its next generation)."""
    fifo = report / "alive"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        yield reader
    finally:
        (report / "stop").touch()
        os.close(reader)


def chain_is_gone(reader: int) -> bool:
    """Whether no process holds the FIFO for writing any more (read after one has: end of file then)."""
    try:
        return os.read(reader, 1) == b""
    except BlockingIOError:
        return False


def chain_tool(catalog: Path, report: Path, tag: str, hang: bool = False) -> None:
    env = {"REPORT_DIR": str(report), "TEST_MARKER": tag, **({"HANG": "1"} if hang else {})}
    add_tool(catalog, "chain", {"type": "process", "argv": [PY, "-I", "-S", "-c", FORK_CHAIN], "env": env},
             extra=f"timeout_seconds: {5 if hang else 60}\n")


def own_cgroup2_directory() -> tuple[Path | None, str]:
    """This process's own cgroup2 directory where it may make cgroups in it, or None and why not."""
    found, why = process_cgroup.own_cgroup()
    return (Path(found), "") if found is not None else (None, why)


def mount_cgroup2(at: Path) -> str:
    """Mount the cgroup2 hierarchy at `at` (root only); "" or why it could not be."""
    if os.geteuid() != 0:
        return "mounting a cgroup2 hierarchy needs root"
    at.mkdir()
    result = subprocess.run(["mount", "-t", "cgroup2", "none", str(at)], capture_output=True, text=True)
    return "" if result.returncode == 0 else f"mount -t cgroup2 failed: {result.stderr.strip()}"


def own_cgroup_path() -> str:
    """This process's cgroup2 path ("0::" in /proc/self/cgroup), relative to the hierarchy's root."""
    lines = Path("/proc/self/cgroup").read_text().splitlines()
    return next(line[3:] for line in lines if line.startswith("0::"))


def remove_parent(parent: Path) -> None:
    """Remove a test's parent cgroup and what the servers made in it (their cgroups are empty by now)."""
    for server_dir in parent.glob("toolhost-*"):
        process_cgroup.remove_server_directory(str(server_dir))
    with contextlib.suppress(OSError):
        parent.rmdir()


@pytest.fixture
def cgroup_parent(tmp_path) -> Iterator[Path]:
    """A fresh cgroup2 directory for the server's calls, removed afterwards (see the module docstring)."""
    base, why_not_own = own_cgroup2_directory()
    mounted: Path | None = None
    if base is None:
        mounted = tmp_path / "cgroup2"
        why_not_mounted = mount_cgroup2(mounted)
        if why_not_mounted:
            pytest.skip(f"no cgroup2 directory to test with: {why_not_own}; {why_not_mounted}")
        base = mounted / own_cgroup_path().lstrip("/")
    parent = base / f"toolhost-test-{secrets.token_hex(4)}"
    parent.mkdir()
    try:
        yield parent
    finally:
        remove_parent(parent)
        if mounted is not None:
            subprocess.run(["umount", str(mounted)], check=True)


@pytest.fixture(params=["sweep", "cgroup"])
def containment(request) -> str:
    """process_cgroup_parent for the server: "off" (walks from the server alone), or a cgroup2 directory."""
    if request.param == "sweep":
        return CGROUPS_OFF
    return str(request.getfixturevalue("cgroup_parent"))


def assert_contained(report: Path, containment: str) -> None:
    """The chain ran in a call cgroup under `containment` when that is one, and that cgroup is gone now."""
    seen = (report / "cgroup").read_text()
    path = next(line[3:] for line in seen.splitlines() if line.startswith("0::"))
    if containment == CGROUPS_OFF:
        assert "/call-" not in path, seen
        return
    parent = Path(containment)
    *_, parent_name, server_name, call_name = path.split("/")
    assert (parent_name, server_name[:9], call_name[:5]) == (parent.name, "toolhost-", "call-"), \
        f"the chain ran in {path}, not in a call's cgroup under {parent}"
    assert not (parent / server_name / call_name).exists(), "the call's cgroup was not removed"


async def test_a_fork_chain_is_stopped_when_its_call_ends(start_server, tmp_path, containment):
    tag, report = marker(), tmp_path / "report"
    report.mkdir()
    chain_tool(tmp_path / "catalog", report, tag)
    server = await start_server(catalog_dirs=[tmp_path / "catalog"], kill_grace_seconds=0.2,
                                process_cgroup_parent=containment)
    with chain_watch(report) as chain:
        response = await call(server, "chain")
        assert response.success and response.output == "chaining\n", response.error
        # The stop is over when the call answers: no generation may hold the FIFO any more.
        assert chain_is_gone(chain), "a process of the fork chain outlived its call"
    assert leftover_processes(tag) == []
    assert_contained(report, containment)


async def test_a_fork_chain_is_stopped_at_timeout(start_server, tmp_path, containment):
    tag, report = marker(), tmp_path / "report"
    report.mkdir()
    chain_tool(tmp_path / "catalog", report, tag, hang=True)
    server = await start_server(catalog_dirs=[tmp_path / "catalog"], kill_grace_seconds=0.2,
                                process_cgroup_parent=containment)
    with chain_watch(report) as chain:
        pending = asyncio.create_task(call(server, "chain"))
        await eventually(lambda: (report / "chaining").exists() or pending.done(), what="the chain running")
        assert not pending.done(), f"the call ended before its chain ran: {pending.result()}"
        response = await within(pending, "the call's timeout")
        assert not response.success and response.error.code == "TIMEOUT"
        assert chain_is_gone(chain), "a process of the fork chain outlived its call's timeout"
    assert leftover_processes(tag) == []
    assert_contained(report, containment)


# A daemon no scan can tell from a stranger: no marker (env -i), its own session, none of the call's output. It
# holds the FIFO (as fd 3), so the test sees when it is gone.
UNRECOGNISABLE_DAEMON = ('exec 3>"$REPORT_DIR/alive"; env -i setsid sleep 1000 </dev/null >/dev/null 2>&1 & '
                         'echo started')


async def test_in_a_cgroup_even_a_daemon_no_scan_recognises_is_stopped(start_server, tmp_path, cgroup_parent):
    report = tmp_path / "report"
    report.mkdir()
    add_tool(tmp_path / "catalog", "daemon", {"type": "process", "argv": ["sh", "-c", UNRECOGNISABLE_DAEMON],
                                              "env": {"REPORT_DIR": str(report)}})
    server = await start_server(catalog_dirs=[tmp_path / "catalog"], kill_grace_seconds=0.2,
                                process_cgroup_parent=str(cgroup_parent))
    with chain_watch(report) as daemon:
        response = await call(server, "daemon")
        assert response.success and response.output == "started\n", response.error
        assert chain_is_gone(daemon), "the daemon outlived its call although it ran in the call's cgroup"


@pytest.fixture
def mounted_parent(tmp_path) -> Iterator[Path]:
    """A fresh parent cgroup in a cgroup2 hierarchy mounted for the test (root only), unmounted afterwards."""
    mounted = tmp_path / "cgroup2"
    why_not = mount_cgroup2(mounted)
    if why_not:
        pytest.skip(f"cannot mount a cgroup2 hierarchy here: {why_not}")
    parent = mounted / own_cgroup_path().lstrip("/") / f"toolhost-test-{secrets.token_hex(4)}"
    try:
        parent.mkdir()
        yield parent
    finally:
        remove_parent(parent)
        subprocess.run(["umount", str(mounted)], check=True)


async def test_a_freshly_mounted_cgroup2_hierarchy_can_hold_the_calls(start_server, tmp_path, mounted_parent):
    tag, report = marker(), tmp_path / "report"
    report.mkdir()
    chain_tool(tmp_path / "catalog", report, tag)
    server = await start_server(catalog_dirs=[tmp_path / "catalog"], kill_grace_seconds=0.2,
                                process_cgroup_parent=str(mounted_parent))
    with chain_watch(report) as chain:
        response = await call(server, "chain")
        assert response.success, response.error
        assert chain_is_gone(chain), "a process of the fork chain outlived its call"
    assert_contained(report, str(mounted_parent))


async def test_where_cgroup_kill_is_missing_the_cgroup_is_frozen_then_killed(tmp_path, cgroup_parent, monkeypatch):
    # As on a kernel before 5.14, which has no cgroup.kill: the cgroup's own files are real, only that one
    # write is refused, as the kernel would (the file would not exist).
    write = process_cgroup._write
    monkeypatch.setattr(process_cgroup, "_write",
                        lambda directory, name, value: name != "cgroup.kill" and write(directory, name, value))
    cgroup = CgroupParent(str(cgroup_parent)).new_call()
    assert cgroup is not None
    report = tmp_path / "report"
    report.mkdir()
    tag = marker()
    with chain_watch(report) as chain:
        leader = await asyncio.create_subprocess_exec(
            PY, "-I", "-S", "-c", FORK_CHAIN, preexec_fn=cgroup.join, stdout=subprocess.PIPE,
            env={"PATH": SAFE_PATH, "REPORT_DIR": str(report), CALL_MARKER_VARIABLE: tag})
        cgroup.joined()
        assert leader.stdout is not None
        assert await within(leader.stdout.readline(), "the chain running") == b"chaining\n"
        assert await within(leader.wait(), "the leader's exit") == 0
        assert cgroup.populated()
        remembered = []
        assert await within(run_steps(cgroup.stopping(remembered.append)), "the cgroup's kill")
        assert chain_is_gone(chain) and not cgroup.populated()
        assert remembered, "the frozen members were not reported before the kill"
    cgroup.remove()
    assert not os.path.exists(cgroup.path)
    assert leftover_processes(tag) == []
    reap_zombies_from(cgroup.path)


def reap_zombies_from(cgroup: str) -> None:
    """Reap the zombies the chain left to this process (a child subreaper once a server ran in it): a zombie
    still names the cgroup it died in."""
    name = os.path.basename(cgroup)
    for pid in zombie_children():
        with contextlib.suppress(OSError):
            if f"/{name}\n" in Path(f"/proc/{pid}/cgroup").read_text():
                os.waitpid(pid, os.WNOHANG)


def test_a_configured_parent_that_is_no_cgroup_is_an_error_in_the_log(tmp_path, caplog):
    with caplog.at_level(logging.ERROR, logger="toolhost.runners.process"):
        assert call_cgroups.__wrapped__(str(tmp_path)) is None
    (message,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert f"process_cgroup_parent={tmp_path} cannot be used" in message and "not a directory of a cgroup2" in message


def process_state(pid: int) -> bytes:
    return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]


def test_a_pid_a_stranger_took_after_its_parent_listed_it_is_never_signalled(monkeypatch):
    # A walk reads a process's children, then each child's stat. Between the two the child may exit, its parent
    # reap it, and its pid go to a process that is no one of the call's: that one must not be frozen or killed.
    # The race is staged: the first reading of the call's process's children lists the stranger's pid.
    call_process = subprocess.Popen(["sleep", "60"])
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        children = f"/proc/{call_process.pid}/task/{call_process.pid}/children"
        read = process_sweep.read_proc_file
        staged = []

        def read_proc_file(path: str) -> bytes:
            if path == children and not staged:
                staged.append(path)
                return f"{stranger.pid} ".encode()
            return read(path)

        monkeypatch.setattr(process_sweep, "read_proc_file", read_proc_file)
        ours = {call_process.pid}
        chase = ProcessChase(call_process.pid, lambda table: ours & table.stats.keys(), lambda stat: None)
        try:
            assert run_steps_blocking(chase.stopping(budget_seconds=5), 0.001)
        finally:
            chase.close()
        assert staged, "the walk never read the call's process's children"
        assert call_process.wait(5) == -signal.SIGKILL
        assert stranger.poll() is None and process_state(stranger.pid) not in (b"T", b"t"), \
            "the walk froze or killed a process that took the pid of a child of the call's"
    finally:
        for process in (call_process, stranger):
            process.kill()
            process.wait()


@pytest.mark.parametrize("kill", ["cgroup.kill", "one by one"])
def test_a_cgroup_a_process_made_inside_its_calls_is_stopped_and_removed(tmp_path, cgroup_parent, monkeypatch, kill):
    # A process that may write its call's cgroup (it runs as the server's user, where that is not root) can make
    # a cgroup below it and move there: it is stopped all the same, also where the kernel has no cgroup.kill,
    # and the call's cgroup is removed with the one made below it, not left behind at every such call.
    if kill == "one by one":
        write = process_cgroup._write
        monkeypatch.setattr(process_cgroup, "_write",
                            lambda directory, name, value: name != "cgroup.kill" and write(directory, name, value))
    cgroup = CgroupParent(str(cgroup_parent)).new_call()
    assert cgroup is not None
    moving = subprocess.Popen(
        ["sh", "-c", 'mkdir "$CG/sub" && echo 0 > "$CG/sub/cgroup.procs" && echo moved && exec sleep 60'],
        preexec_fn=cgroup.join, stdout=subprocess.PIPE, env={"PATH": SAFE_PATH, "CG": cgroup.path})
    cgroup.joined()
    try:
        assert moving.stdout is not None and moving.stdout.readline() == b"moved\n"
        assert cgroup.member_pids() == [moving.pid], "the process below the call's cgroup is not one of its members"
        assert run_steps_blocking(cgroup.stopping(lambda stat: None), 0.001), "the process below it survived"
        assert moving.wait(5) == -signal.SIGKILL
        cgroup.remove()
        assert not os.path.exists(cgroup.path), "the call's cgroup was left behind"
    finally:
        moving.kill()
        moving.wait()
        if moving.stdout is not None:
            moving.stdout.close()


def pidfds() -> int:
    """How many pidfds this process holds open."""
    count = 0
    for descriptor in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/self/fd/{descriptor}") == "anon_inode:[pidfd]"
    return count


async def test_a_call_cancelled_again_while_it_is_stopped_leaves_no_pidfd_or_cgroup(tmp_path, cgroup_parent):
    # The pipeline's timeout and the gRPC cancellation can both arrive: the second lands while the first stops
    # the call's processes. The stop still runs to its end; the leader's pidfd and the call's cgroup must go too.
    report = tmp_path / "report"
    report.mkdir()
    script = f'trap "" TERM; : > "{report}/started"; sleep 60'
    settings = RunnerSettings(kill_grace_seconds=0.5, process_cgroup_parent=str(cgroup_parent))
    before = pidfds()
    command = ChildCommand(tool="stubborn", argv=("sh", "-c", script), program="sh")
    running = asyncio.create_task(run_command(command, settings))
    await eventually(lambda: (report / "started").exists(), what="the call running")
    running.cancel()
    await asyncio.sleep(0.1)  # within the grace: the stop is under way
    assert not running.done()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await within(running, "the stop")
    assert pidfds() == before, "the leader's pidfd was left open"
    assert not list(cgroup_parent.glob("toolhost-*/call-*")), "the call's cgroup was left behind"
