"""`toolhost mcp`: the MCP server on this process's stdin and stdout, answered by a running toolhost (RemoteBackend).

stdout carries JSON-RPC messages only. The SDK's stdio_server points fd 1 at stderr while it serves, so a stray
print or a child's output cannot reach the wire; the bridge's own logging is sent to stderr before that
(cli/_mcp_command.py).

Tool list changes reach the host in the way its protocol era has: a 2026-07-28 client opens
subscriptions/listen (protocol_server.py answers it); a handshake-era client is sent
notifications/tools/list_changed on the connection, from the moment it says it is initialized.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from mcp.server import NotificationOptions, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server

from .backend import BackendUnavailableError
from .protocol_server import build_mcp_server
from .remote_backend import RemoteBackend
from .sdk_logging import quiet_sdk_loggers

logger = logging.getLogger("toolhost.mcp.bridge")

# How long the bridge waits before it watches the server's tools again after losing it: doubling up to the
# longest, so that a server that is down is not asked many times a second.
FIRST_RETRY_SECONDS = 0.5
LONGEST_RETRY_SECONDS = 30.0


async def serve_stdio(backend: RemoteBackend, *, version: str) -> None:
    """Serve MCP on stdin and stdout until the host closes stdin."""
    quiet_sdk_loggers()
    server = build_mcp_server(lambda ctx: backend, version=version)
    # Handshake-era hosts learn from this that list_changed is sent; sessionless ones from subscriptions/listen.
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    async with anyio.create_task_group() as tasks:
        server.add_notification_handler("notifications/initialized", types.NotificationParams,
                                        _start_forwarding_on_initialized(backend, tasks))
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, options)
        tasks.cancel_scope.cancel()


def _start_forwarding_on_initialized(backend: RemoteBackend, tasks: TaskGroup) -> Any:
    """The handler of notifications/initialized, which only a handshake-era session sends: from then on the
    session is told about changes of the tools the bridge sees. A process serves one session, so one forwarder."""
    started = False

    async def on_initialized(ctx: ServerRequestContext[Any, Any], params: types.NotificationParams) -> None:
        nonlocal started
        if not started:
            started = True
            tasks.start_soon(forward_tool_changes, backend, ctx.session)

    return on_initialized


async def forward_tool_changes(backend: RemoteBackend, session: ServerSession) -> None:
    """Send notifications/tools/list_changed on `session` for each change of the tools the bridge sees.

    The watch is opened again, after a pause, whenever the server goes away; what changed meanwhile is unknown,
    so the first generation of a watch after one was lost (or never opened) counts as a change: a host that
    started before its server then lists the tools once the server is up.
    """
    news_on_open = False
    delay = FIRST_RETRY_SECONDS
    while True:
        first = True
        try:
            async for _ in backend.generations():
                if not first or news_on_open:
                    logger.debug("telling the host that its tool list changed")
                    await session.send_tool_list_changed()
                first, news_on_open, delay = False, False, FIRST_RETRY_SECONDS
            logger.info("the toolhost server ended the tool watch (shutting down?); watching again in %gs", delay)
        except BackendUnavailableError as exc:
            logger.warning("cannot watch the server's tools; retrying in %gs: %s", delay, exc.message)
        news_on_open = True
        await anyio.sleep(delay)
        delay = min(delay * 2, LONGEST_RETRY_SECONDS)
