"""grpcurl and grpc-health-probe against a real server, through reflection only (no proto files)."""

from __future__ import annotations

import asyncio
import base64
import json
import shlex
from pathlib import Path

import pytest

from toolhost.v1 import asset_service_pb2, log_service_pb2, tool_service_pb2, user_tool_service_pb2

from helpers.paths import tool_binary
from helpers.servers import ServerProcess


async def run(*argv: str, timeout: float = 30) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    async with asyncio.timeout(timeout):
        out, err = await process.communicate()
    return await process.wait(), out.decode(), err.decode()


def json_messages(text: str) -> list[dict]:
    """The messages of a server stream as grpcurl prints them: JSON objects one after the other."""
    decoder, position, messages = json.JSONDecoder(), 0, []
    text = text.strip()
    while position < len(text):
        message, position = decoder.raw_decode(text, position)
        messages.append(message)
        while position < len(text) and text[position].isspace():
            position += 1
    return messages


@pytest.fixture
async def grpcurl(start_server):
    server = await start_server()

    async def call(*args: str, data: object | None = None, flags: tuple[str, ...] = ()) -> tuple[int, str, str]:
        extra = ["-d", json.dumps(data)] if data is not None else []
        return await run(tool_binary("grpcurl"), "-plaintext", *flags, *extra, server.target, *args)

    return call


async def test_list_and_describe_through_reflection(grpcurl):
    code, out, err = await grpcurl("list")
    assert code == 0, err
    assert set(out.split()) >= {"toolhost.v1.ToolService", "grpc.health.v1.Health",
                                "grpc.reflection.v1alpha.ServerReflection"}
    code, out, err = await grpcurl("describe", "toolhost.v1.ToolService")
    assert code == 0, err
    for rpc in ("ListTools", "GetTool", "CallTool", "StreamCallTool", "Reload", "WatchTools"):
        assert f"rpc {rpc}" in out
    code, out, _ = await grpcurl("describe", "toolhost.v1.CallToolResponse")
    assert "original_size_bytes" in out and ".google.protobuf.Value structured_output" in out


async def test_every_rpc_can_be_called(grpcurl):
    code, out, err = await grpcurl("toolhost.v1.ToolService/ListTools", data={"page_size": 2})
    assert code == 0, err
    listed = json.loads(out)
    assert len(listed["tools"]) == 2 and listed["next_page_token"] and listed["generation"] == "1"

    code, out, err = await grpcurl("toolhost.v1.ToolService/GetTool", data={"name": "echo"})
    assert code == 0, err
    assert json.loads(out)["tool"]["input_schema"]["required"] == ["text"]

    code, out, err = await grpcurl("toolhost.v1.ToolService/CallTool",
                                   data={"name": "echo", "arguments": {"text": "from grpcurl"}})
    assert code == 0, err
    called = json.loads(out)
    assert called["success"] is True and called["output"] == "from grpcurl"

    code, out, err = await grpcurl("toolhost.v1.ToolService/StreamCallTool", data={"name": "disk_free"})
    assert code == 0, err
    events = json_messages(out)
    assert [list(e) for e in events[:1]] == [["output"]] and events[0]["output"]["stream"] == "OUTPUT_STREAM_STDOUT"
    assert list(events[-1]) == ["result"] and events[-1]["result"]["success"] is True
    assert base64.b64decode(events[0]["output"]["data"]).decode().startswith("Filesystem")

    code, out, err = await grpcurl("toolhost.v1.ToolService/Reload")
    assert code == 0, err
    assert json.loads(out)["success"] is True

    code, out, err = await grpcurl("toolhost.v1.ToolService/WatchTools", flags=("-max-time", "2"))
    first = json.JSONDecoder().raw_decode(out)[0]
    assert first["generation"] == "1" and "echo" in first["added"]
    assert "DeadlineExceeded" in err  # the stream stays open until the client's -max-time


async def test_errors_carry_error_info(grpcurl):
    code, _, err = await grpcurl("toolhost.v1.ToolService/CallTool", data={"name": "echo", "arguments": {}})
    assert code != 0
    assert "InvalidArgument" in err and "INVALID_ARGUMENTS" in err and "/text" in err


async def test_health_probe_overall_and_per_service(start_server):
    server = await start_server()
    probe = tool_binary("grpc-health-probe")
    for service in ("", "toolhost.v1.ToolService"):
        code, out, err = await run(probe, f"-addr={server.target}", f"-service={service}")
        assert code == 0 and "SERVING" in out + err
    code, out, err = await run(probe, f"-addr={server.target}", "-service=no.such.Service")
    assert code != 0 and "NotFound" in out + err


# --- the README's commands, run as written ------------------------------------------------------------------

README = Path(__file__).resolve().parent.parent / "README.md"
DOCUMENTED_ADDRESS = "127.0.0.1:50051"


# The sentences before the README's walk-throughs (user tools, assets), whose commands run in order against one
# server.
WALK_THROUGH = "against a fresh `toolhost serve`, in this order"
ASSET_WALK_THROUGH = "against a fresh `toolhost serve`, one after another"


def _commands_after(marker: str) -> list[str]:
    """The grpcurl and grpc-health-probe lines of the README's first sh block after `marker`, continuation lines
    joined."""
    text = README.read_text()
    assert marker in text, f"README.md lost the sentence {marker!r} that introduces its commands"
    block = text.split(marker, 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    lines = block.replace("\\\n", " ").splitlines()
    return [line.strip() for line in lines if line.strip().startswith(("grpcurl ", "grpc-health-probe "))]


def documented_commands() -> list[str]:
    """The commands of the README's "Try it" block: each runs on its own."""
    return _commands_after("grpcurl needs no proto files")


def walk_through_commands() -> list[str]:
    """The commands of the README's user-tool walk-through: each needs the ones before it."""
    return _commands_after(WALK_THROUGH)


def asset_walk_through_commands() -> list[str]:
    """The commands of the README's AssetService walk-through: each needs the ones before it."""
    return _commands_after(ASSET_WALK_THROUGH)


def test_the_readme_documents_every_rpc_and_both_health_checks():
    documented = documented_commands() + walk_through_commands() + asset_walk_through_commands()
    commands = "\n".join(documented)
    services = [tool_service_pb2.DESCRIPTOR.services_by_name["ToolService"],
                log_service_pb2.DESCRIPTOR.services_by_name["LogService"],
                user_tool_service_pb2.DESCRIPTOR.services_by_name["UserToolService"],
                asset_service_pb2.DESCRIPTOR.services_by_name["AssetService"]]
    for service in services:
        for method in service.methods:
            assert f"{service.full_name}/{method.name}" in commands, f"no grpcurl command for {method.name}"
    probes = [c.split("#")[0].split() for c in documented if c.startswith("grpc-health-probe")]
    assert ["grpc-health-probe", "-addr", DOCUMENTED_ADDRESS] in probes  # overall
    for service in services:  # and per service
        assert ["grpc-health-probe", "-addr", DOCUMENTED_ADDRESS, "-service", service.full_name] in probes


@pytest.mark.parametrize("command", documented_commands())
@pytest.mark.server
@pytest.mark.slow
async def test_each_documented_command_runs_as_written(command):
    # A real `toolhost serve` on its bundled catalog, as after `make run` (which opens loopback to the network
    # tools, for the tcp_port_check line); its log is what LogService reads.
    server = ServerProcess(env={"TOOLHOST_EGRESS_OPEN": "127.0.0.0/8,::1/128"})
    await server.start()
    try:
        await run_documented(command, server.target)
    finally:
        await server.stop()


@pytest.mark.server
@pytest.mark.slow
async def test_the_user_tool_walk_through_runs_as_written():
    # In order, on one fresh `toolhost serve`: create, call, update, list the versions, restore, ... delete.
    server = ServerProcess()
    await server.start()
    try:
        for command in walk_through_commands():
            await run_documented(command, server.target)
    finally:
        await server.stop()


@pytest.mark.server
@pytest.mark.slow
async def test_the_asset_walk_through_runs_as_written():
    # In order, on one fresh `toolhost serve`: create, get (another case), list, update, import (checked only), delete.
    server = ServerProcess()
    await server.start()
    try:
        for command in asset_walk_through_commands():
            await run_documented(command, server.target)
    finally:
        await server.stop()


async def run_documented(command: str, target: str) -> None:
    # As written, but for the address: the test's server listens on a free port, not on the default 50051.
    argv = [word.replace(DOCUMENTED_ADDRESS, target) for word in shlex.split(command, comments=True)]
    argv[0] = tool_binary(argv[0])
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    if "until interrupted" in command:
        # A following stream: it has answered once something arrived; then it is interrupted, as documented.
        assert process.stdout is not None
        first = await asyncio.wait_for(process.stdout.readline(), 15)
        process.terminate()
        await process.wait()
        assert first.strip() == b"{", command
        return
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, (command, err.decode())
    if command.startswith("grpc-health-probe"):
        assert b"status: SERVING" in out + err  # the probe reports on stderr
    else:
        assert out.strip(), command
