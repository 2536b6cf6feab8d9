"""The baseline for benchmarks: a bare grpc.aio ToolService with the same messages and no toolhost logic.

CallTool echoes `text` back; ListTools returns a prebuilt page. Whatever toolhost costs on top of this is
its own overhead.

    python bench/bare_server.py [TOOL_COUNT] [--page-file FILE]

TOOL_COUNT (default 1000) generated tools make the page; `--page-file` serves instead the serialized
ListToolsResponse in FILE, such as one taken from toolhost itself, so that both send the very same bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import grpc

from toolhost.v1 import tool_pb2, tool_service_pb2, tool_service_pb2_grpc


def generated_page(tool_count: int) -> tool_service_pb2.ListToolsResponse:
    # The same fields toolhost's BASIC view fills for the benchmark's catalog, so both send as many bytes.
    tools = [
        tool_pb2.Tool(
            name=f"tool_{i:05d}", display_name=f"Tool {i:05d}", description=f"Generated tool {i}.",
            category="general", platform="cross-platform", version="1.0.0",
            source=tool_pb2.TOOL_SOURCE_CATALOG, origin=f"/tmp/tmpcatalog0/tool_{i:05d}.yaml",
            fingerprint=f"{i:064x}",
        )
        for i in range(tool_count)
    ]
    return tool_service_pb2.ListToolsResponse(tools=tools, total_size=tool_count, generation=1)


class BareToolService(tool_service_pb2_grpc.ToolServiceServicer):
    def __init__(self, tool_count: int, page: tool_service_pb2.ListToolsResponse | None = None) -> None:
        self._page = page if page is not None else generated_page(tool_count)

    async def ListTools(self, request, context):  # type: ignore[no-untyped-def]
        return self._page

    async def CallTool(self, request, context):  # type: ignore[no-untyped-def]
        arguments = json.loads(request.arguments_json) if request.arguments_json else {}
        return tool_service_pb2.CallToolResponse(success=True, tool=request.name, output=str(arguments.get("text")))


async def main(tool_count: int, page: tool_service_pb2.ListToolsResponse | None = None) -> None:
    server = grpc.aio.server()
    tool_service_pb2_grpc.add_ToolServiceServicer_to_server(BareToolService(tool_count, page), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"serving gRPC on 127.0.0.1:{port}", file=sys.stderr, flush=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tool_count", nargs="?", type=int, default=1000)
    parser.add_argument("--page-file", type=Path, help="serve this serialized ListToolsResponse as the page")
    arguments = parser.parse_args()
    prebuilt = None
    if arguments.page_file is not None:
        prebuilt = tool_service_pb2.ListToolsResponse.FromString(arguments.page_file.read_bytes())
    asyncio.run(main(arguments.tool_count, prebuilt))
