"""The gRPC transport of the remote runner: one channel per target, no retries, deadline and hops passed on."""

from __future__ import annotations

import json

import grpc
from google.protobuf import json_format

from toolhost.v1 import tool_service_pb2, tool_service_pb2_grpc

from ..runners import RunOutcome, ToolFailure
from ..runners.remote import RemoteCall, RemoteTls
from .convert import OUTPUT_FORMAT_MESSAGES

HOPS_METADATA_KEY = "toolhost-hops"
# The remote runner's `target: self`: this server's own gRPC listener, wherever it was bound (a port chosen at
# start included), so a catalog can forward to the server that serves it without knowing its address.
SELF_TARGET = "self"

# Transparent retries stay on in gRPC even with retries disabled only for calls that never left the client;
# disabling the retry policy makes sure a forwarded call with side effects runs at most once per request.
_CHANNEL_OPTIONS = [
    ("grpc.enable_retries", 0),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
]


class GrpcRemoteCaller:
    """Forwards calls to other toolhosts over gRPC. Channels are opened on first use and kept, one per target
    and TLS setting (the certificate files are read when a channel opens)."""

    def __init__(self) -> None:
        self._channels: dict[tuple[str, RemoteTls | None], grpc.aio.Channel] = {}
        self._own_target = ""

    def serve_self_at(self, target: str) -> None:
        """Where `target: self` connects: the server calls this once its listener is bound."""
        self._own_target = target

    def _stub(self, target: str, tls: RemoteTls | None) -> tool_service_pb2_grpc.ToolServiceStub:
        channel = self._channels.get((target, tls))
        if channel is None:
            if tls is None:
                channel = grpc.aio.insecure_channel(target, options=_CHANNEL_OPTIONS)
            else:
                options: list[tuple[str, int | str]] = list(_CHANNEL_OPTIONS)
                if tls.server_name:
                    options.append(("grpc.ssl_target_name_override", tls.server_name))
                channel = grpc.aio.secure_channel(target, _channel_credentials(tls), options=options)
            self._channels[(target, tls)] = channel
        return tool_service_pb2_grpc.ToolServiceStub(channel)

    async def call(self, request: RemoteCall) -> RunOutcome:
        metadata = [(HOPS_METADATA_KEY, str(request.hops)), *request.trace_headers.items()]
        if request.token:
            metadata.append(("authorization", f"Bearer {request.token}"))
        target = request.target
        if target == SELF_TARGET:
            if not self._own_target:
                return RunOutcome(failure=ToolFailure(
                    "REMOTE_UNAVAILABLE", "target self: this server is not listening for gRPC"))
            target = self._own_target
        try:
            response = await self._stub(target, request.tls).CallTool(
                tool_service_pb2.CallToolRequest(
                    name=request.tool, arguments_json=json.dumps(dict(request.arguments)), call_id=request.call_id,
                    output_format=OUTPUT_FORMAT_MESSAGES[request.result_format.output_format],
                    filter_empty_fields=request.result_format.filter_empty_fields),
                timeout=request.timeout_seconds,
                metadata=metadata,
            )
        except grpc.aio.AioRpcError as exc:
            return _failure_of(request, target, exc)
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


def _channel_credentials(tls: RemoteTls) -> grpc.ChannelCredentials:
    def read(path: str) -> bytes:
        with open(path, "rb") as handle:  # a few KiB, once per channel
            return handle.read()

    return grpc.ssl_channel_credentials(
        root_certificates=read(tls.ca_file) if tls.ca_file else None,
        private_key=read(tls.key_file) if tls.key_file else None,
        certificate_chain=read(tls.cert_file) if tls.cert_file else None,
    )


def _failure_of(request: RemoteCall, target: str, exc: grpc.aio.AioRpcError) -> RunOutcome:
    code = exc.code()
    where = f"remote toolhost {target}" if target == request.target else f"toolhost {request.target} ({target})"
    if code == grpc.StatusCode.UNAVAILABLE:
        return RunOutcome(failure=ToolFailure("REMOTE_UNAVAILABLE", f"{where} is unreachable: {exc.details()}"))
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return RunOutcome(failure=ToolFailure(
            "TIMEOUT", f"{where} did not answer within {request.timeout_seconds:g}s"))
    return RunOutcome(failure=ToolFailure("REMOTE_ERROR", f"{where} answered {code.name}: {exc.details()}"))
