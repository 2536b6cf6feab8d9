"""What every workspace tool shares: served only where workspaces are configured, the `workspace` argument, and
files' states reported as the tool's own failures."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

from ..model import Parameter
from ..workspaces.paths import FileStateError
from ..workspaces.workspace_set import ServedWorkspace, WorkspaceSet
from .base import Tool, ToolContext, ToolRaisedFailure, ToolServices

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
        """Carry out one call in the workspace `served` (blocking file work in a thread: asyncio.to_thread)."""


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
