"""The MCP server: tools/list, tools/call and subscriptions/listen on the SDK's low-level Server, answered by
a ToolBackend. Both transports (/mcp and `toolhost mcp` on stdio) serve this one Server, so they answer alike.

The SDK speaks two protocol eras: the handshake era (initialize, up to 2025-11-25: what most hosts and the
TypeScript SDK speak) and the sessionless one (2026-07-28). The handlers are the same for both; only what a
handshake-era caller may receive differs (structuredContent must be a JSON object there).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY, ToolsListChanged, event_to_notification
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from ..telemetry.trace_context import TRACE_CONTEXT_KEYS
from .backend import (
    BackendUnavailableError,
    CallArguments,
    CallOutcome,
    InvalidParamsError,
    McpTool,
    ProgressReport,
    ToolBackend,
    UnknownToolError,
)

logger = logging.getLogger("toolhost.mcp")

SERVER_NAME = "toolhost"
# What a handshake-era caller gets instead of a structured output that is not an object.
WRAPPED_RESULT_KEY = "result"
# The call's ids in the result's _meta, to find its audit record, log lines and trace (MCP's `prefix/name` keys).
CALL_ID_META_KEY = "toolhost/call_id"
TRACE_ID_META_KEY = "toolhost/trace_id"

# The backend of a request: who asked decides which tools it sees. Called once per request.
BackendOf = Callable[[ServerRequestContext[Any, Any]], ToolBackend]


def build_mcp_server(backend_of: BackendOf, *, version: str, instructions: str | None = None) -> Server[Any]:
    """The SDK Server answering tools/list, tools/call and subscriptions/listen from `backend_of(context)`."""

    async def list_tools(ctx: ServerRequestContext[Any, Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        try:
            page = await backend_of(ctx).list_tools(params.cursor or "" if params is not None else "")
        except InvalidParamsError as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=exc.message) from None
        except BackendUnavailableError as exc:
            raise MCPError(code=types.INTERNAL_ERROR, message=exc.message) from None
        except Exception:
            raise _masked("tools/list") from None
        handshake = _handshake_era(ctx)
        return types.ListToolsResult(tools=[mcp_tool(t, handshake) for t in page.tools],
                                     next_cursor=page.next_cursor or None)

    async def call_tool(ctx: ServerRequestContext[Any, Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        backend = backend_of(ctx)
        request = CallArguments(params.name, params.arguments, trace_headers_of(ctx))
        try:
            outcome = await backend.call(request, _progress_reporter(ctx))
        except (UnknownToolError, InvalidParamsError) as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=exc.message) from None
        except BackendUnavailableError as exc:
            raise MCPError(code=types.INTERNAL_ERROR, message=exc.message) from None
        except MCPError:
            raise  # already the protocol's answer (a call cancelled by a POSTed notification: legacy_cancel)
        except Exception:
            raise _masked("tools/call", f" of {params.name!r}") from None
        return call_result(outcome, _handshake_era(ctx))

    async def listen(ctx: ServerRequestContext[Any, Any],
                     params: types.SubscriptionsListenRequestParams) -> types.SubscriptionsListenResult:
        # Only tools/list_changed is offered: acknowledge that and nothing else the caller asked for, then send
        # one notification per change of the tools this caller sees, until the server shuts down.
        wanted = bool(params.notifications.tools_list_changed)
        meta = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        honored = types.SubscriptionFilter(tools_list_changed=True if wanted else None)
        try:
            # Taken before the acknowledgement, so that a stream over the server's bounds is refused outright.
            changes = backend_of(ctx).tool_changes() if wanted else _no_changes()
            try:
                await ctx.session.send_notification(
                    types.SubscriptionsAcknowledgedNotification(
                        params=types.SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)),
                    related_request_id=ctx.request_id)
                async for _ in changes:
                    await ctx.session.send_notification(event_to_notification(ToolsListChanged(), meta),
                                                        related_request_id=ctx.request_id)
            finally:
                await _close(changes)  # ends the registry watch and gives the stream's place back at once
        except BackendUnavailableError as exc:
            raise MCPError(code=types.INTERNAL_ERROR, message=exc.message) from None
        except MCPError:
            raise
        except Exception:
            raise _masked("subscriptions/listen") from None
        return types.SubscriptionsListenResult()

    server: Server[Any] = Server(
        SERVER_NAME, version=version, instructions=instructions,
        on_list_tools=list_tools, on_call_tool=call_tool, on_subscriptions_listen=listen,
        # No tool declares MCP header parameters. Without this the SDK would walk tools/list on every
        # 2026-07-28 HTTP call to find the schema, and before our handlers decide what the caller may see.
        get_tool_input_schema=lambda name: None,
    )
    # The call pipeline traces every call; the SDK's span per message would be a second one for each.
    server.middleware = []
    return server


def _masked(method: str, detail: str = "") -> MCPError:
    """The answer to a failure inside the server, logged here with the exception being handled: its text
    stays in the server's log, as it could hold what the caller may not see."""
    logger.exception("MCP %s%s failed inside the server", method, detail)
    return MCPError(code=types.INTERNAL_ERROR,
                    message=f"internal error while answering {method}; the server's log has the details")


async def _no_changes() -> AsyncIterator[None]:
    return
    yield  # an async generator that yields nothing


async def _close(changes: AsyncIterator[None]) -> None:
    close = getattr(changes, "aclose", None)
    if close is not None:
        await close()


def mcp_tool(tool: McpTool, handshake_era: bool) -> types.Tool:
    """`tool` as tools/list shows it: title from the display name, all four hints, and an output schema only
    where the caller's protocol allows it (an object schema before 2026-07-28)."""
    output_schema = tool.output_schema
    if output_schema is not None and handshake_era and output_schema.get("type") != "object":
        # The handshake era requires an object; the structured value is then wrapped (call_result) and its
        # shape is no longer the tool's schema, so none is claimed.
        output_schema = None
    return types.Tool(
        name=tool.name,
        title=tool.title or None,
        description=tool.description,
        input_schema=dict(tool.input_schema),
        output_schema=dict(output_schema) if output_schema is not None else None,
        annotations=types.ToolAnnotations(
            title=tool.title or None,
            read_only_hint=tool.read_only,
            destructive_hint=tool.destructive,
            idempotent_hint=tool.idempotent,
            open_world_hint=tool.open_world,
        ),
    )


def call_result(outcome: CallOutcome, handshake_era: bool) -> types.CallToolResult:
    """The tools/call result of `outcome`: the output as text (the structured output's JSON when the tool wrote
    no text), structuredContent when the tool made one, and isError with toolhost's code for a refusal or a
    failure."""
    meta = _ids_of(outcome)
    if not outcome.success:
        return types.CallToolResult(content=[_text(error_text(outcome))], is_error=True, _meta=meta)
    structured: Any = None
    text = outcome.text
    if outcome.has_structured:
        structured = outcome.structured
        if handshake_era and not isinstance(structured, dict):
            structured = {WRAPPED_RESULT_KEY: structured}
        if not text:
            text = json.dumps(outcome.structured, ensure_ascii=False, separators=(",", ":"))
    if outcome.has_structured:
        return types.CallToolResult(content=[_text(text)], structured_content=structured, is_error=False,
                                    _meta=meta)
    return types.CallToolResult(content=[_text(text)], is_error=False, _meta=meta)


def _ids_of(outcome: CallOutcome) -> dict[str, Any] | None:
    ids = {key: value for key, value in ((CALL_ID_META_KEY, outcome.call_id), (TRACE_ID_META_KEY, outcome.trace_id))
           if value}
    return ids or None


def error_text(outcome: CallOutcome) -> str:
    """`CODE: message`, then one line per argument that fails the schema (`/pointer: reason`)."""
    lines = [f"{outcome.error_code or 'TOOL_FAILED'}: {outcome.error_message}".rstrip()]
    lines.extend(f"{v.pointer or '/'}: {v.reason}" for v in outcome.violations)
    return "\n".join(lines)


def trace_headers_of(ctx: ServerRequestContext[Any, Any]) -> dict[str, str]:
    """The caller's W3C trace context: from the request's `_meta` (where MCP carries it on every transport),
    else from the HTTP request's headers."""
    found: dict[str, str] = {}
    meta: Mapping[str, Any] = ctx.meta or {}
    for key in TRACE_CONTEXT_KEYS:
        value = meta.get(key)
        if isinstance(value, str):
            found[key] = value
    if not found and ctx.request is not None:
        headers = getattr(ctx.request, "headers", None)
        if headers is not None:
            for key in TRACE_CONTEXT_KEYS:
                value = headers.get(key)
                if value is not None:
                    found[key] = value
    return found


def _progress_reporter(ctx: ServerRequestContext[Any, Any]) -> ProgressReport | None:
    """Reports progress to the caller when its request carries a progress token; None otherwise, so that the
    backend runs a plain call."""
    if ctx.meta is None or ctx.meta.get("progress_token") is None:
        return None

    async def report(progress: float, total: float | None, message: str) -> None:
        await ctx.session.report_progress(progress, total, message or None)

    return report


def _handshake_era(ctx: ServerRequestContext[Any, Any]) -> bool:
    return ctx.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)
