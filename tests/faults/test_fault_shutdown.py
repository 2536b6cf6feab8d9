"""Fault injection: a `toolhost serve` process stopped by SIGTERM under load, and killed by SIGKILL while it writes
its SQLite store.

Proves that SIGTERM with 32 calls in flight, each finishing within the shutdown grace, lets every one of them
complete with its own answer while new calls are refused with UNAVAILABLE, and that the process then exits 0; and
that a server killed with SIGKILL while its audit and log records are being written leaves a store that opens
clean: PRAGMA integrity_check says ok, a new server starts on it and writes to it, and every row committed before
the kill is still there.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import grpc
import pytest

from toolhost.v1 import tool_service_pb2, tool_service_pb2_grpc

from helpers.catalogs import write_tool
from helpers.log_drain import draining
from helpers.servers import ServerProcess
from helpers.socket_gates import SocketGate, socket_gated_tool
from helpers.waiting import within

pytestmark = [pytest.mark.slow, pytest.mark.server]

IN_FLIGHT = 32


@pytest.fixture
async def servers() -> AsyncIterator[list[ServerProcess]]:
    started: list[ServerProcess] = []
    yield started
    for server in reversed(started):  # the first one's stop() removes the data directory the others share
        await server.stop()


def echo_request(text: str, call_id: str = "") -> tool_service_pb2.CallToolRequest:
    return tool_service_pb2.CallToolRequest(name="echo", arguments_json=json.dumps({"text": text}), call_id=call_id)


async def refused(stub: tool_service_pb2_grpc.ToolServiceStub) -> grpc.StatusCode:
    """Call echo until the server refuses a call; the code of that refusal."""
    while True:
        try:
            # A generous deadline: on a loaded machine a probe must not fail by DEADLINE_EXCEEDED.
            await stub.CallTool(echo_request("probe"), timeout=30)
        except grpc.aio.AioRpcError as exc:
            return exc.code()
        await asyncio.sleep(0.02)  # answered until the signal is handled; nothing announces that moment


async def test_sigterm_lets_32_calls_in_flight_finish_refuses_new_ones_and_exits_0(servers, tmp_path):
    async with SocketGate() as gate:
        write_tool(tmp_path, "gated", socket_gated_tool("gated"))
        server = ServerProcess("--catalog-dir", str(tmp_path), "--shutdown-grace-seconds", "60")
        servers.append(server)
        await server.start()
        assert server.process is not None
        async with grpc.aio.insecure_channel(server.target) as channel:
            stub = tool_service_pb2_grpc.ToolServiceStub(channel)
            in_flight = [asyncio.ensure_future(stub.CallTool(tool_service_pb2.CallToolRequest(
                name="gated", arguments_json=json.dumps({"gate": gate.path, "text": f"call {index}"}))))
                for index in range(IN_FLIGHT)]
            await within(gate.started(IN_FLIGHT), f"{IN_FLIGHT} calls inside the gated tool")
            server.process.send_signal(signal.SIGTERM)
            # The probe that meets the shutdown may be cancelled rather than refused (it reached the server as its
            # gRPC server stopped: see test_serve.py); every call made after that is refused.
            assert await within(refused(stub), "a refused call") in (grpc.StatusCode.UNAVAILABLE,
                                                                         grpc.StatusCode.CANCELLED)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.CallTool(echo_request("after the signal"), timeout=30)
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
            assert not any(call.done() for call in in_flight)  # still held at the gate, within the grace
            gate.release()
            responses = await within(asyncio.gather(*in_flight), "the calls in flight")
    assert [response.output for response in responses] == [f"call {index}" for index in range(IN_FLIGHT)]
    assert all(response.success for response in responses)
    assert await server.wait() == 0
    assert b"stopped" in server.log


def store_rows(database: Path) -> tuple[int, int]:
    """How many audit and log rows the SQLite store holds (a reader beside the server: WAL lets it)."""
    with closing(sqlite3.connect(database, timeout=30)) as connection:
        audit = connection.execute("SELECT count(*) FROM audit_records").fetchone()[0]
        logs = connection.execute("SELECT count(*) FROM logs").fetchone()[0]
    return audit, logs


async def rows_grow_past(database: Path, floor: tuple[int, int]) -> tuple[int, int]:
    """Wait until both tables hold more rows than `floor`: the server's writer announces nothing to the test."""
    while True:
        counts = await asyncio.to_thread(store_rows, database) if database.exists() else (0, 0)
        if counts[0] > floor[0] and counts[1] > floor[1]:
            return counts
        await asyncio.sleep(0.05)


async def keep_calling(stub: tool_service_pb2_grpc.ToolServiceStub, worker: int) -> None:
    index = 0
    while True:
        try:
            await stub.CallTool(echo_request("load", f"load-{worker}-{index}"), timeout=30)
        except grpc.aio.AioRpcError:
            return  # the server is gone
        index += 1


async def test_sigkill_while_the_store_is_written_leaves_a_sqlite_store_that_opens_clean(servers):
    server = ServerProcess("--log-database")
    servers.append(server)
    await server.start()
    assert server.process is not None
    database = Path(server.data_dir) / "toolhost.db"
    async with draining(server), grpc.aio.insecure_channel(server.target) as channel:
        stub = tool_service_pb2_grpc.ToolServiceStub(channel)
        load = [asyncio.ensure_future(keep_calling(stub, worker)) for worker in range(8)]
        # Two rounds of batches committed while calls keep coming: the writers are busy when the kill lands.
        first = await within(rows_grow_past(database, (0, 0)), "the first rows in the store")
        committed = await within(rows_grow_past(database, first), "more rows in the store")
        server.process.kill()
        await server.process.wait()
        await within(asyncio.gather(*load), "the callers to notice the server is gone")

    with closing(sqlite3.connect(database)) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    after_kill = await asyncio.to_thread(store_rows, database)
    assert after_kill[0] >= committed[0] and after_kill[1] >= committed[1]

    restarted = ServerProcess("--log-database", env={"TOOLHOST_DATA_DIR": server.data_dir})
    servers.append(restarted)
    await restarted.start()
    async with grpc.aio.insecure_channel(restarted.target) as channel:
        stub = tool_service_pb2_grpc.ToolServiceStub(channel)
        assert (await stub.CallTool(echo_request("after the restart", "after-restart"), timeout=30)).success
    await within(rows_grow_past(database, after_kill), "the restarted server's rows")
    with closing(sqlite3.connect(database, timeout=30)) as connection:
        assert connection.execute("SELECT count(*) FROM audit_records WHERE call_id = 'after-restart'").fetchone() \
            == (1,)
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
