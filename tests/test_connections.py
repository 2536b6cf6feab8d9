"""Connection lifetime: max_connection_age makes clients reconnect, so round_robin spreads over new replicas."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from toolhost.v1 import tool_service_pb2, tool_service_pb2_grpc

ECHO = tool_service_pb2.CallToolRequest(name="echo", arguments_json='{"text": "x"}')


@pytest.mark.slow
async def test_connections_older_than_max_connection_age_are_closed_and_clients_reconnect(start_server):
    aged = await start_server(max_connection_age_seconds=0.5, shutdown_grace_seconds=1)
    lasting = await start_server()
    states = {}
    for name, server in (("aged", aged), ("lasting", lasting)):
        async with grpc.aio.insecure_channel(server.target) as channel:
            stub = tool_service_pb2_grpc.ToolServiceStub(channel)
            assert (await stub.CallTool(ECHO)).success
            assert channel.get_state() == grpc.ChannelConnectivity.READY
            await asyncio.sleep(2)  # past the age and its grace
            states[name] = channel.get_state()
            assert (await stub.CallTool(ECHO)).success  # a new connection, transparently
    # The server sent GOAWAY: the client's connection went back to idle (or is reconnecting).
    assert states["aged"] != grpc.ChannelConnectivity.READY
    assert states["lasting"] == grpc.ChannelConnectivity.READY
