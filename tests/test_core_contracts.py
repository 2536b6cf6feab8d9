"""Contracts of the core against a real server: an internal error's incident id, a WatchTools stream that fell
too far behind, reloads one at a time, and the hop counter of forwarded calls."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import uuid
from pathlib import Path
from typing import Any

import grpc
import pytest

import toolhost
from toolhost.v1 import tool_service_pb2, tool_service_pb2_grpc
from toolhost_server.api.remote_client import HOPS_METADATA_KEY
from toolhost_server.tools.base import ToolOutput

from helpers.catalogs import versioned_tool, write_tool
from helpers.servers import TEST_ENTRYPOINT_MODULES, RunningServer
from helpers.status import error_details
from helpers.waiting import HANG_GUARD_SECONDS, until, within

RELOAD = tool_service_pb2.ReloadRequest()


# --- an unexpected exception in the server ---------------------------------------------------------------------


class _TextThatBreaksTheServer(str):
    """Text output on which the server's own code fails (encoding it to cap its size): an exception raised
    outside the tool, which the runner does not turn into TOOL_EXCEPTION."""

    marker = ""

    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        raise RuntimeError(f"server bug near {self.marker} (connecting with password=hunter2-{self.marker})")


def output_the_server_fails_on(marker: str) -> ToolOutput:
    """Entrypoint `test_core_contracts:output_the_server_fails_on`."""
    text = _TextThatBreaksTheServer("an output")
    text.marker = marker
    return ToolOutput(text=text)


FAILING_SERVER_TOOL = (
    "name: breaks_the_server\ndescription: Returns an output the server fails on.\n"
    "runner: {type: python, entrypoint: 'test_core_contracts:output_the_server_fails_on'}\n"
    "parameters: [{name: marker, type: string, required: true}]\n")


async def failing_call(server: RunningServer, method: str, marker: str) -> grpc.aio.AioRpcError:
    arguments = json.dumps({"marker": marker})
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        if method == "CallTool":
            await server.stub.CallTool(
                tool_service_pb2.CallToolRequest(name="breaks_the_server", arguments_json=arguments))
        else:
            async for _ in server.stub.StreamCallTool(
                    tool_service_pb2.StreamCallToolRequest(name="breaks_the_server", arguments_json=arguments)):
                pass
    return caught.value


@pytest.mark.parametrize("method", ["CallTool", "StreamCallTool"])
async def test_an_unexpected_exception_is_internal_with_an_incident_id_and_none_of_its_text(
        start_server, tmp_path, method):
    write_tool(tmp_path, "breaks_the_server", FAILING_SERVER_TOOL)
    server = await start_server(catalog_dirs=[tmp_path])
    marker = f"marker-{uuid.uuid4().hex}"
    error = await failing_call(server, method, marker)

    assert error.code() == grpc.StatusCode.INTERNAL
    found = re.fullmatch(r"internal error \(incident ([0-9a-f]{12})\); the server log has the detail",
                         error.details() or "")
    assert found, error.details()
    incident = found.group(1)
    info = error_details(error)[0]
    assert (info.reason, info.domain, dict(info.metadata)) == (
        "INTERNAL", "toolhost", {"method": method, "incident": incident})
    # Nothing of the exception reaches the caller: not its text, not its type, in no detail or trailer.
    for key, value in error.trailing_metadata() or ():
        data = value if isinstance(value, bytes) else str(value).encode()
        for leak in (marker, "hunter2", "RuntimeError"):
            assert leak.encode() not in data, (key, leak)
    assert "RuntimeError" not in (error.details() or "")

    # The server's log has the incident with the traceback (its secret redacted, as every log line).
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS) as client:
        page = await client.query_logs_page(text=incident)
    [record] = page.records
    assert record.level == "ERROR" and record.message == f"internal error in {method} (incident {incident})"
    traceback = record.fields["exception"]
    assert "Traceback" in traceback and f"RuntimeError: server bug near {marker}" in traceback
    assert "hunter2" not in traceback


# --- a WatchTools stream far behind ------------------------------------------------------------------------------

# A client that reads nothing soon stops the server's sends: its HTTP/2 flow-control window stays small (no
# automatic growth, 1 KiB ahead) instead of the megabytes gRPC lets it buffer by default.
SMALL_WINDOW = [("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 1024)]
DROPPED = "dropping a WatchTools stream that fell"
# The server keeps this many generations for a watcher (registry._Watcher); the rest wait in flow control.
WATCHER_BUFFER = 256


def toggled_tool(version: int) -> str:
    return (f"name: toggled\ndescription: Version {version}.\n"
            "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:greet'}\n"
            "parameters: [{name: name, type: string, required: true}]\n")


async def read_to_the_end(stream: Any) -> list[tool_service_pb2.WatchToolsResponse]:
    messages = []
    while (message := await stream.read()) is not grpc.aio.EOF:
        messages.append(message)
    return messages


async def fall_behind(server: RunningServer, catalog: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Make generations (an edit and a Reload each) until the server says it dropped a watcher."""
    for version in range(1, 10 * WATCHER_BUFFER):
        write_tool(catalog, "toggled", toggled_tool(version))
        report = await server.stub.Reload(RELOAD)
        assert list(report.changed) == ["toggled"]
        if any(DROPPED in record.getMessage() for record in caplog.records):
            return
    raise AssertionError(f"no watcher was dropped after {10 * WATCHER_BUFFER} generations")


async def test_a_watch_stream_far_behind_ends_and_a_new_one_starts_from_the_current_generation(
        start_server, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="toolhost.registry")
    write_tool(tmp_path, "toggled", toggled_tool(0))
    server = await start_server(catalog_dirs=[tmp_path])
    async with grpc.aio.insecure_channel(server.target, options=SMALL_WINDOW) as channel:
        stub = tool_service_pb2_grpc.ToolServiceStub(channel)
        behind = stub.WatchTools(tool_service_pb2.WatchToolsRequest())
        initial = await within(behind.read(), "the current generation")
        await fall_behind(server, tmp_path, caplog)
        [dropped] = [r.getMessage() for r in caplog.records if DROPPED in r.getMessage()]
        assert dropped == f"{DROPPED} {WATCHER_BUFFER} generations behind"

        received = await within(read_to_the_end(behind), "the end of the dropped stream")
        # It ends as a stream ends at shutdown, with what it was sent before (not every generation since).
        assert await behind.code() == grpc.StatusCode.OK
        current = server.toolhost.registry.snapshot.generation
        assert received and received[0].generation == initial.generation + 1
        assert received[-1].generation < current
        assert all(list(m.changed) == ["toggled"] for m in received)

        # The client reconnects, as the registry expects: the new stream starts from the current state.
        again = stub.WatchTools(tool_service_pb2.WatchToolsRequest())
        fresh = await within(again.read(), "the current generation on the new stream")
        assert (fresh.generation, fresh.count) == (current, len(server.toolhost.registry.snapshot))
        assert sorted(fresh.added) == list(server.toolhost.registry.snapshot.names)
        again.cancel()


async def test_a_watch_stream_far_behind_loses_no_generation_before_it_ends(start_server, tmp_path, caplog):
    # WatchTools promises that applying the messages in order gives the tool set: what a dropped stream sent
    # before its end must be every generation from the first up to its last, a state the client really had.
    caplog.set_level(logging.WARNING, logger="toolhost.registry")
    write_tool(tmp_path, "toggled", toggled_tool(0))
    server = await start_server(catalog_dirs=[tmp_path])
    async with grpc.aio.insecure_channel(server.target, options=SMALL_WINDOW) as channel:
        behind = tool_service_pb2_grpc.ToolServiceStub(channel).WatchTools(tool_service_pb2.WatchToolsRequest())
        initial = await within(behind.read(), "the current generation")
        await fall_behind(server, tmp_path, caplog)
        received = await within(read_to_the_end(behind), "the end of the dropped stream")
    generations = [initial.generation, *(m.generation for m in received)]
    assert generations == list(range(initial.generation, generations[-1] + 1))


# --- reloads one at a time ---------------------------------------------------------------------------------------


class LoadGate:
    """Holds a catalog load at the import of a python runner's module until the test releases it."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def hold(self) -> None:
        self.entered.set()
        if not self.release.wait(HANG_GUARD_SECONDS):
            raise RuntimeError("the test never released the held load")


LOAD_GATES: dict[str, LoadGate] = {}


def reloads_under_way() -> int:
    """The reloads the in-process server is doing or waiting to do (each runs as a task on this loop)."""
    return sum(1 for task in asyncio.all_tasks()
               if getattr(task.get_coro(), "__qualname__", "") == "Reloader._reload")


async def test_concurrent_reloads_run_one_at_a_time_in_the_order_asked(start_server, tmp_path, monkeypatch):
    # The first reload loads a catalog whose module import blocks until released. A second reload, asked for
    # after the catalog changed again, must wait for the first and then load the newer catalog: the last
    # reload asked for decides what is served. Were the loads to overlap, the second would finish first and
    # the first would then swap the older catalog back in.
    key = uuid.uuid4().hex
    LOAD_GATES[key] = gate = LoadGate()
    modules = tmp_path / "modules"
    modules.mkdir()
    module = f"held_load_{key}"
    (modules / f"{module}.py").write_text(
        f"import test_core_contracts\ntest_core_contracts.LOAD_GATES[{key!r}].hold()\n"
        "def greet(name):\n    return f'Hello, {name}.'\n")  # defined here: a re-export is no entrypoint
    monkeypatch.syspath_prepend(str(modules))
    catalog = tmp_path / "catalog"
    write_tool(catalog, "versioned", versioned_tool(0))
    server = await start_server(catalog_dirs=[catalog], python_entrypoint_modules=(*TEST_ENTRYPOINT_MODULES, module))
    start = server.toolhost.registry.snapshot.generation
    watch = server.stub.WatchTools(tool_service_pb2.WatchToolsRequest())
    assert (await within(watch.read(), "the current generation")).generation == start

    write_tool(catalog, "versioned", versioned_tool(1, module))
    first = asyncio.ensure_future(server.stub.Reload(RELOAD))
    try:
        assert await asyncio.to_thread(gate.entered.wait, HANG_GUARD_SECONDS), "the first load never started"
        write_tool(catalog, "versioned", versioned_tool(2))
        second = asyncio.ensure_future(server.stub.Reload(RELOAD))
        await until(lambda: second.done() or reloads_under_way() == 2, "the second Reload reaching the reloader")
    finally:
        gate.release.set()
    first_report, second_report = await within(asyncio.gather(first, second), "both reloads")

    # Each reload made one generation, in the order they were asked for, and the watcher saw each once.
    assert (first_report.generation, second_report.generation) == (start + 1, start + 2)
    assert list(first_report.changed) == list(second_report.changed) == ["versioned"]
    seen = [await within(watch.read(), f"generation {start + n}") for n in (1, 2)]
    assert [(m.generation, list(m.changed)) for m in seen] == [(start + 1, ["versioned"]), (start + 2, ["versioned"])]
    watch.cancel()
    # What is served is the last catalog.
    assert server.toolhost.registry.snapshot.generation == start + 2
    response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(name="versioned"))
    assert (response.output, response.generation) == ("Hello, v2.", start + 2)


# --- the hop counter of forwarded calls --------------------------------------------------------------------------

MAX_HOPS = 3
ECHO = json.dumps({"text": "hop"})


async def call_with_hops(server: RunningServer, method: str, metadata: tuple[tuple[str, str], ...]) -> None:
    """Run echo with this metadata; raises the AioRpcError of a refusal."""
    if method == "CallTool":
        response = await server.stub.CallTool(
            tool_service_pb2.CallToolRequest(name="echo", arguments_json=ECHO), metadata=metadata)
    else:
        events = [event async for event in server.stub.StreamCallTool(
            tool_service_pb2.StreamCallToolRequest(name="echo", arguments_json=ECHO), metadata=metadata)]
        response = events[-1].result
    assert response.success and response.output == "hop", response


def hops(*values: str) -> tuple[tuple[str, str], ...]:
    return tuple((HOPS_METADATA_KEY, value) for value in values)


# The server's reading of the counter (api/tool_service.py, _hops): a whole number; of repeated values the
# largest; anything else is the caller's mistake. Only servers send it; a caller that forges it can only make its
# own call refused.
RUNS = [
    pytest.param(hops(str(MAX_HOPS)), id="at-the-limit"),
    pytest.param(hops("0"), id="zero"),
    pytest.param(hops("1", "2"), id="repeated-within"),
]
MALFORMED = [
    pytest.param(hops(""), id="empty"),
    pytest.param(hops("two"), id="not-a-number"),
    pytest.param(hops("1.5"), id="fraction"),
    pytest.param(hops("0x10"), id="hexadecimal"),
    pytest.param(hops("-7"), id="negative"),
    pytest.param(hops(" 3"), id="padded"),
    pytest.param(hops("9" * 5000), id="thousands-of-digits"),
    pytest.param(hops("1", "x"), id="one-of-several"),
]
REFUSED = [
    pytest.param(hops(str(MAX_HOPS + 1)), id="over-the-limit"),
    pytest.param(hops(str(2**64)), id="huge"),
    pytest.param(hops("1", "99"), id="repeated-last-over"),
    pytest.param(hops("99", "1"), id="repeated-first-over"),
]


@pytest.mark.parametrize("method", ["CallTool", "StreamCallTool"])
@pytest.mark.parametrize("metadata", MALFORMED)
async def test_a_hop_counter_that_is_no_whole_number_is_invalid_argument(start_server, method, metadata):
    server = await start_server(max_hops=MAX_HOPS)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call_with_hops(server, method, metadata)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    assert error_details(caught.value)[0].reason == "INVALID_REQUEST"
    assert f"the {HOPS_METADATA_KEY} metadata must be a whole number" in (caught.value.details() or "")


@pytest.mark.parametrize("method", ["CallTool", "StreamCallTool"])
@pytest.mark.parametrize("metadata", RUNS)
async def test_a_hop_counter_within_the_limit_lets_the_call_run(start_server, method, metadata):
    server = await start_server(max_hops=MAX_HOPS)
    await call_with_hops(server, method, metadata)


@pytest.mark.parametrize("method", ["CallTool", "StreamCallTool"])
@pytest.mark.parametrize("metadata", REFUSED)
async def test_a_hop_counter_over_the_limit_is_failed_precondition(start_server, method, metadata):
    server = await start_server(max_hops=MAX_HOPS)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call_with_hops(server, method, metadata)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION, caught.value.details()
    assert error_details(caught.value)[0].reason == "HOP_LIMIT_EXCEEDED"
    assert f"(limit {MAX_HOPS})" in (caught.value.details() or "")
