"""The backend of /mcp: the registry and the one call pipeline, for the request's authenticated caller.

Nothing here decides what a caller may see or call: listing and the pipeline do, as they do for gRPC.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing

from opentelemetry import context as otel_context

from ..app import Toolhost
from ..auth import Caller, view_of
from ..call_events import Progress
from ..errors import (
    InvalidArgumentsError,
    InvalidPageTokenError,
    InvalidRequestError,
    ShuttingDownError,
    ToolhostError,
    ToolNotFoundError,
)
from ..listing import list_tools
from ..model import ToolSpec
from ..pipeline import CallRequest, CallResult
from ..telemetry import parent_context
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

# tools/list pages: as ListTools' default page. An MCP host lists everything at once, page after page.
PAGE_SIZE = 100


class LocalBackend:
    """The tools `caller` sees on this server, and calls through its pipeline."""

    def __init__(self, toolhost: Toolhost, caller: Caller) -> None:
        self._toolhost = toolhost
        self._caller = caller

    async def list_tools(self, cursor: str) -> ToolPage:
        toolhost = self._toolhost
        try:
            page = list_tools(toolhost.registry.snapshot, toolhost.tool_filter(), PAGE_SIZE, cursor, self._caller)
        except (InvalidPageTokenError, InvalidRequestError):
            raise InvalidParamsError(INVALID_CURSOR_MESSAGE) from None
        return ToolPage(tuple(mcp_tool_of(tool.spec) for tool in page.tools), page.next_page_token)

    async def call(self, request: CallArguments, progress: ProgressReport | None) -> CallOutcome:
        call = CallRequest(name=request.name, arguments=request.arguments if request.arguments is not None else {},
                           trace_headers=request.trace_headers, caller=self._caller)
        pipeline = self._toolhost.pipeline
        # The caller's trace context parents the call's span, as the RPC's server span does on gRPC (with
        # tracing off the pipeline takes the trace id from trace_headers itself).
        token = otel_context.attach(parent_context(request.trace_headers)) if request.trace_headers else None
        try:
            if progress is None:
                return outcome_of(await pipeline.call(call))
            # Cancelling this task closes the stream, which stops the tool as a cancelled StreamCallTool does.
            async with aclosing(pipeline.stream(call)) as events:
                async for event in events:
                    if isinstance(event, CallResult):
                        return outcome_of(event)
                    if isinstance(event, Progress):
                        await progress(event.progress, event.total, event.message)
            raise AssertionError("the call pipeline's stream ended without a result")
        except ToolNotFoundError as exc:
            raise UnknownToolError(exc.name, unknown_tool_message(exc.name, exc.suggestions)) from None
        except InvalidArgumentsError as exc:
            # The violations follow one per line: the message would repeat them.
            return CallOutcome(success=False, error_code=exc.reason,
                               error_message=invalid_arguments_message(request.name),
                               violations=tuple(Violation(v.pointer, v.reason) for v in exc.violations))
        except InvalidRequestError as exc:
            raise InvalidParamsError(exc.message) from None
        except ShuttingDownError as exc:
            # Not the tool's failure: a protocol error, which a host retries (on another replica) rather than
            # show the model, as gRPC's UNAVAILABLE is.
            raise BackendUnavailableError(exc.message) from None
        except ToolhostError as exc:
            # Refused after lookup: rights, limits, deadlines. The model reads the code.
            return CallOutcome(success=False, error_code=exc.reason, error_message=exc.message)
        finally:
            if token is not None:
                otel_context.detach(token)

    async def tool_changes(self) -> AsyncIterator[None]:
        registry = self._toolhost.registry
        # The stream keeps the rights it opened with, as WatchTools does. The first generation is the current
        # one, not a change.
        first = True
        async for _ in registry.watch(view_of(registry, self._caller)):
            if first:
                first = False
                continue
            yield None


def mcp_tool_of(spec: ToolSpec) -> McpTool:
    hints = spec.annotations
    return McpTool(
        name=spec.name,
        title=spec.display_name,
        description=spec.description,
        input_schema=spec.input_schema,
        output_schema=spec.output_schema,
        read_only=hints.read_only,
        destructive=hints.destructive,
        idempotent=hints.idempotent,
        open_world=hints.open_world,
    )


def outcome_of(result: CallResult) -> CallOutcome:
    outcome = result.outcome
    failure = outcome.failure
    structured = outcome.structured
    return CallOutcome(
        success=result.success,
        text=outcome.output,
        structured=structured,
        has_structured=structured is not None,
        error_code=failure.code if failure is not None else "",
        error_message=failure.message if failure is not None else "",
        call_id=result.call_id,
        trace_id=result.trace_id,
    )
