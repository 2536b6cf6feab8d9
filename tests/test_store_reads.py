"""Store.read on SQLite and PostgreSQL: a transaction that only reads sees one snapshot, lets a writer commit
while it is open (on SQLite it is deferred, not BEGIN IMMEDIATE), cannot write, and stops a statement still running
at its deadline (SQLite's progress handler, PostgreSQL's statement_timeout per statement); its connection goes back
to the pool able to write and without the bound."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from sqlalchemy import URL, Column, Connection, Integer, MetaData, Table, func, insert, select, text

from toolhost_server.store.database import Store
from toolhost_server.store.errors import StoreError, StoreUnavailableError

# A table of the test's own, beside the store's: what it holds is all these tests look at.
PROBES = Table("read_probes", MetaData(), Column("value", Integer, nullable=False))
# Runs until stopped, on both databases.
ENDLESS = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r"
# Ends by itself, after far more than SQLITE_DEADLINE_CHECK_STEPS steps: a bound left behind would stop it.
LONG_BUT_FINITE = ("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 200000) "
                   "SELECT count(*) FROM r")


@pytest.fixture
def store(database: URL) -> Iterator[Store]:
    opened = Store(database)
    with opened.begin() as connection:
        PROBES.create(connection)
    yield opened
    opened.close()


def probes(connection: Connection) -> int:
    return int(connection.execute(select(func.count()).select_from(PROBES)).scalar_one())


def test_a_read_lets_a_writer_commit_while_it_is_open_and_keeps_its_snapshot(store: Store):
    with store.read() as reading:
        assert probes(reading) == 0
        # A read holding SQLite's write lock (BEGIN IMMEDIATE) would make this wait its busy timeout, then fail.
        with store.begin() as writing:
            writing.execute(insert(PROBES).values(value=1))
        assert probes(reading) == 0
    with store.read() as reading:
        assert probes(reading) == 1


def test_a_read_cannot_write_and_its_connection_writes_again_afterwards(store: Store):
    with pytest.raises(StoreError), store.read() as reading:
        reading.execute(insert(PROBES).values(value=1))
    with store.begin() as writing:
        writing.execute(insert(PROBES).values(value=2))
    with store.read() as reading:
        assert list(reading.execute(select(PROBES.c.value)).scalars()) == [2]


def test_a_statement_still_running_at_the_deadline_is_stopped_and_the_bound_ends_with_the_read(store: Store):
    with pytest.raises(StoreUnavailableError, match="stopped a statement that was still running at its deadline"), \
            store.read(deadline=time.monotonic() + 0.05) as reading:
        reading.execute(text(ENDLESS))
    # The same pooled connection, its deadline long past: no bound may be left on it.
    with store.read() as reading:
        assert reading.execute(text(LONG_BUT_FINITE)).scalar_one() == 200000
    with store.begin() as writing:
        assert writing.execute(text(LONG_BUT_FINITE)).scalar_one() == 200000
        writing.execute(insert(PROBES).values(value=3))


def test_a_deadline_already_past_stops_the_first_long_statement(store: Store):
    with pytest.raises(StoreUnavailableError, match="deadline"), store.read(deadline=time.monotonic()) as reading:
        reading.execute(text(LONG_BUT_FINITE))


@pytest.mark.parametrize("database", ["postgresql"], indirect=True)
def test_each_postgresql_statement_gets_only_what_is_left_of_the_deadline(store: Store):
    seconds = 1000
    with store.read(deadline=time.monotonic() + seconds) as reading:
        bounds = [int(reading.execute(text(
            "SELECT setting FROM pg_settings WHERE name = 'statement_timeout'")).scalar_one()) for _ in range(3)]
    assert all(0 < bound <= seconds * 1000 for bound in bounds), bounds
    assert bounds == sorted(bounds, reverse=True), bounds
    # SET LOCAL: the next transaction on the connection has no bound.
    with store.begin() as writing:
        assert writing.execute(text("SHOW statement_timeout")).scalar_one() == "0"
