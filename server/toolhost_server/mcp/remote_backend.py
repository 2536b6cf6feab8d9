"""The backend of `toolhost mcp`: a running toolhost server, reached through its gRPC API with the bridge's own
credentials. The server decides everything (what the token sees, may call, how a call is limited); this module
only translates its answers, and its gRPC errors in one table (`_refusal`), into the records MCP is served from.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar

from toolhost import (
    AsyncClient,
    CallProgress,
    DeadlineExceededError,
    ErrorReason,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    ToolhostError,
    ToolInfo,
    ToolResult,
    UnauthenticatedError,
    UnavailableError,
)

from .backend import (
    INVALID_CURSOR_MESSAGE,
    BackendUnavailableError,
    CallArguments,
    CallOutcome,
    InvalidParamsError,
    McpTool,
    ProgressReport,
    ToolPage,
    UnknownToolError,
    Violation,
    invalid_arguments_message,
    unknown_tool_message,
)

logger = logging.getLogger("toolhost.mcp.bridge")

_T = TypeVar("_T")

# Refusals after the tool was found: the model reads the code and message as a failed call, as over /mcp.
_REFUSED_CALLS = (PermissionDeniedError, ResourceExhaustedError, FailedPreconditionError, DeadlineExceededError)


class RemoteBackend:
    """The tools the toolhost at `target` shows the credentials of `client` (an AsyncClient of that server)."""

    def __init__(self, client: AsyncClient, target: str) -> None:
        self._client = client
        self._target = target

    async def list_tools(self, cursor: str) -> ToolPage:
        try:
            # The page token is the cursor: opaque, bound by the server to the caller and its view.
            page = await _own_task(self._client.list_tools_page(view="full", page_token=cursor))
        except InvalidArgumentError:
            raise InvalidParamsError(INVALID_CURSOR_MESSAGE) from None
        except ToolhostError as exc:
            raise self._unavailable(exc) from None
        return ToolPage(tuple(mcp_tool_of(tool) for tool in page.tools), page.next_page_token)

    async def call(self, request: CallArguments, progress: ProgressReport | None) -> CallOutcome:
        arguments = dict(request.arguments) if request.arguments is not None else {}
        try:
            if progress is None:
                # Cancelling the awaiting task cancels the RPC (grpc.aio does), which stops the tool.
                return outcome_of(await _own_task(self._client.call_tool(request.name, arguments)))
            # Leaving the block, by a result or by cancellation, cancels the stream: the server stops the tool.
            async with self._client.stream_call(request.name, arguments) as events:
                while (event := await _own_task(anext(events, None))) is not None:
                    if isinstance(event, ToolResult):
                        return outcome_of(event)
                    if isinstance(event, CallProgress):
                        await progress(event.progress, event.total, event.message)
            raise self._unavailable_text("the server ended StreamCallTool without a result; retry the call")
        except ToolhostError as exc:
            return self._refusal(request.name, exc)

    def _refusal(self, tool: str, exc: ToolhostError) -> CallOutcome:
        """A call the server did not run: an outcome the model reads, or the exception the handler maps to a
        JSON-RPC error (UnknownToolError, InvalidParamsError, BackendUnavailableError)."""
        if isinstance(exc, NotFoundError):
            name = exc.metadata.get("tool", tool)
            suggestions = [s for s in exc.metadata.get("suggestions", "").split(",") if s]
            # The server sends one sentence for hidden and unknown tools; so does this, in /mcp's words.
            raise UnknownToolError(name, unknown_tool_message(name, suggestions))
        if isinstance(exc, InvalidArgumentError):
            if not exc.field_violations:
                raise InvalidParamsError(exc.message)
            return CallOutcome(success=False, error_code=exc.reason or ErrorReason.INVALID_ARGUMENTS.value,
                               error_message=invalid_arguments_message(tool),
                               violations=tuple(Violation(v.field, v.description) for v in exc.field_violations))
        if isinstance(exc, ResourceExhaustedError) and exc.reason is None:
            # No reason: gRPC itself refused a message over a size limit (the call's arguments or its result).
            return CallOutcome(success=False, error_code=exc.code.name, error_message=(
                f"{_one_line(exc.message)}: the call's arguments or result are over a gRPC message limit; send "
                "less, or raise max_message_bytes (TOOLHOST_MAX_MESSAGE_BYTES) on the server"))
        if isinstance(exc, _REFUSED_CALLS):
            # A deadline the bridge's own client hit carries no reason: the status code names it.
            return CallOutcome(success=False, error_code=exc.reason or exc.code.name, error_message=exc.message)
        raise self._unavailable(exc)

    def _unavailable(self, exc: ToolhostError) -> BackendUnavailableError:
        """Why the server cannot answer, and what would make it answer: the host shows this to its user."""
        target = self._target
        if isinstance(exc, UnauthenticatedError):
            return BackendUnavailableError(
                f"the toolhost server at {target} refused the bridge's credentials: {exc.message} (start "
                "`toolhost mcp` with --token-file or TOOLHOST_TOKEN_FILE for a token, --tls-cert and --tls-key "
                "for a client certificate)")
        if isinstance(exc, UnavailableError) and exc.reason is None:
            return BackendUnavailableError(
                f"cannot reach a toolhost server at {target}: is `toolhost serve` running there? (`toolhost mcp "
                f"--target HOST:PORT` or TOOLHOST_TARGET picks another; --tls or --tls-ca when it serves TLS): "
                f"{_one_line(exc.message)}")
        return BackendUnavailableError(f"the toolhost server at {target} answered {exc.code.name}: {exc.message}")

    def _unavailable_text(self, why: str) -> BackendUnavailableError:
        return BackendUnavailableError(f"the toolhost server at {self._target}: {why}")

    async def generations(self) -> AsyncIterator[int]:
        """The generations of the tools the bridge's credentials see (WatchTools): the current one first, then
        one per change of that view. Ends when the server shuts down; BackendUnavailableError when it cannot be
        reached or refuses."""
        watch = self._client.watch_tools()
        try:
            async with watch:
                first = True
                while (event := await _own_task(anext(watch, None))) is not None:
                    if first:
                        logger.debug("watching the tools visible to the bridge from generation %d (%d tools)",
                                     event.generation, event.count)
                    else:
                        # Names these credentials may see, at debug level, for whoever reads the bridge's stderr.
                        logger.debug("the tools visible to the bridge changed at generation %d: added %s, "
                                     "removed %s, changed %s", event.generation, list(event.added),
                                     list(event.removed), list(event.changed))
                    first = False
                    yield event.generation
        except ToolhostError as exc:
            raise self._unavailable(exc) from None

    async def tool_changes(self) -> AsyncIterator[None]:
        first = True
        async for _ in self.generations():
            # The first generation is the current one, not a change.
            if first:
                first = False
                continue
            yield None


async def _own_task(step: Awaitable[_T]) -> _T:
    """Await one gRPC step in a task of its own, and cancel that task when the awaiting one is cancelled.

    grpc.aio answers the cancellation of a task awaiting it by cancelling the call and raising a CancelledError
    of its own; anyio, which runs the MCP SDK's handlers, then cannot tell it from a cancellation of an outer
    scope, and a cancelled tools/call ended the whole session. Behind a shield the awaiting task sees the plain
    cancellation anyio sent.
    """
    task = asyncio.ensure_future(step)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        task.cancel()
        raise


def mcp_tool_of(tool: ToolInfo) -> McpTool:
    hints = tool.annotations
    return McpTool(
        name=tool.name,
        title=tool.display_name,
        description=tool.description,
        # The full view always carries the schema; an object of anything is what a tool without one accepts.
        input_schema=tool.input_schema if tool.input_schema is not None else {"type": "object"},
        output_schema=tool.output_schema,
        read_only=hints.read_only,
        destructive=hints.destructive,
        idempotent=hints.idempotent,
        open_world=hints.open_world,
    )


def outcome_of(result: ToolResult) -> CallOutcome:
    error = result.error
    # A structured output of JSON null is one: only the message tells it apart from none.
    has_structured = result.raw.HasField("structured_output")
    structured: Any = result.structured_output if has_structured else None
    return CallOutcome(
        success=result.success,
        text=result.output,
        structured=structured,
        has_structured=has_structured,
        error_code=error.code if error is not None else "",
        error_message=error.message if error is not None else "",
        call_id=result.call_id,
        trace_id=result.trace_id,
    )


def _one_line(text: str) -> str:
    return " ".join(text.split())
