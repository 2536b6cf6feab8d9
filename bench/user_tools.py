"""User tools (issue 20) across replicas: how soon a change made on one server shows on another sharing the
PostgreSQL database, and what a change costs the server it is made on.

  user_tool_propagation_p50  CreateUserTool on server A, timed from the call until server B's WatchTools stream
                             lists the new tool (B hears PostgreSQL's NOTIFY), against the same with B unable to
                             listen, so that only its 2 s poll brings the change. Target: under 1 s, "promptly".
  user_tool_propagation_max  the largest of those rounds, each side. Target: under 1 s as well.
  create_user_tool_rpc       CreateUserTool's round trip: it returns once the tool is served by that server (the
                             next call there sees it, checked after every call), against a ListTools round trip
                             on the same server. Reported.

    .venv/bin/python -m bench.user_tools [--quick]      (from the repository root)

A throwaway PostgreSQL cluster (tests/postgres_cluster.py) with two databases, one per side; on each, two servers
built in this process as the tests build them (create_toolhost + GrpcServer on 127.0.0.1 port 0), reached over
gRPC. The polling side's listening connections are cut (pg_terminate_backend, as a failover does) with the
reconnection put off past the run: the state propagation.py documents for a lost connection, polling every
POLL_SECONDS. Each round waits a random 0 - POLL_SECONDS first, on both sides, so that changes land at random
points of the poll's period as real ones do.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
import secrets
import shutil
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
from google.protobuf import json_format, struct_pb2

from bench.harness import Figure, Target, interleave_async, run_standalone
from tests.postgres_cluster import PostgresCluster, throwaway_cluster
from toolhost.v1 import tool_service_pb2, tool_service_pb2_grpc, user_tool_service_pb2, user_tool_service_pb2_grpc
from toolhost_server.api.server import GrpcServer, create_toolhost
from toolhost_server.app import Toolhost
from toolhost_server.config import Config
from toolhost_server.user_tools import propagation

COMMAND = 'make bench BENCH_ARGS="--only user_tools"'
PROMPT_MS = 1000.0  # what "promptly" is taken to mean: a person who made the change would not wait on it
LISTENER = "toolhost-user-tools"  # propagation.py's application_name for its LISTEN connection
SCHEMA = {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]}


@dataclass(frozen=True)
class Plan:
    rounds: int  # propagation rounds per side
    rpc_rounds: int  # rounds of the CreateUserTool figure
    calls: int  # consecutive calls per round and side there; the round's figure is their median


FULL = Plan(rounds=15, rpc_rounds=9, calls=10)
QUICK = Plan(rounds=3, rpc_rounds=3, calls=3)


@dataclass
class Replica:
    """One in-process server on the shared database, with its stubs."""

    toolhost: Toolhost
    grpc_server: GrpcServer
    channel: grpc.aio.Channel

    @property
    def tools(self) -> tool_service_pb2_grpc.ToolServiceStub:
        return tool_service_pb2_grpc.ToolServiceStub(self.channel)

    @property
    def user_tools(self) -> user_tool_service_pb2_grpc.UserToolServiceStub:
        return user_tool_service_pb2_grpc.UserToolServiceStub(self.channel)

    async def close(self) -> None:
        await self.channel.close()
        self.toolhost.registry.close()
        await self.grpc_server.stop(0)
        await self.toolhost.close()


async def start_replica(database_url: str, data_dir: Path) -> Replica:
    """A server as the tests' start_server builds one: no catalog watching, its own data directory."""
    config = dataclasses.replace(Config(), grpc_address="127.0.0.1:0", watch_catalog=False, data_dir=str(data_dir),
                                 database_url=database_url)
    toolhost = create_toolhost(config)
    await toolhost.start()
    server = GrpcServer(toolhost)
    port = await server.start()
    return Replica(toolhost, server, grpc.aio.insecure_channel(f"127.0.0.1:{port}"))


class Arrivals:
    """Reads a server's WatchTools stream in the background and notes when each tool first appears in it."""

    def __init__(self, replica: Replica) -> None:
        self._stream = replica.tools.WatchTools(tool_service_pb2.WatchToolsRequest())
        self._waiting: dict[str, asyncio.Future[float]] = {}
        self._first = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for change in self._stream:
            seen = time.perf_counter()
            if not self._first.done():
                self._first.set_result(seen)
            for name in change.added:
                waiting = self._waiting.get(name)
                if waiting is not None and not waiting.done():
                    waiting.set_result(seen)

    async def ready(self) -> None:
        """Until the stream's first message (every tool): from then on each change is a message."""
        async with asyncio.timeout(30):
            await asyncio.shield(self._first)

    def expect(self, name: str) -> asyncio.Future[float]:
        """When `name` is added: asked for before the change is made, so that no arrival is missed."""
        self._waiting[name] = asyncio.get_running_loop().create_future()
        return self._waiting[name]

    async def close(self) -> None:
        self._stream.cancel()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
            await self._task


def user_tool(slug: str) -> user_tool_service_pb2.UserTool:
    schema = struct_pb2.Struct()
    json_format.ParseDict(SCHEMA, schema)
    return user_tool_service_pb2.UserTool(slug=slug, description="Greets someone (a benchmark's tool).",
                                          script='echo "hello $TOOL_ARG_WHO"', input_schema=schema)


async def create(replica: Replica, slug: str) -> None:
    await replica.user_tools.CreateUserTool(user_tool_service_pb2.CreateUserToolRequest(user_tool=user_tool(slug)))


def listeners(cluster: PostgresCluster, database: str) -> int:
    [(count,)] = cluster.execute(f"SELECT count(*) FROM pg_stat_activity WHERE datname = '{database}' "
                                 f"AND application_name = '{LISTENER}'")
    return int(count)


async def until_listeners(cluster: PostgresCluster, database: str, count: int) -> None:
    """Until `count` servers LISTEN on `database` (a connection shows in pg_stat_activity while it lives)."""
    # pg_stat_activity has no event to wait on; the backends come and go within milliseconds.
    async with asyncio.timeout(30):
        while True:
            if listeners(cluster, database) == count:
                return
            await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def pair(cluster: PostgresCluster, scratch: Path, side: str) -> AsyncIterator[tuple[Replica, Replica, str]]:
    """Servers A and B on a new database of the cluster, both listening; the database's name."""
    database = cluster.create_database()
    url = cluster.url(database).render_as_string(hide_password=False)
    first = await start_replica(url, scratch / f"{side}-a")
    second = await start_replica(url, scratch / f"{side}-b")
    try:
        await until_listeners(cluster, database, 2)
        yield first, second, database
    finally:
        await second.close()
        await first.close()


def ms(samples: Sequence[float]) -> list[float]:
    return [sample * 1e3 for sample in samples]


# -- the figures ----------------------------------------------------------------------------------------------


async def measure_propagation(plan: Plan, cluster: PostgresCluster, scratch: Path) -> list[Figure]:
    rng = random.Random(20)
    async with pair(cluster, scratch, "notify") as (notify_a, notify_b, _), \
            pair(cluster, scratch, "poll") as (poll_a, poll_b, poll_database):
        # NOTIFY unavailable on the polling side: its listening connections cut, no listening again in this run.
        propagation.RECONNECT_SECONDS = 24 * 3600.0
        cluster.execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{poll_database}' "
                        f"AND application_name = '{LISTENER}'")
        await until_listeners(cluster, poll_database, 0)
        notified, polled = Arrivals(notify_b), Arrivals(poll_b)
        try:
            await notified.ready()
            await polled.ready()
            creates: list[float] = []

            def side(writer: Replica, arrivals: Arrivals, label: str) -> Callable[[], Awaitable[float]]:
                async def round_() -> float:
                    # A random point of the poll's period (both sides alike): see the module's docstring.
                    await asyncio.sleep(rng.uniform(0, propagation.POLL_SECONDS))
                    slug = f"bench_{label}_{secrets.token_hex(4)}"
                    arrived = arrivals.expect(slug)
                    started = time.perf_counter()
                    await create(writer, slug)
                    creates.append(time.perf_counter() - started)
                    async with asyncio.timeout(60):
                        return await arrived - started
                return round_

            measured, baseline = await interleave_async(plan.rounds, side(notify_a, notified, "notify"),
                                                        side(poll_a, polled, "poll"))
            # Still polling: the cut connections did not come back during the rounds.
            assert listeners(cluster, poll_database) == 0, "the polling side listened again"
        finally:
            await notified.close()
            await polled.close()
    how = (f"CreateUserTool over gRPC on server A, timed from the call until server B's WatchTools stream lists "
           f"the tool (the call itself included: median {statistics.median(creates) * 1e3:.1f} ms); two "
           f"in-process servers per side on one PostgreSQL database each; B hears A's NOTIFY, against a B whose "
           f"listening connection was cut (no reconnection) so its {propagation.POLL_SECONDS:g} s poll brings the "
           f"change; each round starts at a random point of the poll's period; {plan.rounds} interleaved rounds")
    extra = {"notify_max_ms": max(measured) * 1e3, "polling_max_ms": max(baseline) * 1e3,
             "poll_seconds": propagation.POLL_SECONDS, "create_rpc_p50_ms": statistics.median(creates) * 1e3}
    baseline_name = f"NOTIFY unavailable: polling every {propagation.POLL_SECONDS:g} s"
    return [
        Figure.from_rounds(
            key="user_tool_propagation_p50", title="a user tool created on one server, seen by another (p50)",
            unit="ms", measured=ms(measured), baseline=ms(baseline), baseline_name=baseline_name,
            target=Target.value_at_most(PROMPT_MS), command=COMMAND, note=how, extra=extra),
        Figure.from_rounds(
            key="user_tool_propagation_max", title="a user tool created on one server, seen by another (max)",
            unit="ms", measured=[max(measured) * 1e3], baseline=[max(baseline) * 1e3], baseline_name=baseline_name,
            target=Target.value_at_most(PROMPT_MS), command=COMMAND,
            note=f"the slowest of the {plan.rounds} rounds of `user_tool_propagation_p50`, each side", extra=extra),
    ]


async def measure_create_rpc(plan: Plan, cluster: PostgresCluster, scratch: Path) -> Figure:
    database = cluster.create_database()
    server = await start_replica(cluster.url(database).render_as_string(hide_password=False), scratch / "rpc")
    try:
        made = 0

        async def creates() -> float:
            nonlocal made
            samples = []
            for _ in range(plan.calls):
                made += 1
                slug = f"bench_rpc_{made}"
                started = time.perf_counter()
                await create(server, slug)
                samples.append(time.perf_counter() - started)
                # Visible to the next call on that server: the RPC returned after the registry took the tool.
                got = await server.tools.GetTool(tool_service_pb2.GetToolRequest(name=slug))
                assert got.tool.name == slug, got
            return statistics.median(samples)

        async def lists() -> float:
            samples = []
            for _ in range(plan.calls):
                started = time.perf_counter()
                await server.tools.ListTools(tool_service_pb2.ListToolsRequest())
                samples.append(time.perf_counter() - started)
            return statistics.median(samples)

        await creates()  # warm-up: the first write opens the store's connections
        await lists()
        measured, baseline = await interleave_async(plan.rpc_rounds, creates, lists)
        tools = len((await server.tools.ListTools(tool_service_pb2.ListToolsRequest())).tools)
    finally:
        await server.close()
    return Figure.from_rounds(
        key="create_user_tool_rpc", title="CreateUserTool round trip, served on return", unit="ms",
        measured=ms(measured), baseline=ms(baseline), baseline_name="a ListTools round trip on the same server",
        target=None, command=COMMAND,
        note=(f"CreateUserTool over gRPC on a server with PostgreSQL (a transaction writing the tool and its first "
              f"version, the NOTIFY, then the server's own registry taking the tool before the RPC returns; a "
              f"GetTool after each call must find it); ListTools lists the server's tools ({tools} at the end); "
              f"{plan.rpc_rounds} interleaved rounds of {plan.calls} consecutive calls per side, each round's "
              f"median"))


def run(quick: bool) -> list[Figure]:
    plan = QUICK if quick else FULL
    scratch = Path(tempfile.mkdtemp(prefix="toolhost-bench-user-tools-"))
    reconnect = propagation.RECONNECT_SECONDS
    try:
        with throwaway_cluster() as cluster:

            async def measure_all() -> list[Figure]:
                figures = await measure_propagation(plan, cluster, scratch)
                figures.append(await measure_create_rpc(plan, cluster, scratch))
                return figures

            return asyncio.run(measure_all())
    finally:
        propagation.RECONNECT_SECONDS = reconnect
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    run_standalone("user_tools", run, __doc__)
