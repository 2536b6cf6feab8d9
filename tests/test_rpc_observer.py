"""ObservedRegistration: the stand-in server that a generated `add_XServicer_to_server` registers through."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from toolhost.v1 import tool_service_pb2, tool_service_pb2_grpc
from toolhost_server.api.rpc_observer import ObservedRegistration, RpcObserver
from toolhost_server.telemetry.metrics import ToolhostMetrics


def add_GenericOnlyServicer_to_server(servicer: Any, server: Any) -> None:
    """What a future grpc codegen might emit: the generic handler only, no add_registered_method_handlers."""
    handler = grpc.method_handlers_generic_handler("toolhost.v1.ToolService", {})
    server.add_generic_rpc_handlers((handler,))


class ListingServicer(tool_service_pb2_grpc.ToolServiceServicer):
    async def ListTools(self, request: Any, context: Any) -> Any:
        return tool_service_pb2.ListToolsResponse()


async def test_generated_code_that_registers_no_method_handlers_fails_the_registration_loudly() -> None:
    # ObservedRegistration ignores the generic handler, so such code would leave the server without the service
    # and every call UNIMPLEMENTED; the registration must fail instead, naming what to update.
    server = grpc.aio.server()
    registration = ObservedRegistration(server, RpcObserver(None, ToolhostMetrics()))
    with pytest.raises(RuntimeError, match=r"add_GenericOnlyServicer_to_server registered no method handlers"
                                           r".*update ObservedRegistration"):
        registration.add(add_GenericOnlyServicer_to_server, ListingServicer())


async def test_the_generated_tool_service_registers_through_the_observer() -> None:
    metrics = ToolhostMetrics()
    server = grpc.aio.server()
    ObservedRegistration(server, RpcObserver(None, metrics)).add(
        tool_service_pb2_grpc.add_ToolServiceServicer_to_server, ListingServicer())
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = tool_service_pb2_grpc.ToolServiceStub(channel)  # type: ignore[no-untyped-call]
            await stub.ListTools(tool_service_pb2.ListToolsRequest())
    finally:
        await server.stop(None)
    # Served, and through the observer's wrapper: the call is in the metrics.
    assert metrics.registry.get_sample_value(
        "toolhost_rpc_requests_total", {"method": "toolhost.v1.ToolService/ListTools", "code": "OK"}) == 1
