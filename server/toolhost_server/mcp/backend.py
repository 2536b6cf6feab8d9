"""What the MCP surface needs from toolhost, whichever side of a connection it runs on.

The MCP handlers (protocol_server.py) speak only to a ToolBackend: inside the server (/mcp) it is the registry
and the one call pipeline with the request's authenticated caller (local_backend.py); in `toolhost mcp` it is
the gRPC client of a running server (remote_backend.py). Both hand over the neutral records below, so that one
mapping to MCP's types serves both transports and they cannot drift apart.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import unknown_tool_sentence


@dataclass(frozen=True, slots=True)
class McpTool:
    """A tool as tools/list shows it. The four hints are always known: MCP's defaults for absent hints are
    the unsafe ones (destructive and open-world true), so every one is sent."""

    name: str
    title: str
    description: str
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None
    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool


@dataclass(frozen=True, slots=True)
class ToolPage:
    """One page of tools/list; `next_cursor` is empty on the last page."""

    tools: tuple[McpTool, ...]
    next_cursor: str = ""


@dataclass(frozen=True, slots=True)
class Violation:
    """One argument that fails the tool's input schema: a JSON pointer into the arguments, and why."""

    pointer: str
    reason: str


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """How a call ended, as far as MCP tells it.

    A call that ran: `success`, the (redacted) `text` and, when the tool made one, `structured`
    (`has_structured` tells a JSON null apart from none). A call the tool or the server refused after lookup:
    `success` false with `error_code` (toolhost's code, such as TOOL_FAILED, PERMISSION_DENIED or
    INVALID_ARGUMENTS) and `error_message`; for INVALID_ARGUMENTS `violations` lists each field.
    """

    success: bool
    text: str = ""
    structured: Any = None
    has_structured: bool = False
    error_code: str = ""
    error_message: str = ""
    violations: tuple[Violation, ...] = ()
    call_id: str = ""
    trace_id: str = ""


class UnknownToolError(Exception):
    """No tool by that name is visible to the caller (a hidden tool is unknown, in the same words).
    `message` is the whole sentence to send, suggestions drawn from visible tools only."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name
        self.message = message


def unknown_tool_message(name: str, suggestions: Sequence[str]) -> str:
    """The one sentence for a tool the caller cannot see, whether it is hidden or does not exist."""
    return f"Unknown tool: {unknown_tool_sentence(name, suggestions)} tools/list lists every tool available to you."


def invalid_arguments_message(tool: str) -> str:
    """The message of an INVALID_ARGUMENTS outcome; the violations follow it one per line (error_text)."""
    return f"the arguments do not match the input schema of tool {tool!r} (tools/list shows it)"


# tools/list with a cursor this server did not hand this caller (gRPC's own words name its page_token field).
INVALID_CURSOR_MESSAGE = "invalid cursor (not one this server gave this caller): list again from the first page"


class InvalidParamsError(Exception):
    """The request itself is malformed (a bad cursor, an empty name): JSON-RPC invalid params."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BackendUnavailableError(Exception):
    """The backend cannot answer now (the server is draining, the bridge's server is unreachable, too many
    streams are open): a JSON-RPC internal error whose message says what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# Called with each of the tool's progress reports: (progress, total or None, message).
ProgressReport = Callable[[float, float | None, str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class CallArguments:
    """A tools/call as the handler received it. `arguments` is None when the request sent none."""

    name: str
    arguments: Mapping[str, Any] | None = None
    trace_headers: Mapping[str, str] = field(default_factory=dict)


class ToolBackend(Protocol):
    """The tools one caller sees and may call. Every call goes through the server's call pipeline: a backend
    only translates."""

    async def list_tools(self, cursor: str) -> ToolPage:
        """The page after `cursor` ("" for the first). InvalidParamsError for a cursor this server did not
        issue to this caller with this view."""

    async def call(self, request: CallArguments, progress: ProgressReport | None) -> CallOutcome:
        """Run the tool. `progress`, when given, gets the tool's progress reports as they come. Cancelling the
        awaiting task stops the tool. UnknownToolError, InvalidParamsError or BackendUnavailableError when the
        call never reached a tool; a refusal after lookup (rights, arguments, limits) is a CallOutcome."""

    def tool_changes(self) -> AsyncIterator[None]:
        """One item each time the set of tools this caller sees (or their definitions) changes, from now on;
        ends when the server shuts down. Edits to tools hidden from the caller yield nothing."""
