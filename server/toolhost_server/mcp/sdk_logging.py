"""The MCP SDK's libraries log whole messages at DEBUG: sse_starlette every chunk it sends (every tool result,
file contents and database rows included), the SDK a malformed frame or a transport's exception with its input.
gRPC never logs a result, and the server's log reaches the log ring, the log database and LogService readers,
so these loggers are held at INFO whatever the server's log level.
"""

from __future__ import annotations

import logging

# The loggers found to write message contents at DEBUG (sse_starlette/sse.py "chunk: %s"; the SDK's dispatcher
# "transport yielded exception: %r" and runner "dropped a frame ...: %r").
BODY_LOGGERS = ("sse_starlette", "mcp.shared.jsonrpc_dispatcher", "mcp.server.runner")


def quiet_sdk_loggers() -> None:
    """Hold the loggers that write message contents at INFO, or above where already set higher."""
    for name in BODY_LOGGERS:
        library = logging.getLogger(name)
        if library.level < logging.INFO:  # NOTSET (0) included: it would follow the root's DEBUG
            library.setLevel(logging.INFO)
