"""Races of the memory's changes on PostgreSQL, made certain rather than likely: the test holds a row lock, every
contender queues behind it (pg_stat_activity shows them waiting), then it lets go. Adds at the cap keep exactly the
cap; an add racing the structure's deletion is StructureNotFound (NOT_FOUND), not a foreign-key failure; two merges
of different fields into one record keep both."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from sqlalchemy import URL

from toolhost_server.memory.errors import MemoryFull, StructureNotFound
from toolhost_server.memory.table import MemoryTable
from toolhost_server.store.database import Store

from helpers.lock_races import libpq_dsn, outcome_of, queued_behind_lock
from helpers.memory import PEOPLE_SCHEMA
from helpers.waiting import within

pytestmark = pytest.mark.slow


@pytest.fixture
def table(postgres_url: URL) -> Iterator[MemoryTable]:
    store = Store(postgres_url)
    try:
        yield MemoryTable(store, max_records_per_structure=5)
    finally:
        store.close()


async def test_adds_at_the_cap_keep_exactly_the_cap(table: MemoryTable, postgres_url: URL):
    table.create_structure("people", "", PEOPLE_SCHEMA, "test")
    for index in range(4):
        table.create_record("people", {"name": f"p{index}"}, "test")
    with ThreadPoolExecutor(max_workers=10) as pool, psycopg.connect(libpq_dsn(postgres_url)) as holder:
        holder.execute("SELECT 1 FROM memory_structures WHERE name = 'people' FOR UPDATE")
        adds = [pool.submit(outcome_of, lambda i=index: table.create_record("people", {"name": f"n{i}"}, "test"))
                for index in range(10)]
        await queued_behind_lock(postgres_url, adds, "ten adds queued behind the structure's row")
        holder.rollback()
        outcomes = [await within(asyncio.wrap_future(add), "an add") for add in adds]
    assert sum(not isinstance(outcome, Exception) for outcome in outcomes) == 1, outcomes
    assert all(isinstance(outcome, MemoryFull) for outcome in outcomes if isinstance(outcome, Exception)), outcomes
    assert table.get_structure("people").record_count == 5


async def test_an_add_racing_the_structures_deletion_is_not_found(table: MemoryTable, postgres_url: URL):
    table.create_structure("people", "", PEOPLE_SCHEMA, "test")
    table.create_record("people", {"name": "Ada"}, "test")
    with ThreadPoolExecutor(max_workers=2) as pool, psycopg.connect(libpq_dsn(postgres_url)) as holder:
        holder.execute("SELECT 1 FROM memory_structures WHERE name = 'people' FOR UPDATE")
        # The deletion queues first, so that it goes first once the row is free.
        deletion = pool.submit(outcome_of, lambda: table.delete_structure("people", force=True))
        await queued_behind_lock(postgres_url, [deletion], "the deletion queued behind the structure's row")
        add = pool.submit(outcome_of, lambda: table.create_record("people", {"name": "Bob"}, "test"))
        await queued_behind_lock(postgres_url, [deletion, add], "the add queued behind the deletion")
        holder.rollback()
        deleted = await within(asyncio.wrap_future(deletion), "the deletion")
        added = await within(asyncio.wrap_future(add), "the add")
    assert deleted == 1
    assert isinstance(added, StructureNotFound), added
    assert table.list_structures() == []


async def test_two_merges_of_different_fields_keep_both(table: MemoryTable, postgres_url: URL):
    table.create_structure("people", "", PEOPLE_SCHEMA, "test")
    record = table.create_record("people", {"name": "Ada"}, "test")
    with ThreadPoolExecutor(max_workers=2) as pool, psycopg.connect(libpq_dsn(postgres_url)) as holder:
        holder.execute("SELECT 1 FROM memory_records WHERE id = %s FOR UPDATE", (record.id,))
        merges = [pool.submit(outcome_of, lambda data=data: table.update_record("people", record.id, data, "merge",
                                                                              "test"))
                  for data in ({"age": 36}, {"tags": ["math"]})]
        await queued_behind_lock(postgres_url, merges, "both merges queued behind the record's row")
        holder.rollback()
        for merge in merges:
            outcome = await within(asyncio.wrap_future(merge), "a merge")
            assert not isinstance(outcome, Exception), outcome
    with psycopg.connect(libpq_dsn(postgres_url)) as reader:
        stored = reader.execute("SELECT data FROM memory_records WHERE id = %s", (record.id,)).fetchone()
    assert stored is not None and stored[0] == {"name": "Ada", "age": 36, "tags": ["math"]}
