"""CallTool through the real server: arguments, validation, errors as status, timeouts."""

from __future__ import annotations

import asyncio
import json
import time

import grpc
import pytest
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from toolhost.v1 import tool_service_pb2

from helpers.auth import Tokens, auth_file_text, write_catalog
from helpers.calls import call
from helpers.catalogs import write_tool
from helpers.status import error_details

DESCRIBE_TOOL = """
name: describe
description: Reports the arguments it receives with their types.
runner: {type: python, entrypoint: "catalog_functions:describe"}
parameters:
  - {name: count, type: integer, required: true, minimum: 1}
  - {name: ratio, type: number, default: 0.5}
  - {name: mode, type: string, enum: [fast, slow], default: fast}
  - {name: ids, type: array, items: {type: integer}}
"""

SLEEP_TOOL = """
name: sleepy
description: Sleeps, then answers.
runner: {type: python, entrypoint: "catalog_functions:sleep_echo"}
timeout_seconds: 0.3
parameters:
  - {name: seconds, type: number, required: true}
"""


@pytest.fixture
async def server(start_server, tmp_path):
    write_tool(tmp_path, "describe", DESCRIBE_TOOL)
    write_tool(tmp_path, "sleepy", SLEEP_TOOL)
    write_tool(tmp_path, "failing", 'name: failing\ndescription: Raises.\n'
               'runner: {type: python, entrypoint: "catalog_functions:fail"}\n'
               'parameters: [{name: message, type: string, required: true}]\n')
    write_tool(tmp_path, "unbounded", 'name: unbounded\ndescription: No timeout of its own.\n'
               'runner: {type: python, entrypoint: "catalog_functions:sleep_echo"}\n'
               'parameters: [{name: seconds, type: number, required: true}]\n')
    return await start_server(catalog_dirs=[tmp_path], max_call_seconds=0.5)


async def test_struct_numbers_arrive_as_ints_and_defaults_are_filled(server):
    response = await call(server, "describe", {"count": 3, "ids": [1, 2]}, as_struct=True)
    assert response.success, response.error
    got = json.loads(response.output)
    assert got["count"] == {"value": 3, "type": "int"}
    assert got["ids"]["value"] == [1, 2] and got["ids"]["type"] == "list"
    assert got["ratio"] == {"value": 0.5, "type": "float"}
    assert got["mode"] == {"value": "fast", "type": "str"}
    assert response.structured_output.struct_value["count"]["value"] == 3


async def test_arguments_json_keeps_large_integers_exact(server):
    big = 2**60 + 1
    response = await call(server, "describe", arguments_json=json.dumps({"count": big}))
    assert response.success
    assert json.loads(response.output)["count"]["value"] == big


async def test_invalid_arguments_name_each_field(server):
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(server, "describe", {"count": 2.5, "mode": "medium", "extra": True})
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    info, violations = error_details(caught.value)
    assert info.reason == "INVALID_ARGUMENTS"
    fields = {field for field, _ in violations}
    assert fields == {"/count", "/mode", "/extra"}
    assert any("unknown argument" in reason for field, reason in violations if field == "/extra")


async def test_missing_required_argument_points_at_it(server):
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(server, "describe", {})
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    info, violations = error_details(caught.value)
    assert info.reason == "INVALID_ARGUMENTS"
    assert violations == [("/count", "required argument is missing")]


async def test_malformed_arguments_json_is_invalid_request(server):
    for text in ("{not json", "[1, 2]"):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(server, "describe", arguments_json=text)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_details(caught.value)[0].reason == "INVALID_REQUEST"


async def test_unknown_tool_is_not_found_with_suggestions(server):
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(server, "describ", {})
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert "'describe'" in caught.value.details()
    assert error_details(caught.value)[0].reason == "TOOL_NOT_FOUND"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await server.stub.GetTool(tool_service_pb2.GetToolRequest(name="eco"))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND and "'echo'" in caught.value.details()


async def test_an_unknown_name_is_told_in_sentences_with_the_close_names(server):
    cases = {  # name: (the suggestions in ErrorInfo, the message's first sentence)
        "describ": ("describe", "no tool named 'describ'; did you mean 'describe'?"),
        "sleep": ("sleepy", "no tool named 'sleep'; did you mean 'sleepy'?"),
        "nosuch": ("", "no tool named 'nosuch'."),
    }
    for name, (suggestions, sentence) in cases.items():
        for request in (call(server, name, {}), server.stub.GetTool(tool_service_pb2.GetToolRequest(name=name))):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await request
            assert caught.value.code() == grpc.StatusCode.NOT_FOUND
            assert caught.value.details() == f"{sentence} ListTools lists every tool available to you."
            info, _ = error_details(caught.value)
            assert info.reason == "TOOL_NOT_FOUND"
            assert (info.metadata["tool"], info.metadata["suggestions"]) == (name, suggestions)


async def test_several_close_names_are_offered_closest_first(start_server, tmp_path):
    for name in ("probe_a", "probe_b", "probe_c", "probe_d"):
        write_tool(tmp_path, name)
    server = await start_server(catalog_dirs=[tmp_path])
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await server.stub.GetTool(tool_service_pb2.GetToolRequest(name="probe_"))
    suggested = error_details(caught.value)[0].metadata["suggestions"].split(",")
    assert len(suggested) == 3 and set(suggested) < {"probe_a", "probe_b", "probe_c", "probe_d"}
    first, second, third = (repr(n) for n in suggested)
    assert caught.value.details() == (f"no tool named 'probe_'; did you mean {first}, {second} or {third}? "
                                      "ListTools lists every tool available to you.")


async def test_suggestions_come_only_from_the_tools_the_caller_sees(start_server, tmp_path):
    tokens = Tokens.generate()
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text(auth_file_text(tokens))
    server = await start_server(catalog_dirs=[write_catalog(tmp_path / "catalog")], auth_file=auth_file)

    async def not_found(token: str, name: str) -> grpc.aio.AioRpcError:
        bearer = (("authorization", f"Bearer {token}"),)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await server.stub.GetTool(tool_service_pb2.GetToolRequest(name=name), metadata=bearer)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        return caught.value

    # To the admin, who sees secret_tool, "secret_tol" is close to it; the agent sees neither it nor a hint.
    suggested = error_details(await not_found(tokens.admin, "secret_tol"))[0].metadata["suggestions"]
    assert suggested.split(",")[0] == "secret_tool"  # then the built-in search_tools, also close
    hidden = await not_found(tokens.agent, "secret_tol")
    assert hidden.details() == "no tool named 'secret_tol'. ListTools lists every tool available to you."
    assert error_details(hidden)[0].metadata["suggestions"] == ""
    assert b"secret_tool" not in b"".join(v for _, v in hidden.trailing_metadata() if isinstance(v, bytes))
    # What the agent sees is still suggested.
    assert error_details(await not_found(tokens.agent, "echo_on"))[0].metadata["suggestions"] == "echo_one"


async def test_an_empty_name_is_invalid_argument_for_get_tool_as_for_call_tool(server):
    for method, request, purpose in (
        (server.stub.GetTool, tool_service_pb2.GetToolRequest(name=""), "describe"),
        (server.stub.CallTool, tool_service_pb2.CallToolRequest(name=""), "call"),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await method(request)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert caught.value.details() == f"name is required: the name of the tool to {purpose} (ListTools shows them)"
        info, violations = error_details(caught.value)
        assert info.reason == "INVALID_REQUEST" and violations == []


async def test_tool_exception_is_a_failed_result_not_a_status(server):
    response = await call(server, "failing", {"message": "disk on fire"})
    assert not response.success
    assert response.error.code == "TOOL_EXCEPTION"
    # The exception's text stays in the server log; the caller gets the call id to find it.
    assert "disk on fire" not in response.error.message and "ValueError" not in response.error.message
    assert response.error.message == (f"tool 'failing' failed with an unexpected error; the server log has the "
                                      f"detail under call id {response.call_id}")


async def test_tool_timeout_is_a_failed_result(server):
    response = await call(server, "sleepy", {"seconds": 5})
    assert not response.success and response.error.code == "TIMEOUT"
    assert 250 <= response.duration_ms < 2000


async def test_caller_deadline_is_deadline_exceeded(server):
    request = tool_service_pb2.CallToolRequest(name="unbounded", arguments_json='{"seconds": 5}')
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await server.stub.CallTool(request, timeout=0.2)
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


async def test_server_wide_maximum_applies_without_other_limits(server):
    response = await call(server, "unbounded", {"seconds": 5})
    assert not response.success and response.error.code == "TIMEOUT"
    assert "0.5s" in response.error.message


async def test_response_fields(server):
    started = time.perf_counter()
    response = await call(server, "echo", {"text": "x"}, call_id="my-call-1")
    client_ms = (time.perf_counter() - started) * 1000
    assert response.call_id == "my-call-1"
    assert response.tool == "echo" and response.generation == 1
    assert response.timestamp.seconds > 0 and 0 < response.duration_ms <= client_ms
    assert not response.HasField("exit_code") and not response.HasField("error")
    assert response.structured_output == struct_pb2.Value()


async def test_unrepresentable_structured_output_is_invalid_output(start_server, tmp_path):
    write_tool(tmp_path, "not_json", "name: not_json\ndescription: Returns a set.\n"
               "runner: {type: python, entrypoint: 'catalog_functions:not_json'}\n")
    server = await start_server(catalog_dirs=[tmp_path])
    response = await call(server, "not_json", {})
    assert not response.success and response.error.code == "INVALID_OUTPUT"


async def test_blocking_tools_have_their_own_bounded_threads(start_server, tmp_path):
    write_tool(tmp_path, "blocking", "name: blocking\ndescription: Blocks a thread.\ntimeout_seconds: 0.2\n"
               "runner: {type: python, entrypoint: 'catalog_functions:blocking_sleep'}\n"
               "parameters: [{name: seconds, type: number, required: true}]\n")
    server = await start_server(catalog_dirs=[tmp_path], sync_tool_threads=2)
    stuck = await asyncio.gather(*(call(server, "blocking", {"seconds": 1.5}) for _ in range(2)))
    assert [r.error.code for r in stuck] == ["TIMEOUT", "TIMEOUT"]
    # Both threads still sleep: a third blocking call is refused at once, with a hint when to retry...
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(server, "blocking", {"seconds": 0})
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    status = rpc_status.from_call(caught.value)
    retry = [d for d in status.details if d.Is(error_details_pb2.RetryInfo.DESCRIPTOR)]
    assert len(retry) == 1 and error_details(caught.value)[0].reason == "OVER_CAPACITY"
    # ...while everything else goes on: async tools and reloads do not share those threads.
    assert (await call(server, "echo", {"text": "still here"})).output == "still here"
    assert (await server.stub.Reload(tool_service_pb2.ReloadRequest(), timeout=5)).success
    # Once the threads return, blocking tools run again.
    async with asyncio.timeout(10):
        while True:
            try:
                response = await call(server, "blocking", {"seconds": 0})
                break
            except grpc.aio.AioRpcError as refused:
                if refused.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                    raise
                await asyncio.sleep(0.1)
    assert response.success and response.output == "slept"


async def test_lone_surrogates_in_a_python_tools_output_arrive_as_replacement_characters(start_server, tmp_path):
    """A file name decoded with surrogateescape holds lone surrogates, which no response can carry: they become
    U+FFFD in the text and in the structured output (keys too), instead of failing the call as INTERNAL."""
    write_tool(tmp_path, "broken", 'name: broken\ndescription: Returns lone surrogates.\n'
               'runner: {type: python, entrypoint: "catalog_functions:lone_surrogates"}\n')
    server = await start_server(catalog_dirs=[tmp_path])
    response = await call(server, "broken")
    assert response.success, response.error
    shown = "name-\ufffd\ufffd\ufffd-\ufffd\ufffd\ufffd"
    assert response.output == f"file {shown}"
    assert MessageToDict(response.structured_output) == {"names": [shown], shown: 1}
