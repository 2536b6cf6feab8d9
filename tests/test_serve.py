"""The `toolhost serve` process: graceful shutdown on SIGTERM, health, unix socket, configuration errors."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from toolhost.v1 import tool_service_pb2, tool_service_pb2_grpc
from toolhost_server.config import ConfigError, load_config

from helpers.catalogs import write_tool
from helpers.processes import leftover_processes
from helpers.servers import ServerProcess


def slow_tool(announce_dir: Path) -> str:
    """A tool that leaves a file in `announce_dir` when a call starts, then sleeps."""
    announce_dir.mkdir(exist_ok=True)
    return ("name: slow\ndescription: Sleeps, then answers.\n"
            "runner: {type: python, entrypoint: 'catalog_functions:announce_then_sleep'}\n"
            f"parameters: [{{name: announce_dir, type: string, default: '{announce_dir}'}}, "
            "{name: seconds, type: number, required: true}, {name: text, type: string}]\n")


async def calls_started(announce_dir: Path, count: int) -> None:
    """Wait until the server has started `count` calls of the slow tool."""
    async with asyncio.timeout(20):
        while len(list(announce_dir.iterdir())) < count:
            await asyncio.sleep(0.02)


@pytest.fixture
async def served(tmp_path):
    processes: list[ServerProcess] = []

    async def start(*args: str, env: dict[str, str] | None = None) -> ServerProcess:
        process = ServerProcess(*args, env=env)
        processes.append(process)
        await process.start()
        return process

    yield start
    for process in processes:
        await process.stop()


async def health_status(channel: grpc.aio.Channel, service: str = "") -> int:
    stub = health_pb2_grpc.HealthStub(channel)
    return (await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=2)).status


@pytest.mark.server
@pytest.mark.slow
async def test_sigterm_lets_calls_in_flight_finish_and_exits_0(served, tmp_path):
    write_tool(tmp_path, "slow", slow_tool(tmp_path / "started"))
    server = await served("--catalog-dir", str(tmp_path), "--shutdown-delay-seconds", "3",
                          "--shutdown-grace-seconds", "10")
    async with grpc.aio.insecure_channel(server.target) as channel:
        stub = tool_service_pb2_grpc.ToolServiceStub(channel)
        assert await health_status(channel) == health_pb2.HealthCheckResponse.SERVING
        calls = [asyncio.ensure_future(stub.CallTool(tool_service_pb2.CallToolRequest(
            name="slow", arguments_json=json.dumps({"seconds": 4, "text": f"call {i}"})))) for i in range(5)]
        await calls_started(tmp_path / "started", 5)
        assert server.process is not None
        server.process.send_signal(signal.SIGTERM)
        # During the delay: health says NOT_SERVING at once, and the server still answers.
        async with asyncio.timeout(5):
            while await health_status(channel) != health_pb2.HealthCheckResponse.NOT_SERVING:
                await asyncio.sleep(0.02)
        assert await health_status(channel, "toolhost.v1.ToolService") == health_pb2.HealthCheckResponse.NOT_SERVING
        echoed = await stub.CallTool(tool_service_pb2.CallToolRequest(name="echo", arguments_json='{"text": "x"}'))
        assert echoed.output == "x"
        responses = await asyncio.gather(*calls)
    assert [r.output for r in responses] == [f"call {i}" for i in range(5)]
    assert all(r.success for r in responses)
    assert await server.wait() == 0
    assert b"stopped" in server.log


@pytest.mark.server
async def test_calls_cut_off_by_the_grace_stop_their_processes_before_exit(served, tmp_path):
    marker = f"shutdown-leftover-{uuid.uuid4().hex}"
    write_tool(tmp_path, "stubborn", (
        "name: stubborn\ndescription: Ignores SIGTERM, with a child that left its session.\ntimeout_seconds: 60\n"
        f"runner: {{type: script, env: {{LEAK_MARKER: {marker}}}, script: \"#!/bin/sh\\n"
        "trap '' TERM\\nsetsid sleep 300 &\\nsleep 300\\n\"}\n"))
    server = await served("--catalog-dir", str(tmp_path), "--shutdown-grace-seconds", "0.5",
                          "--kill-grace-seconds", "0.3")
    async with grpc.aio.insecure_channel(server.target) as channel:
        stub = tool_service_pb2_grpc.ToolServiceStub(channel)
        call = asyncio.ensure_future(stub.CallTool(tool_service_pb2.CallToolRequest(name="stubborn")))
        for _ in range(100):
            if len(leftover_processes(marker)) >= 2:
                break
            await asyncio.sleep(0.05)
        assert len(leftover_processes(marker)) >= 2
        assert server.process is not None
        server.process.send_signal(signal.SIGTERM)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE  # "Cancelling all calls": retry elsewhere
    assert await server.wait() == 0
    assert leftover_processes(marker) == []


@pytest.mark.server
async def test_a_second_signal_stops_at_once(served, tmp_path):
    write_tool(tmp_path, "slow", slow_tool(tmp_path / "started"))
    server = await served("--catalog-dir", str(tmp_path), "--shutdown-grace-seconds", "60")
    async with grpc.aio.insecure_channel(server.target) as channel:
        stub = tool_service_pb2_grpc.ToolServiceStub(channel)
        call = asyncio.ensure_future(stub.CallTool(tool_service_pb2.CallToolRequest(
            name="slow", arguments_json='{"seconds": 50}')))
        await calls_started(tmp_path / "started", 1)
        assert server.process is not None
        server.process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(10):  # handled once health says NOT_SERVING, or new RPCs are refused
            with contextlib.suppress(grpc.aio.AioRpcError):
                while await health_status(channel) != health_pb2.HealthCheckResponse.NOT_SERVING:
                    await asyncio.sleep(0.02)
        server.process.send_signal(signal.SIGTERM)
        assert await server.wait(timeout=15) == 0  # not after the 60 s grace
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    assert b"stopping now" in server.log


@pytest.mark.server
async def test_a_hung_blocking_tool_does_not_hold_up_the_exit(served, tmp_path):
    write_tool(tmp_path, "blocking", "name: blocking\ndescription: Blocks a thread.\ntimeout_seconds: 0.3\n"
               "runner: {type: python, entrypoint: 'catalog_functions:blocking_sleep'}\n"
               "parameters: [{name: seconds, type: number, required: true}]\n")
    server = await served("--catalog-dir", str(tmp_path), "--shutdown-grace-seconds", "1")
    async with grpc.aio.insecure_channel(server.target) as channel:
        stub = tool_service_pb2_grpc.ToolServiceStub(channel)
        response = await stub.CallTool(tool_service_pb2.CallToolRequest(
            name="blocking", arguments_json='{"seconds": 60}'))
        assert response.error.code == "TIMEOUT"
    assert server.process is not None
    server.process.send_signal(signal.SIGTERM)
    assert await server.wait(timeout=20) == 0  # the thread still sleeps; a daemon thread does not block exit


@pytest.mark.server
async def test_a_missing_catalog_directory_stops_the_start(tmp_path):
    process = ServerProcess("--catalog-dir", str(tmp_path / "nope"))
    with pytest.raises(RuntimeError, match="server exited before listening"):
        await process.start()
    assert await process.wait() == 1
    assert b"catalog directory does not exist" in process.log


@pytest.mark.server
async def test_an_address_in_use_is_a_clear_error(served):
    first = await served()
    process = ServerProcess(address=first.target)
    with pytest.raises(RuntimeError, match="server exited before listening"):
        await process.start()
    assert await process.wait() == 1
    assert f"cannot listen on {first.target}".encode() in process.log
    assert b"Traceback" not in process.log


@pytest.mark.server
@pytest.mark.slow
async def test_new_calls_are_refused_after_the_delay(served, tmp_path):
    write_tool(tmp_path, "slow", slow_tool(tmp_path / "started"))
    server = await served("--catalog-dir", str(tmp_path), "--shutdown-grace-seconds", "5")
    async with grpc.aio.insecure_channel(server.target) as channel:
        stub = tool_service_pb2_grpc.ToolServiceStub(channel)
        in_flight = asyncio.ensure_future(stub.CallTool(tool_service_pb2.CallToolRequest(
            name="slow", arguments_json='{"seconds": 3}')))
        await calls_started(tmp_path / "started", 1)
        assert server.process is not None
        server.process.send_signal(signal.SIGTERM)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async with asyncio.timeout(10):
                while True:  # answered until the signal is handled, refused from then on
                    # A generous deadline: on a loaded machine a probe must not fail by DEADLINE_EXCEEDED.
                    await stub.CallTool(tool_service_pb2.CallToolRequest(name="echo", arguments_json='{"text": "x"}'),
                                        timeout=8)
                    await asyncio.sleep(0.02)
        # UNAVAILABLE once the server refuses new calls. Which probe is refused is a race with the signal: the
        # last one may reach the server in the moment its gRPC server stops, after the call arrived but before
        # a handler took it, and gRPC cancels such a call (CANCELLED) instead of refusing it.
        assert caught.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
        assert (await in_flight).success
    assert await server.wait() == 0


@pytest.mark.server
async def test_watch_streams_end_on_shutdown(served):
    server = await served()
    async with grpc.aio.insecure_channel(server.target) as channel:
        stream = tool_service_pb2_grpc.ToolServiceStub(channel).WatchTools(tool_service_pb2.WatchToolsRequest())
        first = await stream.read()
        assert first.generation == 1 and "echo" in first.added
        assert server.process is not None
        server.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(stream.read(), 10) is grpc.aio.EOF
    assert await server.wait() == 0


@pytest.mark.server
async def test_serves_on_a_unix_socket_too(served, tmp_path):
    socket_path = tmp_path / "toolhost.sock"
    await served("--unix-socket", str(socket_path))
    async with grpc.aio.insecure_channel(f"unix:{socket_path}") as channel:
        stub = tool_service_pb2_grpc.ToolServiceStub(channel)
        response = await stub.CallTool(tool_service_pb2.CallToolRequest(name="echo", arguments_json='{"text": "u"}'))
        assert response.output == "u"


@pytest.mark.server
async def test_environment_configures_the_server(served, tmp_path):
    write_tool(tmp_path / "a", "from_env")
    server = await served(env={"AI_TOOL_CATALOG_DIRS": str(tmp_path / "a"), "TOOLHOST_REQUIRED_TOOLS": "nope"})
    async with grpc.aio.insecure_channel(server.target) as channel:
        report = await tool_service_pb2_grpc.ToolServiceStub(channel).Reload(tool_service_pb2.ReloadRequest())
    assert "from_env" in report.tools and "greet" not in report.tools
    assert list(report.catalog_dirs) == [str(tmp_path / "a")]
    assert list(report.missing_required) == ["nope"]


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--grpc-address", "nowhere"], {}, "grpc_address must be host:port"),
        (["--max-call-seconds", "-1"], {}, "max_call_seconds must be greater than 0"),
        ([], {"TOOLHOST_WATCH_CATALOG": "maybe"},
         "TOOLHOST_WATCH_CATALOG='maybe': watch_catalog must be true or false"),
    ],
)
@pytest.mark.server
def test_bad_configuration_is_refused_with_a_clear_message(args, env, message):
    result = subprocess.run(
        [sys.executable, "-m", "toolhost_server.cli", "serve", *args], env={**os.environ, **env},
        capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert message in result.stderr


def test_config_file_is_read_and_flags_win(tmp_path):
    config_file = tmp_path / "toolhost.yaml"
    config_file.write_text("max_hops: 3\nrequired_tools: [a, b]\ngrpc_address: 127.0.0.1:6000\n")
    config = load_config({"grpc_address": "127.0.0.1:7000"}, {"TOOLHOST_MAX_HOPS": "4"}, str(config_file))
    assert (config.max_hops, config.required_tools, config.grpc_address) == (4, ("a", "b"), "127.0.0.1:7000")
    config_file.write_text("max_hop: 3\n")
    with pytest.raises(ConfigError, match="unknown setting 'max_hop'"):
        load_config({}, {}, str(config_file))


def test_required_tools_default_to_the_seeds_three_and_an_operator_can_ask_for_none(tmp_path):
    assert load_config({}, {}).required_tools == ("asset_count", "asset_search", "windows_list_directory")
    config_file = tmp_path / "toolhost.yaml"
    for emptied in ("required_tools: []\n", "required_tools:\n", "required_tools: ''\n"):
        config_file.write_text(emptied)
        assert load_config({}, {}, str(config_file)).required_tools == (), emptied
    # An empty variable empties the list (other settings ignore an empty variable), and an empty flag too.
    config_file.write_text("required_tools: [a, b]\n")
    assert load_config({}, {"TOOLHOST_REQUIRED_TOOLS": ""}, str(config_file)).required_tools == ()
    assert load_config({"required_tools": ""}, {"TOOLHOST_REQUIRED_TOOLS": "a"}).required_tools == ()
    assert load_config({}, {"TOOLHOST_REQUIRED_TOOLS": " a, ,b "}).required_tools == ("a", "b")


@pytest.mark.server
async def test_an_empty_required_tools_variable_leaves_nothing_to_miss(served, tmp_path):
    config_file = tmp_path / "toolhost.yaml"
    config_file.write_text("required_tools: [nope]\n")
    server = await served("--config", str(config_file), env={"TOOLHOST_REQUIRED_TOOLS": ""})
    async with grpc.aio.insecure_channel(server.target) as channel:
        report = await tool_service_pb2_grpc.ToolServiceStub(channel).Reload(tool_service_pb2.ReloadRequest())
    assert list(report.missing_required) == [] and report.tools
    assert b"Required tool" not in server.log


@pytest.mark.server
async def test_toolhost_catalog_dirs_win_over_the_seed_variable_with_a_warning(served, tmp_path):
    write_tool(tmp_path / "ours", "ours")
    write_tool(tmp_path / "seed", "seed")
    server = await served(env={"TOOLHOST_CATALOG_DIRS": str(tmp_path / "ours"),
                               "AI_TOOL_CATALOG_DIRS": str(tmp_path / "seed")})
    async with grpc.aio.insecure_channel(server.target) as channel:
        report = await tool_service_pb2_grpc.ToolServiceStub(channel).Reload(tool_service_pb2.ReloadRequest())
    assert "ours" in report.tools and "seed" not in report.tools
    # stderr is no terminal here, so the log is JSON lines (log_format's default), the configuration's too.
    records = [json.loads(line) for line in server.log.splitlines() if line.startswith(b"{")]
    assert any(r["level"] == "WARNING" and r["logger"] == "toolhost.config" and
               r["message"].startswith("both TOOLHOST_CATALOG_DIRS and AI_TOOL_CATALOG_DIRS are set") for r in records)


@pytest.mark.server
async def test_the_server_process_is_not_dumpable(served, tmp_path):
    # Non-dumpable: its /proc/<pid>/environ and memory belong to root, out of reach of tools that run as the
    # server's (non-root) user. As root here, the test can only ask the kernel for the flag.
    write_tool(tmp_path, "dumpable", "name: dumpable\ndescription: Reports the server's dumpable flag.\n"
               "runner: {type: python, entrypoint: 'catalog_functions:server_is_dumpable'}\n")
    server = await served("--catalog-dir", str(tmp_path))
    async with grpc.aio.insecure_channel(server.target) as channel:
        response = await tool_service_pb2_grpc.ToolServiceStub(channel).CallTool(
            tool_service_pb2.CallToolRequest(name="dumpable"))
    assert response.success and response.output == "false"


async def hold_a_request_open(http_port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection the server has served once (so it is past accept), then holding a /mcp request whose body
    stops at 10 of its 100 bytes: what a client that never finishes its body does."""
    reader, writer = await asyncio.open_connection("127.0.0.1", http_port)
    host = f"Host: 127.0.0.1:{http_port}\r\n"
    writer.write(f"GET /healthz HTTP/1.1\r\n{host}\r\n".encode())
    assert (await reader.readuntil(b"ok\n")).startswith(b"HTTP/1.1 200")
    writer.write(f"POST /mcp HTTP/1.1\r\n{host}Content-Type: application/json\r\nAccept: application/json, "
                 "text/event-stream\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\"".encode())
    await writer.drain()
    return reader, writer


@pytest.mark.server
async def test_a_client_that_never_finishes_its_body_does_not_hold_up_the_exit(served):
    """Without a bound, uvicorn waits for every open request: one connection held the process until SIGKILL.
    The exit comes from the stop's own bound (kill grace + 1 s), long before the guard's 30 s body deadline
    would have answered the client 408."""
    server = await served("--shutdown-delay-seconds", "0", "--shutdown-grace-seconds", "0.2",
                          "--kill-grace-seconds", "0.2")
    http_port = int((await server.wait_for_log(rb"serving HTTP \(/mcp, .* on 127\.0\.0\.1:(\d+)")).group(1))
    reader, writer = await hold_a_request_open(http_port)
    assert server.process is not None
    server.process.send_signal(signal.SIGTERM)
    assert await server.wait() == 0
    assert b"408" not in await reader.read()  # cut off by the exit, not answered by the body deadline
    writer.close()


@pytest.mark.server
async def test_a_second_signal_stops_the_http_listener_waiting_for_a_client(served):
    """With a long kill grace the HTTP listener would wait for the held request; a second SIGTERM, as for gRPC's
    grace, stops the wait at once."""
    server = await served("--shutdown-delay-seconds", "0", "--shutdown-grace-seconds", "0.2",
                          "--kill-grace-seconds", "60")
    http_port = int((await server.wait_for_log(rb"serving HTTP \(/mcp, .* on 127\.0\.0\.1:(\d+)")).group(1))
    reader, writer = await hold_a_request_open(http_port)
    assert server.process is not None
    server.process.send_signal(signal.SIGTERM)
    await server.wait_for_log(rb"Waiting for connections to close")
    server.process.send_signal(signal.SIGTERM)
    assert await server.wait() == 0
    assert b"408" not in await reader.read()
    assert b"stopping now" in server.log
    writer.close()
