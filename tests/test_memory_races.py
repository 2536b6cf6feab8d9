"""Races of the memory's changes on PostgreSQL, made certain rather than likely: the test holds a row lock, every
contender queues behind it (pg_stat_activity shows them waiting), then it lets go. Adds at the cap keep exactly the
cap; an add racing the structure's deletion is StructureNotFound (NOT_FOUND), not a foreign-key failure; two merges
of different fields into one record keep both."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import psycopg
import pytest
from sqlalchemy import URL

from toolhost_server.memory.errors import MemoryFull, StructureNotFound
from toolhost_server.memory.table import MemoryTable
from toolhost_server.store.database import Store

from helpers.memory import PEOPLE_SCHEMA
from helpers.waiting import until, within

pytestmark = pytest.mark.slow


@pytest.fixture
def table(postgres_url: URL) -> Iterator[MemoryTable]:
    store = Store(postgres_url)
    try:
        yield MemoryTable(store, max_records_per_structure=5)
    finally:
        store.close()


def _dsn(url: URL) -> str:
    return url.render_as_string(hide_password=False).replace("postgresql+psycopg", "postgresql")


def _waiting(url: URL) -> int:
    """The store's connections waiting on a lock."""
    with psycopg.connect(_dsn(url), autocommit=True) as watcher:
        row = watcher.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                              "AND application_name = 'toolhost' AND wait_event_type = 'Lock'").fetchone()
    return int(row[0]) if row else 0


async def _queued(url: URL, started: list[Future[Any]], what: str) -> None:
    """Wait until each started contender waits on a lock or has finished (it took no lock then)."""
    await until(lambda: _waiting(url) + sum(future.done() for future in started) == len(started), what)


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception as exc:  # the outcome itself is what the test compares
        return exc


async def test_adds_at_the_cap_keep_exactly_the_cap(table: MemoryTable, postgres_url: URL):
    table.create_structure("people", "", PEOPLE_SCHEMA, "test")
    for index in range(4):
        table.create_record("people", {"name": f"p{index}"}, "test")
    with ThreadPoolExecutor(max_workers=10) as pool, psycopg.connect(_dsn(postgres_url)) as holder:
        holder.execute("SELECT 1 FROM memory_structures WHERE name = 'people' FOR UPDATE")
        adds = [pool.submit(_outcome, lambda i=index: table.create_record("people", {"name": f"n{i}"}, "test"))
                for index in range(10)]
        await _queued(postgres_url, adds, "ten adds queued behind the structure's row")
        holder.rollback()
        outcomes = [await within(asyncio.wrap_future(add), "an add") for add in adds]
    assert sum(not isinstance(outcome, Exception) for outcome in outcomes) == 1, outcomes
    assert all(isinstance(outcome, MemoryFull) for outcome in outcomes if isinstance(outcome, Exception)), outcomes
    assert table.get_structure("people").record_count == 5


async def test_an_add_racing_the_structures_deletion_is_not_found(table: MemoryTable, postgres_url: URL):
    table.create_structure("people", "", PEOPLE_SCHEMA, "test")
    table.create_record("people", {"name": "Ada"}, "test")
    with ThreadPoolExecutor(max_workers=2) as pool, psycopg.connect(_dsn(postgres_url)) as holder:
        holder.execute("SELECT 1 FROM memory_structures WHERE name = 'people' FOR UPDATE")
        # The deletion queues first, so that it goes first once the row is free.
        deletion = pool.submit(_outcome, lambda: table.delete_structure("people", force=True))
        await _queued(postgres_url, [deletion], "the deletion queued behind the structure's row")
        add = pool.submit(_outcome, lambda: table.create_record("people", {"name": "Bob"}, "test"))
        await _queued(postgres_url, [deletion, add], "the add queued behind the deletion")
        holder.rollback()
        deleted = await within(asyncio.wrap_future(deletion), "the deletion")
        added = await within(asyncio.wrap_future(add), "the add")
    assert deleted == 1
    assert isinstance(added, StructureNotFound), added
    assert table.list_structures() == []


async def test_two_merges_of_different_fields_keep_both(table: MemoryTable, postgres_url: URL):
    table.create_structure("people", "", PEOPLE_SCHEMA, "test")
    record = table.create_record("people", {"name": "Ada"}, "test")
    with ThreadPoolExecutor(max_workers=2) as pool, psycopg.connect(_dsn(postgres_url)) as holder:
        holder.execute("SELECT 1 FROM memory_records WHERE id = %s FOR UPDATE", (record.id,))
        merges = [pool.submit(_outcome, lambda data=data: table.update_record("people", record.id, data, "merge",
                                                                              "test"))
                  for data in ({"age": 36}, {"tags": ["math"]})]
        await _queued(postgres_url, merges, "both merges queued behind the record's row")
        holder.rollback()
        for merge in merges:
            outcome = await within(asyncio.wrap_future(merge), "a merge")
            assert not isinstance(outcome, Exception), outcome
    with psycopg.connect(_dsn(postgres_url)) as reader:
        stored = reader.execute("SELECT data FROM memory_records WHERE id = %s", (record.id,)).fetchone()
    assert stored is not None and stored[0] == {"name": "Ada", "age": 36, "tags": ["math"]}
