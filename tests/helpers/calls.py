"""CallTool in one line: `await call(server, "echo", text="hi")` against a started server."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from toolhost.v1 import tool_service_pb2

from helpers.servers import RunningServer


async def call(server: RunningServer, name: str, arguments: Mapping[str, Any] | None = None, /, *,
               as_struct: bool = False, arguments_json: str | None = None, call_id: str = "",
               metadata: Sequence[tuple[str, str]] | None = None, timeout: float | None = None,
               **keyword_arguments: Any) -> tool_service_pb2.CallToolResponse:
    """The response of tool `name` called with `arguments` and the keyword arguments, together: sent as
    `arguments_json`, or in the request's Struct when `as_struct` (where every number is a double). Text given as
    `arguments_json` is sent as it is. `call_id`, `metadata` and `timeout` go with the call; a refusal raises
    grpc.aio.AioRpcError. The first three are positional only, so that a tool parameter may be called `name`."""
    given = {**(arguments or {}), **keyword_arguments}
    request = tool_service_pb2.CallToolRequest(name=name, call_id=call_id)
    if arguments_json is not None:
        assert not given, "arguments_json is the whole of the arguments"
        request.arguments_json = arguments_json
    elif as_struct:
        request.arguments.update(given)
    else:
        request.arguments_json = json.dumps(given)
    response: tool_service_pb2.CallToolResponse = await server.stub.CallTool(request, metadata=metadata,
                                                                             timeout=timeout)
    return response
