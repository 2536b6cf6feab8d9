"""Limits: calls in flight (server-wide and per tool) and message sizes; refused fast, recovered at once."""

from __future__ import annotations

import asyncio
import json

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from toolhost.v1 import tool_service_pb2

from helpers.catalogs import write_tool


def slow_tool(name: str, extra: str = "") -> str:
    return (f"name: {name}\ndescription: Sleeps, then answers.\n{extra}"
            "runner: {type: python, entrypoint: 'catalog_functions:sleep_echo'}\n"
            "parameters: [{name: seconds, type: number, required: true}, {name: text, type: string}]\n")


def sleep_request(name: str, seconds: float) -> tool_service_pb2.CallToolRequest:
    return tool_service_pb2.CallToolRequest(name=name, arguments_json=json.dumps({"seconds": seconds}))


def assert_over_capacity(exc: grpc.aio.AioRpcError, fragment: str) -> None:
    assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert fragment in exc.details()
    status = rpc_status.from_call(exc)
    kinds = {d.TypeName() for d in status.details}
    assert kinds == {"google.rpc.ErrorInfo", "google.rpc.RetryInfo"}
    for detail in status.details:
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            detail.Unpack(retry)
            assert retry.retry_delay.seconds >= 1


async def wait_in_flight(server, count: int) -> None:
    async with asyncio.timeout(10):
        while server.toolhost.pipeline.in_flight < count:
            await asyncio.sleep(0.01)


async def test_the_server_wide_cap_refuses_fast_and_recovers(start_server, tmp_path):
    write_tool(tmp_path, "slow", slow_tool("slow"))
    server = await start_server(catalog_dirs=[tmp_path], max_in_flight_calls=2)
    running = [asyncio.ensure_future(server.stub.CallTool(sleep_request("slow", 1))) for _ in range(2)]
    await wait_in_flight(server, 2)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await server.stub.CallTool(
            tool_service_pb2.CallToolRequest(name="echo", arguments_json='{"text": "x"}'), timeout=0.5)
    assert_over_capacity(caught.value, "max_in_flight_calls")
    assert all(r.success for r in await asyncio.gather(*running))
    response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(name="echo", arguments_json='{"text": "x"}'))
    assert response.success and server.toolhost.pipeline.in_flight == 0


async def test_a_tools_max_concurrency_leaves_other_tools_alone(start_server, tmp_path):
    write_tool(tmp_path, "single", slow_tool("single", "max_concurrency: 1\n"))
    server = await start_server(catalog_dirs=[tmp_path])
    first = asyncio.ensure_future(server.stub.CallTool(sleep_request("single", 0.5)))
    await wait_in_flight(server, 1)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await server.stub.CallTool(sleep_request("single", 0))
    assert_over_capacity(caught.value, "'single' is running 1 calls, its max_concurrency")
    echoed = await server.stub.CallTool(tool_service_pb2.CallToolRequest(name="echo", arguments_json='{"text": "y"}'))
    assert echoed.output == "y"
    assert (await first).success
    assert (await server.stub.CallTool(sleep_request("single", 0))).success


async def test_failed_and_timed_out_calls_give_their_slot_back(start_server, tmp_path):
    write_tool(tmp_path, "single", slow_tool("single", "max_concurrency: 1\ntimeout_seconds: 0.1\n"))
    server = await start_server(catalog_dirs=[tmp_path], max_in_flight_calls=1)
    for _ in range(3):
        response = await server.stub.CallTool(sleep_request("single", 5))
        assert response.error.code == "TIMEOUT"
    with pytest.raises(grpc.aio.AioRpcError) as caught:  # `seconds` is required
        await server.stub.CallTool(tool_service_pb2.CallToolRequest(name="single", arguments_json="{}"))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (await server.stub.CallTool(sleep_request("single", 0))).success


async def test_max_concurrency_must_be_a_positive_whole_number(start_server, tmp_path):
    write_tool(tmp_path, "bad", slow_tool("bad", "max_concurrency: 0\n"))
    server = await start_server(catalog_dirs=[tmp_path])
    report = await server.stub.Reload(tool_service_pb2.ReloadRequest())
    assert [e.line for e in report.errors] == [3]
    assert "max_concurrency must be a whole number of calls" in report.errors[0].reason


async def test_an_oversized_request_is_resource_exhausted_and_the_server_goes_on(start_server):
    server = await start_server(max_message_bytes=4096)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await server.stub.CallTool(tool_service_pb2.CallToolRequest(
            name="echo", arguments_json=json.dumps({"text": "x" * 10_000})))
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    response = await server.stub.CallTool(
        tool_service_pb2.CallToolRequest(name="echo", arguments_json='{"text": "ok"}'))
    assert response.output == "ok"
