"""Running one command for a tool call: a minimal environment, captured output, and nothing left behind.

Shared by the process and script runners. The child runs in its own session (start_new_session) with stdin
from /dev/null, in the configured directory or a private temporary one that is gone from its path when the
call returns (and removed just after, off the call's path: see process_dirs), and in a cgroup of its own where
the server can make one (process_cgroup). Whatever ends the call (exit, timeout, the caller going away) every
process it started is stopped before `run_command` returns or lets the cancellation through; then the zombies
that earlier calls' daemons left are reaped.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import secrets
import signal
import subprocess
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from ..call_events import CallEvents
from ..errors import FieldViolation, InvalidArgumentsError
from .base import RunnerSettings, RunOutcome, ToolFailure
from .process_cgroup import CallCgroup, CgroupParent, call_cgroups
from .process_dirs import discard_call_dir, make_call_dir
from .process_output import CaptureProtocol
from .process_reaper import become_child_subreaper, spawned_leaders, spawning, sweep_strays
from .process_table import CALL_MARKER_VARIABLE
from .process_tree import ProcessTree

logger = logging.getLogger("toolhost.runners.process")

SAFE_PATH: Final = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NO_HOME: Final = "/nonexistent"
SCRIPT_FILE_NAME: Final = ".toolhost-script"
# How long to wait for a SIGKILLed leader to be reported exited before giving up on it (it is then stuck in
# the kernel and nothing more can be done).
_EXIT_AFTER_KILL_SECONDS: Final = 5.0
# Span attributes of the process span: OpenTelemetry's process.* names, and toolhost's own.
_EXECUTABLE_NAME: Final = "process.executable.name"
_PID: Final = "process.pid"
_EXIT_CODE: Final = "process.exit.code"
_STDOUT_BYTES: Final = "toolhost.process.stdout_bytes"
_STDERR_BYTES: Final = "toolhost.process.stderr_bytes"
_KILLED: Final = "toolhost.process.killed"


@dataclass(frozen=True, slots=True)
class ChildCommand:
    """One command to run for a call.

    `env` is added to the minimal environment. `cwd` None runs the command in the call's private temporary
    directory. `script`, when given, is written to a private file (mode 0700) in that directory and the file's
    path is appended to `argv`. `program` names the command in messages ("ping", or a script's "bash").
    `identity` runs the command as another user: the temporary directory and script then belong to that user.
    """

    tool: str
    argv: tuple[str, ...]
    program: str
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    install_hint: str = ""
    script: bytes | None = None
    # (uid, gid) to run as; None keeps the server's user.
    identity: tuple[int, int] | None = None
    # Bytes kept of each output stream; None: the server's max_output_bytes.
    max_output_bytes: int | None = None
    # Run in the child after it became `identity` and joined its cgroup, just before exec (a Landlock
    # restriction). It must not raise: a child that cannot go on writes why to stderr and exits.
    before_exec: Callable[[], None] | None = None


def child_environment(static: Mapping[str, str], home: str | None, marker: str) -> dict[str, str]:
    """What a child sees: a fixed PATH, a UTF-8 locale, a HOME of its own, the runner's `env:` and the marker.

    Nothing of the server's own environment (which holds its credentials) is passed on.
    """
    env = {"PATH": SAFE_PATH, "LANG": "C.UTF-8", "HOME": home or NO_HOME}
    env.update(static)
    env[CALL_MARKER_VARIABLE] = marker
    return env


async def run_command(
    command: ChildCommand, settings: RunnerSettings, events: CallEvents | None = None
) -> RunOutcome:
    """Run `command` to completion and report it; see the module docstring. Raises InvalidArgumentsError when
    the arguments are too large for the kernel to pass on. Output is also reported to `events` as it comes."""
    become_child_subreaper()
    call_dir = None
    if command.cwd is None or command.script is not None:
        call_dir = make_call_dir()
    try:
        argv = command.argv
        if command.script is not None:
            assert call_dir is not None
            argv = (*argv, _write_script(call_dir, command.script))
        if command.identity is not None and call_dir is not None:
            for path in _owned_paths(call_dir, command.script is not None):
                os.chown(path, *command.identity)
        env = child_environment(command.env, call_dir, secrets.token_hex(16))
        # The program's name only: argv holds the call's argument values.
        with settings.tracer.start_as_current_span(
                f"process {command.program}", kind=SpanKind.INTERNAL,
                attributes={_EXECUTABLE_NAME: command.program}, record_exception=False,
                set_status_on_exception=False) as span:
            return await _spawn_and_wait(command, argv, env, command.cwd or call_dir, settings, events, span)
    finally:
        if call_dir is not None:
            await discard_call_dir(call_dir, (SCRIPT_FILE_NAME,) if command.script is not None else ())


def _owned_paths(call_dir: str, has_script: bool) -> list[str]:
    return [call_dir, os.path.join(call_dir, SCRIPT_FILE_NAME)] if has_script else [call_dir]


def _identity_options(identity: tuple[int, int] | None) -> dict[str, Any]:
    """Popen options that drop to `identity`; no supplementary groups, so none of the server's carry over."""
    if identity is None:
        return {}
    uid, gid = identity
    return {"user": uid, "group": gid, "extra_groups": []}


def _write_script(call_dir: str, script: bytes) -> str:
    path = os.path.join(call_dir, SCRIPT_FILE_NAME)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o700)
    with open(descriptor, "wb") as handle:
        handle.write(script)
    return path


async def _spawn_and_wait(
    command: ChildCommand, argv: tuple[str, ...], env: dict[str, str], cwd: str | None, settings: RunnerSettings,
    events: CallEvents | None, span: trace.Span,
) -> RunOutcome:
    loop = asyncio.get_running_loop()
    protocol = CaptureProtocol(command.max_output_bytes or settings.max_output_bytes, events)
    cgroups = call_cgroups(settings.process_cgroup_parent)
    cgroup = cgroups.new_call() if cgroups is not None else None
    options: dict[str, Any] = {"stdin": subprocess.DEVNULL, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE,
                               "env": env, "cwd": cwd, "start_new_session": True,
                               **_identity_options(command.identity)}
    # Until the leader is in spawned_leaders, stray reaping must not touch a zombie it does not recognise: it
    # could be this leader, exited already, which asyncio is about to reap.
    with spawning():
        starting = loop.create_task(_start(protocol, argv, options, cgroups, cgroup, command.before_exec))
        # A spawn is never cut short: asyncio would then kill only the leader and wait for the pipes to close,
        # which the leader's children (still running) hold open forever. It takes a few loop iterations; then a
        # cancellation that arrived meanwhile stops the whole tree like any other.
        interrupted = False
        while not starting.done():
            try:
                await asyncio.wait([starting])
            except asyncio.CancelledError:
                interrupted = True
        try:
            transport, cgroup = starting.result()
        except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
            if interrupted:
                raise asyncio.CancelledError from None
            if cwd is not None and exc.filename == cwd:
                raise RuntimeError(f"tool {command.tool!r}: cannot enter its working directory {cwd}: {exc}") from exc
            span.set_status(Status(StatusCode.ERROR, "PROGRAM_NOT_FOUND"))
            return _not_installed(command, exc)
        except OSError as exc:
            if interrupted:
                raise asyncio.CancelledError from None
            if exc.errno == errno.E2BIG:
                raise InvalidArgumentsError(command.tool, [FieldViolation(
                    "", "the arguments are too large to pass to a program (about 128 KiB per value at most)")]
                ) from None
            raise
        leader = transport.get_pid()
        span.set_attribute(_PID, leader)
        if not protocol.exited.done():
            spawned_leaders.add(leader)
    # Reap now, and every second while calls run: a tool that leaves a zombie of the server per process it forks
    # (a fork chain) must not fill the system's pid table before its call ends.
    sweep_strays()
    tree = ProcessTree(env[CALL_MARKER_VARIABLE], leader, _pipe_inodes(transport), cgroup)
    try:
        if interrupted:
            raise asyncio.CancelledError
        await protocol.exited
        spawned_leaders.discard(leader)
        if tree.may_have_leftovers():
            await tree.stop(settings.kill_grace_seconds)
        # Data still in the pipes arrives before they report closed.
        await protocol.finished
    finally:
        # Not finished here: the wait was cut short (timeout, cancellation) and the server stops the process.
        stopped = not protocol.finished.done()
        try:
            if stopped:
                # Raises CancelledError at its end when the call was cancelled again meanwhile.
                await _uncancellable(_release(transport, protocol, tree, settings.kill_grace_seconds))
            else:  # nothing to wait for: no task, no loop iteration
                _close(transport, protocol)
        finally:
            tree.close()
            if cgroup is not None:
                cgroup.remove()
            _record_process(span, protocol, transport.get_returncode(), stopped)
    return _outcome(command, protocol, transport.get_returncode())


async def _start(
    protocol: CaptureProtocol, argv: tuple[str, ...], options: dict[str, Any], cgroups: CgroupParent | None,
    cgroup: CallCgroup | None, before_exec: Callable[[], None] | None = None,
) -> tuple[asyncio.SubprocessTransport, CallCgroup | None]:
    """Spawn the leader, in `cgroup` when there is one; the transport and the cgroup the leader is in. The
    cgroup is removed when the spawn fails. A child that could not join its cgroup (a kernel before 5.16 and
    a child switched to another user, or a parent not delegated after all) stops cgroups for the server."""
    loop = asyncio.get_running_loop()
    if cgroup is not None:
        try:
            transport, _ = await loop.subprocess_exec(lambda: protocol, *argv,
                                                      preexec_fn=_then(cgroup.join, before_exec), **options)
        except subprocess.SubprocessError:  # raised for the join, the only code run in the child that raises
            cgroup.remove()
            assert cgroups is not None
            cgroups.disable(f"a tool's process could not move itself into {cgroup.path}")
        except BaseException:
            cgroup.remove()
            raise
        else:
            cgroup.joined()
            return transport, cgroup
    transport, _ = await loop.subprocess_exec(lambda: protocol, *argv, preexec_fn=before_exec, **options)
    return transport, None


def _then(first: Callable[[], object], second: Callable[[], None] | None) -> Callable[[], object]:
    if second is None:
        return first

    def both() -> None:
        first()
        second()
    return both


def _record_process(span: trace.Span, protocol: CaptureProtocol, returncode: int | None, stopped: bool) -> None:
    """What the process span keeps: how it ended and how much it wrote, never what."""
    if not span.is_recording():
        return
    span.set_attributes({
        _STDOUT_BYTES: protocol.stdout.size,
        _STDERR_BYTES: protocol.stderr.size,
        _KILLED: stopped or (returncode is not None and returncode < 0),
    })
    if returncode is not None:
        span.set_attribute(_EXIT_CODE, returncode)
        if returncode != 0:
            span.set_status(Status(StatusCode.ERROR, "NON_ZERO_EXIT"))


def _pipe_inodes(transport: asyncio.SubprocessTransport) -> frozenset[int]:
    """The inodes of the child's stdout and stderr pipes, by which an escaped process that kept them is known."""
    inodes = set()
    for fd in (1, 2):
        pipe = transport.get_pipe_transport(fd)
        handle = pipe.get_extra_info("pipe") if pipe is not None else None
        if handle is not None:
            with contextlib.suppress(OSError, ValueError):
                inodes.add(os.fstat(handle.fileno()).st_ino)
    return frozenset(inodes)


async def _release(
    transport: asyncio.SubprocessTransport, protocol: CaptureProtocol, tree: ProcessTree, grace_seconds: float
) -> None:
    """Stop what still runs (when the wait was cut short) and free the pipes."""
    try:
        if not protocol.finished.done():
            await tree.stop(grace_seconds)
            await asyncio.wait([protocol.exited], timeout=_EXIT_AFTER_KILL_SECONDS)
            if not protocol.exited.done():
                logger.error("process %s of tool call did not exit after SIGKILL", tree.leader)
    finally:
        _close(transport, protocol)


def _close(transport: asyncio.SubprocessTransport, protocol: CaptureProtocol) -> None:
    """Free the pipes and reap the zombies of earlier calls' daemons."""
    if protocol.exited.done():
        spawned_leaders.discard(transport.get_pid())
    transport.close()
    sweep_strays()


async def _uncancellable(cleanup: Coroutine[Any, Any, None]) -> None:
    """Run `cleanup` to its end even if the calling task is cancelled again meanwhile (the pipeline's timeout
    and the gRPC server's cancellation can both arrive); then pass any such cancellation on."""
    task = asyncio.get_running_loop().create_task(cleanup)
    interrupted = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            interrupted = True
    if interrupted:
        raise asyncio.CancelledError
    task.result()


def _not_installed(command: ChildCommand, exc: OSError) -> RunOutcome:
    if isinstance(exc, FileNotFoundError):
        hint = f" (install {command.install_hint})" if command.install_hint else ""
        message = f"{command.program} is not installed on this server{hint}"
    else:
        message = f"{command.program} cannot be run on this server: {exc.strerror or exc}"
    return RunOutcome(failure=ToolFailure("PROGRAM_NOT_FOUND", message))


def _outcome(command: ChildCommand, protocol: CaptureProtocol, returncode: int | None) -> RunOutcome:
    stdout, stderr = protocol.stdout, protocol.stderr
    truncated = stdout.truncated or stderr.truncated
    cut = frozenset(name for name, stream in (("stdout", stdout), ("stderr", stderr)) if stream.truncated)
    outcome = RunOutcome(
        output=stdout.text(),
        stderr=stderr.text(),
        exit_code=returncode if returncode is not None and returncode >= 0 else None,
        truncated=truncated,
        original_size_bytes=max(stdout.size, stderr.size) if truncated else 0,
        cut_streams=cut,
    )
    if returncode != 0:
        if returncode is not None and returncode < 0:
            message = f"{command.program} was killed by signal {_signal_name(-returncode)}"
        else:
            message = f"{command.program} exited with status {returncode}"
        last_line = stderr.last_line()
        outcome.failure = ToolFailure("NON_ZERO_EXIT", f"{message}: {last_line}" if last_line else message)
    return outcome


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
