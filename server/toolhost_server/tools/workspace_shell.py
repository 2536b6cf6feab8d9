"""bash (and drowcoder's name for it, execute): a shell command run in a workspace's directory the way process
tools run their programs.

The command is `/bin/bash -c -- COMMAND` through runners.process_launch (ToolServices.run_process): as the
process user, with a minimal environment (nothing of the server's own, so none of its secrets), stdin from
/dev/null, its own session and cgroup, output capped per stream, and every process it started stopped when the
call ends; the pipeline redacts what it returns. HOME and TMPDIR are a private directory of the call, removed after it.

It is served only where it runs as a user other than the server's (a root server whose process_user is not
root), unless a workspace accepts the risk with bash_as_server_user: as the server's own user, a command reads
the server's credentials and database, and redaction does not stop a command that encodes what it prints.

It is not confined to the workspace: the command reads whatever the process user may read, and reaches the
network. Where the kernel offers Landlock (runners.landlock) its writes are: only beneath the workspace (none
there when the workspace is read-only), in the call's own directory, and to /dev/null and the like; with Landlock
ABI 6, it can neither signal nor reach through abstract unix sockets any process outside its own call (other
callers' commands run as the same process user).

A command that exits non-zero (or is killed by a signal) is NON_ZERO_EXIT, as for a process tool: success=false,
exit_code set, and its output (stdout, stderr) returned with the failure, since a failing build's output is
what the caller needs most. Other failures stop the command from running or finishing: TIMEOUT
(timeout_seconds), PROGRAM_NOT_FOUND (no /bin/bash), WORKSPACE_NOT_ACCESSIBLE (the workspace's directory is
gone).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from typing import Any, Final

from ..errors import FieldViolation, InvalidArgumentsError
from ..model import Annotations, Example, Parameter
from ..runners.base import RunOutcome
from ..runners.landlock import confine_writes
from ..runners.process import refusal
from ..runners.process_dirs import discard_call_dir, make_call_dir
from ..runners.process_launch import ChildCommand
from ..workspaces.workspace_set import ServedWorkspace
from .base import ToolContext, ToolOutput, ToolRaisedFailure, ToolServices
from .workspace_tool import NO_WORKSPACES, WORKSPACE_PARAMETER, WorkspaceTool, workspaces_of

SHELL: Final = "/bin/bash"
# The text and the structured output together stay under this; each stream keeps a quarter of it, so that both
# streams, JSON-escaped, fit the structured output.
BASH_OUTPUT_BYTES: Final = 1024 * 1024
MAX_COMMAND_CHARS: Final = 100_000
# The share of the call's time the command may use, so that the tool's own TIMEOUT (and the killing of the
# command's processes) comes before the pipeline's.
_CALL_MARGIN: Final = 0.9

_OUTPUT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "exit_code": {"type": ["integer", "null"], "description": (
            "The command's exit status; null when a signal killed it (the text says which).")},
        "stdout": {"type": "string"},
        "stderr": {"type": "string"},
        "truncated": {"type": "boolean", "description": (
            "stdout or stderr went past the output limit and was cut (the first part is kept).")},
        "writes_confined": {"type": "boolean", "description": (
            "Landlock confined the command's writes to the workspace and the call's temporary directory; false "
            "where the kernel has no Landlock.")},
        "workspace": {"type": "string", "description": "The workspace the command ran in."},
    },
    "required": ["exit_code", "stdout", "stderr", "truncated", "writes_confined", "workspace"],
}


class BashTool(WorkspaceTool):
    name = "bash"
    display_name = "Bash"
    description = (
        "Runs a shell command with /bin/bash -c in the workspace's directory and returns its exit code, stdout "
        "and stderr (a non-zero exit code is reported, not an error). It runs as the server's process user (a "
        "user other than the server's, the same for every caller) with a minimal environment and no stdin; "
        "every process it starts is stopped when it ends or times out. "
        "It is NOT confined to the workspace: it can read any file that user can read and reach the network. "
        "Where the kernel offers Landlock, its writes are limited to the workspace (none in a read-only one) "
        "and a private temporary directory (HOME and TMPDIR). Only workspaces with allow_bash run it.")
    category = "file_ops"
    grant_by_name_only = True
    max_output_bytes = BASH_OUTPUT_BYTES
    parameters = (
        Parameter("command", "string", "The shell command, run as /bin/bash -c COMMAND.", required=True,
                  schema={"minLength": 1, "maxLength": MAX_COMMAND_CHARS}),
        Parameter("timeout_seconds", "number", (
            "Stop the command (and everything it started) after this many seconds; default and upper bound: "
            "the call's own time limit."), schema={"exclusiveMinimum": 0}),
        WORKSPACE_PARAMETER,
    )
    output_schema = _OUTPUT_SCHEMA
    examples = (
        Example("Run the tests", {"command": "python -m pytest -q", "timeout_seconds": 120}),
        Example("Show the git status of another workspace", {"command": "git status --short", "workspace": "docs"}),
    )
    annotations = Annotations(destructive=True, open_world=True)

    @classmethod
    def unserved_because(cls, services: ToolServices) -> str:
        workspaces = services.workspaces
        if not workspaces:
            return NO_WORKSPACES
        if refusal_of_bash := workspaces.bash_refusal():
            return refusal_of_bash
        if services.run_process is None:
            return "this server runs no processes for Python tools"
        return ""

    async def run_in(self, served: ServedWorkspace, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        workspaces = workspaces_of(context)
        # Checked here too, not only by unserved_because: a catalog file may serve this class under another name.
        if why := workspaces.bash_refusal(served):
            names = ", ".join(repr(w.name) for w in workspaces.with_bash) or "none"
            raise InvalidArgumentsError(context.tool_name, [FieldViolation("/workspace", (
                f"{why}; workspaces where bash runs: {names} (list_workspaces shows them)"))])
        command = arguments["command"]
        problem = refusal(command, allow_leading_dash=True)
        if problem:
            raise InvalidArgumentsError(context.tool_name, [FieldViolation("/command", problem)])
        seconds = context.timeout_seconds * _CALL_MARGIN
        if arguments.get("timeout_seconds") is not None:
            seconds = min(float(arguments["timeout_seconds"]), seconds)
        outcome, confined = await _run(served, command, seconds, context)
        # The operator's max_output_bytes bounds every tool's output; bash's own bound may only be lower.
        limit = min(type(self).max_output_bytes or BASH_OUTPUT_BYTES, context.services.max_output_bytes)
        result = _output(served, outcome, confined, limit)
        if outcome.failure is not None:
            raise ToolRaisedFailure(outcome.failure.message, outcome.failure.code, output=result,
                                    exit_code=outcome.exit_code)
        return result


class ExecuteTool(BashTool):
    name = "execute"
    display_name = "Execute"
    alias_of = "bash"
    description = "drowcoder's name for `bash`, the same tool: " + BashTool.description


async def _run(served: ServedWorkspace, command: str, seconds: float, context: ToolContext) -> tuple[RunOutcome, bool]:
    """Run `command` in the workspace within `seconds`; the outcome, and whether Landlock confined its writes."""
    services = context.services
    assert services.run_process is not None  # else the tool is not served
    identity = services.process_identity
    call_dir = make_call_dir()
    confinement = None
    try:
        if identity is not None:
            os.chown(call_dir, *identity)
        writable = (call_dir,) if served.workspace.read_only else (served.workspace.path, call_dir)
        try:
            confinement = confine_writes(writable)
        except OSError as exc:
            if exc.filename != served.workspace.path:
                raise
            raise _unreachable(served) from None
        child = ChildCommand(
            # "--": a command starting with "-" is the command, not more options of bash's.
            tool=context.tool_name, argv=(SHELL, "-c", "--", command), program="bash", cwd=served.workspace.path,
            env={"HOME": call_dir, "TMPDIR": call_dir}, identity=identity,
            max_output_bytes=min(BASH_OUTPUT_BYTES, services.max_output_bytes) // 4,
            before_exec=confinement.restrict_self if confinement is not None else None)
        try:
            async with asyncio.timeout(seconds):
                outcome = await services.run_process(child, context.events)
        except TimeoutError:
            raise ToolRaisedFailure(
                f"the command ran longer than {seconds:g}s and was stopped, with every process it started; give "
                "a larger timeout_seconds (the call's own time limit bounds it)", "TIMEOUT") from None
        except RuntimeError as exc:  # run_command's "cannot enter its working directory"
            if "working directory" not in str(exc):
                raise
            raise _unreachable(served) from None
    finally:
        if confinement is not None:
            confinement.close()
        await discard_call_dir(call_dir)
    if outcome.failure is not None and outcome.failure.code != "NON_ZERO_EXIT":
        raise ToolRaisedFailure(outcome.failure.message, outcome.failure.code)
    return outcome, confinement is not None


def _unreachable(served: ServedWorkspace) -> ToolRaisedFailure:
    return ToolRaisedFailure(
        f"the directory of workspace {served.name!r} cannot be entered (it is gone, or no directory); an operator "
        "restores it or fixes the workspaces setting", "WORKSPACE_NOT_ACCESSIBLE")


def _output(served: ServedWorkspace, outcome: RunOutcome, confined: bool, limit: int) -> ToolOutput:
    stdout, stderr = outcome.output, outcome.stderr
    if outcome.truncated:
        # A stream cut at the limit may end in the first part of a secret that redaction can no longer
        # recognise: its last, partial line goes.
        stdout = _whole_lines(stdout) if "stdout" in outcome.cut_streams else stdout
        stderr = _whole_lines(stderr) if "stderr" in outcome.cut_streams else stderr
    structured = {"exit_code": outcome.exit_code, "stdout": stdout, "stderr": stderr,
                  "truncated": outcome.truncated, "writes_confined": confined, "workspace": served.name}
    _fit(structured, limit // 2)
    return ToolOutput(text=_text(structured, outcome), structured=structured)


def _whole_lines(text: str) -> str:
    return text[:text.rfind("\n") + 1]


def _fit(structured: dict[str, Any], limit: int) -> None:
    """Cut stdout and stderr until the structured output, JSON-encoded, is at most `limit` bytes: output full of
    control characters grows up to sixfold when escaped."""
    while len(json.dumps(structured, ensure_ascii=False).encode("utf-8", "surrogatepass")) > limit:
        for stream in ("stdout", "stderr"):
            structured[stream] = structured[stream][:len(structured[stream]) // 2]
        structured["truncated"] = True


def _text(structured: Mapping[str, Any], outcome: RunOutcome) -> str:
    parts = [structured["stdout"]] if structured["stdout"] else []
    if structured["stderr"]:
        parts.append(f"[stderr]\n{structured['stderr']}")
    if structured["truncated"]:
        parts.append("[output cut at the limit: its first part is shown]")
    if outcome.failure is not None:  # a non-zero exit or a signal
        message = outcome.failure.message.partition(":")[0]  # without the repeated last line of stderr
        parts.append(f"[{message}]" if outcome.exit_code is None else f"[exit code {outcome.exit_code}]")
    return "\n".join(part.rstrip("\n") for part in parts) if parts else "(no output, exit code 0)"
