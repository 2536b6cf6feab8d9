"""What every workspace tool shares: served only where workspaces are configured, the `workspace` argument,
files' states reported as the tool's own failures, and worker threads of its own for blocking file work.

Each tool (an alias shares its target's) has its own pool of TOOL_THREADS threads, not asyncio's default
executor: a thread cannot be stopped, so work that outlives its call (a huge tree walked, a slow disk) holds its
thread, and in a shared pool six such calls would stop every file tool, `read` included. In a pool per tool
they hold only their own tool's. The pools belong to the process, as asyncio's default executor does (their
threads may outlive a server), and each is made when first used.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar, Final, TypeVar

from ..model import Parameter
from ..workspaces.paths import FileStateError
from ..workspaces.workspace_set import ServedWorkspace, WorkspaceSet
from ..workspaces.writing import ChangeGate
from .base import Tool, ToolContext, ToolRaisedFailure, ToolServices

T = TypeVar("T")

TOOL_THREADS: Final = 4

WORKSPACE_PARAMETER = Parameter(
    "workspace", "string", "The workspace to work in, by name (list_workspaces shows them); default: the first.")

NO_WORKSPACES = "no workspace is configured (add one with --workspace NAME=PATH or TOOLHOST_WORKSPACES)"


class WorkspaceTool(Tool, ABC):
    """A tool confined to the configured workspaces; subclasses implement `run_in`. Paths reach files only
    through the chosen workspace's PathSanitizer (`served.paths`).

    Argument shape and path confinement are refused (InvalidArgumentsError, UnsafePathError: INVALID_ARGUMENT);
    a file's content or state is the tool's failure (success=false with a code): a FileStateError from the
    sanitizer becomes one here, and tools raise ToolRaisedFailure with the codes of issue 18 (FILE_TOO_LARGE,
    NO_MATCH, ...).
    """

    category: ClassVar[str] = "file_ops"

    @classmethod
    def unserved_because(cls, services: ToolServices) -> str:
        return "" if services.workspaces else NO_WORKSPACES

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        served = workspaces_of(context).choose(arguments, context.tool_name)
        try:
            return await self.run_in(served, arguments, context)
        except FileStateError as exc:
            raise ToolRaisedFailure(exc.message, exc.code) from None

    @abstractmethod
    async def run_in(self, served: ServedWorkspace, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        """Carry out one call in the workspace `served` (blocking file work in a thread: in_thread)."""

    async def in_thread(self, function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """function(*args, **kwargs) in a thread of this tool's own pool (see the module docstring). Cancelled,
        the call returns at once and the thread runs on to its end."""
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(
            _pool_of(self.alias_of or self.name), functools.partial(context.run, function, *args, **kwargs))

    async def change_in_thread(self, change: Callable[[ChangeGate], T]) -> T:
        """change(gate) in a thread, as in_thread; `change` calls gate.commit() just before it replaces a file.
        Cancelled before that (the call's time ran out), the change is abandoned and the cancellation goes on:
        TIMEOUT is then true, nothing changed. Cancelled after it, the change is made: its answer is waited for
        and returned, so that a change that was made is never reported as TIMEOUT (what is left after the
        rename is a directory fsync)."""
        gate = ChangeGate()
        running = asyncio.ensure_future(self.in_thread(change, gate))
        try:
            return await asyncio.shield(running)
        except asyncio.CancelledError:
            if gate.abandon():
                running.add_done_callback(_retrieved)
                raise
        while True:
            try:
                return await asyncio.shield(running)
            except asyncio.CancelledError:
                continue


def require_writable(served: ServedWorkspace) -> None:
    """WORKSPACE_READ_ONLY unless the workspace may be changed."""
    if served.workspace.read_only:
        raise ToolRaisedFailure(f"workspace {served.name!r} is read-only; nothing in it can be changed",
                                "WORKSPACE_READ_ONLY")


def workspaces_of(context: ToolContext) -> WorkspaceSet:
    workspaces = context.services.workspaces
    if workspaces is None:  # the tool is not served then; only a direct run (a test) can get here
        raise RuntimeError(f"{context.tool_name} was run by a server without workspaces")
    return workspaces


_pools: dict[str, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _pool_of(tool: str) -> ThreadPoolExecutor:
    with _pools_lock:
        pool = _pools.get(tool)
        if pool is None:
            pool = _pools[tool] = ThreadPoolExecutor(TOOL_THREADS, thread_name_prefix=f"file-tool-{tool}")
        return pool


def _retrieved(running: asyncio.Future[Any]) -> None:
    """Takes the outcome of a change its call gave up (ChangeAbandoned, mostly), so that asyncio does not log it
    as never retrieved."""
    if not running.cancelled():
        running.exception()
