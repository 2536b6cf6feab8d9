"""The MCP side of bench/mcp_compare.py: the official MCP Python SDK's MCPServer over streamable HTTP.

It serves `--tools` tools in all: `echo` (takes {"text": str}, returns the text) and generated tools named
`tool_00000`... with the description and single required string parameter of the toolhost catalog the benchmark
writes, in the SDK's fastest configuration (see `serve`). `GET /stats` returns how many times `echo` ran, so the
benchmark can check that every request its load generator counted really reached the tool. When it accepts
connections it prints `serving MCP on 127.0.0.1:PORT ...` to stderr, which bench.harness.ServerProcess waits for.

    .venv/bin/python bench/mcp_server.py [--tools 1000] [--port 0]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import sys
from collections.abc import Callable

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from starlette.requests import Request
from starlette.responses import JSONResponse

_echo_calls = 0


async def echo(text: str) -> str:
    """Returns the given text unchanged."""
    # async, like toolhost's built-in echo: a plain `def` tool would cost a worker-thread hop per call.
    global _echo_calls
    _echo_calls += 1
    return text


async def generated(text: str) -> str:
    """The body of every generated tool; only listed, never called by the benchmark."""
    return text


def build(tool_count: int) -> MCPServer:
    # structured_output=False: the plain text content that toolhost's `output` corresponds to, without the
    # outputSchema/structuredContent the SDK would otherwise derive from `-> str` (less work per call and list).
    tools = [Tool.from_function(echo, name="echo", description="Returns the given text unchanged.",
                                structured_output=False)]
    # The SDK derives a tool's inputSchema ({"text": string, required}) from the function's signature, as toolhost
    # derives it from the catalog file's one parameter. All generated tools share one function, so one tool is
    # built and copied under each name: the same objects add_tool would make, without its 1.4 s for 1,000.
    template = Tool.from_function(generated, name="tool_00000", description="Generated tool 0.",
                                  structured_output=False)
    tools += [template.model_copy(update={"name": f"tool_{i:05d}", "description": f"Generated tool {i}."})
              for i in range(tool_count - 1)]
    # WARNING, not the SDK's default INFO: nothing is logged per call.
    server: MCPServer = MCPServer("bench", log_level="WARNING", tools=tools)

    @server.custom_route("/stats", methods=["GET"])
    async def stats(request: Request) -> JSONResponse:
        return JSONResponse({"echo_calls": _echo_calls})

    return server


async def serve(tool_count: int, port: int) -> None:
    """Streamable HTTP as fast as the SDK goes: stateless (no session to create, look up or expire) and JSON
    responses (no SSE stream per request). The client's MCP-Protocol-Version header then picks the SDK's path:
    2026-07-28 takes its single-exchange entry (the request handled in the ASGI task, no initialize), a
    handshake-era version the legacy stateless transport (a fresh transport and server task per request)."""
    app = build(tool_count).streamable_http_app(stateless_http=True, json_response=True)
    # Our own socket so port 0 works and the chosen port is known before uvicorn starts. IPPROTO_TCP explicitly:
    # asyncio sets TCP_NODELAY on accepted connections only when the listening socket's proto says TCP, and
    # without it Nagle plus delayed ACKs add ~40 ms to every keep-alive request.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    # No access log, log level warning; http "auto" takes httptools when it is installed, else h11.
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", timeout_keep_alive=60)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            await task  # raises whatever stopped it
            return
        await asyncio.sleep(0.01)
    # Which HTTP parser and event loop were used goes into the benchmark's figures.
    print(f"serving MCP on 127.0.0.1:{sock.getsockname()[1]} http={config.http_protocol_class.__name__} "
          f"loop={type(asyncio.get_running_loop()).__module__}", file=sys.stderr, flush=True)
    await task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=1000, help="tools served, echo included")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    logging.getLogger("mcp").setLevel(logging.WARNING)
    # uvicorn's loop="auto" (uvloop when installed) only applies to a loop uvicorn makes; this one is ours.
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None
    try:
        import uvloop

        loop_factory = uvloop.new_event_loop
    except ImportError:
        loop_factory = None
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(serve(args.tools, args.port))


if __name__ == "__main__":
    main()
