"""Fault injection: the store's PostgreSQL stopped (`pg_ctl stop -m fast`) and started again under a server.

Proves that calls go on while the database is down; that the audit and log records of those calls wait in
memory, within store_buffer_bytes, and are all written once the database is back, each exactly once (a record
may be written twice only after a commit whose outcome was unknown, and each such record is counted: see
batching.py); and that beyond the bound the oldest records are dropped, with the loss counted in /metrics
(toolhost_store_records_dropped_total) and logged. The cluster is this module's own, so that stopping it
disturbs no other test.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator

import httpx
import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from toolhost_server.web.app import create_http_app
from toolhost_server.web.server import HttpServer

from helpers.calls import call
from helpers.waiting import until, within
from postgres_cluster import PostgresCluster, throwaway_cluster

pytestmark = pytest.mark.slow

_AUDIT_LINE_CALL_ID = re.compile(r"call_id=(\S+)")


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresCluster]:
    with throwaway_cluster() as running:
        yield running


@pytest.fixture
def database(cluster: PostgresCluster) -> Iterator[str]:
    """A new database of the module's cluster; the cluster runs again afterwards, whatever the test did."""
    name = cluster.create_database()
    yield name
    if not accepts_connections(cluster):
        cluster.start()
    cluster.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def accepts_connections(cluster: PostgresCluster) -> bool:
    try:
        cluster.execute("SELECT 1")
    except psycopg.OperationalError:
        return False
    return True


async def rows(cluster: PostgresCluster, database: str, query: str) -> list[tuple]:
    return await asyncio.to_thread(cluster.execute, query, database)


async def audited_call_ids(cluster: PostgresCluster, database: str) -> Counter[str]:
    return Counter(dict(await rows(cluster, database, "SELECT call_id, count(*) FROM audit_records GROUP BY call_id")))


async def logged_call_ids(cluster: PostgresCluster, database: str) -> Counter[str]:
    """The call ids of the audit lines in the logs table, each as often as it is there."""
    messages = await rows(cluster, database,
                          "SELECT message FROM logs WHERE logger = 'toolhost.audit' AND message LIKE 'call tool=%'")
    return Counter(_AUDIT_LINE_CALL_ID.search(message).group(1) for (message,) in messages)


async def until_stored(read: Callable[[], Awaitable[Counter[str]]], holds: Callable[[Counter[str]], bool],
                       what: str) -> Counter[str]:
    """Read the table until `holds` is true of what it holds: the rows arrive from the server's writer, which
    announces nothing to the test."""
    async def poll() -> Counter[str]:
        while not holds(found := await read()):
            await asyncio.sleep(0.1)
        return found

    return await within(poll(), what)


def exactly_once_or_counted(stored: Counter[str], expected: list[str], possibly_duplicated: int) -> None:
    """Every expected call is stored; more than once only as often as the writer counted a commit it could not
    be sure of."""
    assert set(stored) == set(expected)
    assert sum(stored.values()) - len(expected) <= possibly_duplicated
    if possibly_duplicated == 0:
        assert all(count == 1 for count in stored.values()), stored


async def test_calls_go_on_while_postgresql_is_down_and_every_record_is_written_once_it_is_back(
        start_server, cluster, database, caplog):
    caplog.set_level(logging.INFO, logger="toolhost.audit")  # the audit lines, which the logs table gets too
    url = cluster.url(database).render_as_string(hide_password=False)
    server = await start_server(database_url=url, log_database=True)
    audit_writer = server.toolhost.audit.writer
    log_handler = server.toolhost.logs.database_handler
    assert audit_writer is not None and log_handler is not None

    before = [f"before-{index}" for index in range(10)]
    for call_id in before:
        assert (await call(server, "echo", text="x", call_id=call_id)).success
    await until_stored(lambda: audited_call_ids(cluster, database), lambda ids: set(before) <= set(ids),
                       "the audit rows of the calls made before the stop")

    await asyncio.to_thread(cluster.stop, "fast")
    during = [f"during-{index}" for index in range(40)]
    responses = await asyncio.gather(*(call(server, "echo", text="x", call_id=call_id) for call_id in during))
    assert all(response.success for response in responses)
    # The writers tried and failed: the records are held in memory, not written by luck after the restart.
    await until(lambda: audit_writer.write_errors > 0 and log_handler.writer.write_errors > 0,
                "both writers' attempts to fail while the database is down")
    assert "cannot write" in caplog.text

    await asyncio.to_thread(cluster.start)
    every_call = before + during
    audited = await until_stored(lambda: audited_call_ids(cluster, database),
                                 lambda ids: set(every_call) <= set(ids), "every call's audit row after the restart")
    logged = await until_stored(lambda: logged_call_ids(cluster, database),
                                lambda ids: set(every_call) <= set(ids), "every call's audit line in the logs table")
    for writer, stored in ((audit_writer, audited), (log_handler.writer, logged)):
        stats = writer.stats()
        assert (stats.dropped, stats.rejected, stats.abandoned) == (0, 0, 0)
        exactly_once_or_counted(stored, every_call, stats.uncertain)
    assert "works again" in caplog.text


def metric_samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


async def test_beyond_store_buffer_bytes_the_oldest_records_are_dropped_counted_in_metrics_and_logged(
        start_server, cluster, database, caplog):
    url = cluster.url(database).render_as_string(hide_password=False)
    # Room for a few dozen audit records (each is estimated at under 1 KiB).
    server = await start_server(database_url=url, store_buffer_bytes=16 * 1024)
    writer = server.toolhost.audit.writer
    assert writer is not None
    http = HttpServer(create_http_app(server.toolhost.metrics, lambda: True), "127.0.0.1:0")
    port = await http.start()
    try:
        await asyncio.to_thread(cluster.stop, "fast")
        made = [f"call-{index:03d}" for index in range(150)]
        for call_id in made:  # one after another: the oldest are the first made
            assert (await call(server, "echo", text="x", call_id=call_id)).success
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            scraped = metric_samples((await client.get("/metrics")).text)
    finally:
        await http.stop()
    dropped = writer.dropped
    assert dropped > 0
    assert scraped[("toolhost_store_records_dropped_total", (("reason", "buffer_full"), ("table", "audit_records")))] \
        == dropped
    assert 0 < scraped[("toolhost_store_buffered_bytes", (("table", "audit_records"),))] <= 16 * 1024
    assert "exceed store_buffer_bytes (16384 bytes): the oldest are dropped" in caplog.text

    await asyncio.to_thread(cluster.start)
    stored = await until_stored(lambda: audited_call_ids(cluster, database),
                                lambda ids: sum(ids.values()) >= len(made) - dropped,
                                "the audit rows that fitted in the buffer")
    exactly_once_or_counted(stored, [call_id for call_id in made if call_id in stored], writer.uncertain)
    assert len(stored) == len(made) - dropped
    assert made[-1] in stored  # the newest are kept: the oldest go first
    assert (writer.rejected, writer.abandoned) == (0, 0)
