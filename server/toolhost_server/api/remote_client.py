"""The gRPC transport of the remote runner: one channel per target, no retries, deadline and hops passed on."""

from __future__ import annotations

import json

import grpc
from google.protobuf import json_format

from toolhost.v1 import tool_service_pb2, tool_service_pb2_grpc

from ..runners import RunOutcome, ToolFailure
from ..runners.remote import RemoteCall

HOPS_METADATA_KEY = "toolhost-hops"

# Transparent retries stay on in gRPC even with retries disabled only for calls that never left the client;
# disabling the retry policy makes sure a forwarded call with side effects runs at most once per request.
_CHANNEL_OPTIONS = [
    ("grpc.enable_retries", 0),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
]


class GrpcRemoteCaller:
    """Forwards calls to other toolhosts over gRPC. Channels are opened on first use and kept."""

    def __init__(self) -> None:
        self._channels: dict[str, grpc.aio.Channel] = {}

    def _stub(self, target: str) -> tool_service_pb2_grpc.ToolServiceStub:
        channel = self._channels.get(target)
        if channel is None:
            channel = grpc.aio.insecure_channel(target, options=_CHANNEL_OPTIONS)
            self._channels[target] = channel
        return tool_service_pb2_grpc.ToolServiceStub(channel)

    async def call(self, request: RemoteCall) -> RunOutcome:
        metadata = [(HOPS_METADATA_KEY, str(request.hops)), *request.trace_headers.items()]
        try:
            response = await self._stub(request.target).CallTool(
                tool_service_pb2.CallToolRequest(
                    name=request.tool, arguments_json=json.dumps(dict(request.arguments)), call_id=request.call_id),
                timeout=request.timeout_seconds,
                metadata=metadata,
            )
        except grpc.aio.AioRpcError as exc:
            return _failure_of(request, exc)
        return RunOutcome(
            output=response.output,
            stderr=response.stderr,
            structured=json_format.MessageToDict(response.structured_output)
            if response.HasField("structured_output") else None,
            exit_code=response.exit_code if response.HasField("exit_code") else None,
            failure=ToolFailure(response.error.code, response.error.message) if response.HasField("error") else None,
            truncated=response.truncated,
            original_size_bytes=response.original_size_bytes,
        )

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()


def _failure_of(request: RemoteCall, exc: grpc.aio.AioRpcError) -> RunOutcome:
    code = exc.code()
    where = f"remote toolhost {request.target}"
    if code == grpc.StatusCode.UNAVAILABLE:
        return RunOutcome(failure=ToolFailure("REMOTE_UNAVAILABLE", f"{where} is unreachable: {exc.details()}"))
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return RunOutcome(failure=ToolFailure(
            "TIMEOUT", f"{where} did not answer within {request.timeout_seconds:g}s"))
    return RunOutcome(failure=ToolFailure("REMOTE_ERROR", f"{where} answered {code.name}: {exc.details()}"))
