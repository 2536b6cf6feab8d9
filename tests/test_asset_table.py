"""The asset inventory's table on SQLite and PostgreSQL: every filter (os a case-insensitive substring whose `%`,
`_` and `\\` are literal, name a glob, platform/site/tag whole values, all regardless of case, non-ASCII too),
counted by the database without reading rows and the tag filter by its index; keyset pages that never repeat or
skip an asset while the inventory changes; names unique regardless of case; updates under a row lock and creates
under the inventory's lock (races made certain on PostgreSQL); imports all or nothing, also when the database
refuses the last record; MAX_ASSETS; host lookup and close names; migration 7 -> 8 of an existing database.
search's page and total come from one snapshot, and a first page that is also the last is counted without a scan."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from sqlalchemy import URL, Engine, event, insert, inspect, select

from toolhost_server.assets import table as table_module
from toolhost_server.assets.model import Asset, AssetFilter, ImportSummary, WinrmProfile
from toolhost_server.assets.table import INVENTORY_LOCK_ID, AssetTable
from toolhost_server.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    InvalidRequestError,
    ResourceNotFoundError,
)
from toolhost_server.store.database import Store
from toolhost_server.store.engine import create_store_engine
from toolhost_server.store.errors import StoreValueError
from toolhost_server.store.migrations import LATEST_VERSION, MIGRATIONS, schema_version
from toolhost_server.store.schema import asset_addresses, asset_tags, assets, todos

from helpers.lock_races import libpq_dsn, outcome_of, queued_behind_lock
from helpers.waiting import within

FLEET = (
    Asset("ws-001", os="Microsoft Windows 10 Pro", platform="Windows", site="Berlin-DC1", tags=("Finance", "laptop")),
    Asset("ws-002", os="Microsoft Windows 10 Enterprise", platform="windows", site="paris", tags=("finance",)),
    Asset("WS-010", os="Microsoft Windows 11 Pro", platform="windows", site="berlin-dc1", tags=("laptop",)),
    Asset("wsa01", os="Windows 10", platform="windows-server", site="berlin-dc1-annex"),
    Asset("srv-db1", os="Ubuntu 22.04", platform="linux", site="berlin-dc1", tags=("database",)),
    Asset("srv_x", os="100% Linux_custom", platform="linux", tags=("finance-eu",)),
    Asset("srvax", os="1000 Linux custom", platform="linux"),
    Asset("srv-back", os="C:\\Windows backup appliance"),
    Asset("at-01", os="Windows 10 ÖSTERREICH Edition", site="MÜNCHEN", tags=("Straße",)),
)

# (filter, the names it matches): each checked by count() and by reading every page.
FILTER_CASES: tuple[tuple[AssetFilter, set[str]], ...] = (
    (AssetFilter(), {asset.name for asset in FLEET}),
    (AssetFilter(os="Windows 10"), {"ws-001", "ws-002", "wsa01", "at-01"}),
    (AssetFilter(os="WINDOWS 10 pro"), {"ws-001"}),
    (AssetFilter(os="österreich"), {"at-01"}),
    (AssetFilter(os="%"), {"srv_x"}),
    (AssetFilter(os="100%"), {"srv_x"}),
    (AssetFilter(os="_"), {"srv_x"}),
    (AssetFilter(os="linux_c"), {"srv_x"}),
    (AssetFilter(os="\\"), {"srv-back"}),
    (AssetFilter(os="c:\\windows"), {"srv-back"}),
    (AssetFilter(os="windows 12"), set()),
    (AssetFilter(platform="WINDOWS"), {"ws-001", "ws-002", "WS-010"}),
    (AssetFilter(platform="window"), set()),
    (AssetFilter(site="berlin-dc1"), {"ws-001", "WS-010", "srv-db1"}),
    (AssetFilter(site="münchen"), {"at-01"}),
    (AssetFilter(tag="FINANCE"), {"ws-001", "ws-002"}),
    (AssetFilter(tag="fin"), set()),
    (AssetFilter(tag="straße"), {"at-01"}),
    (AssetFilter(tag="fin%"), set()),
    (AssetFilter(name="ws-0*"), {"ws-001", "ws-002", "WS-010"}),
    (AssetFilter(name="WS-00?"), {"ws-001", "ws-002"}),
    (AssetFilter(name="*01"), {"ws-001", "wsa01", "at-01"}),
    (AssetFilter(name="ws?01"), {"wsa01"}),
    (AssetFilter(name="ws?0*"), {"ws-001", "ws-002", "WS-010", "wsa01"}),
    (AssetFilter(name="srv_*"), {"srv_x"}),
    (AssetFilter(name="srv_x"), {"srv_x"}),
    (AssetFilter(name="SRV-DB1"), {"srv-db1"}),
    (AssetFilter(name="srv%"), set()),
    (AssetFilter(name="*"), {asset.name for asset in FLEET}),
    (AssetFilter(os="windows 10", tag="finance", site="berlin-dc1"), {"ws-001"}),
    (AssetFilter(platform="windows", name="ws-0?0"), {"WS-010"}),
)


@pytest.fixture
def store(database: URL) -> Iterator[Store]:
    opened = Store(database)
    yield opened
    opened.close()


@pytest.fixture
def table(store: Store) -> AssetTable:
    return AssetTable(store)


def every_page(table: AssetTable, where: AssetFilter, size: int) -> list[str]:
    names: list[str] = []
    after = ""
    while True:
        page, after = table.page(where, after, size)
        assert len(page) <= size
        names += [asset.name for asset in page]
        if not after:
            return names


def test_every_filter_matches_what_it_documents_counted_and_paged_alike(table: AssetTable):
    for asset in FLEET:
        table.create(asset)
    for where, expected in FILTER_CASES:
        assert table.count(where) == len(expected), where
        paged = every_page(table, where, 2)
        assert set(paged) == expected, where
        assert paged == sorted(paged, key=str.lower), where


def test_count_is_one_statement_that_reads_no_asset_and_the_tag_filter_uses_its_index(table: AssetTable,
                                                                                     store: Store):
    for asset in FLEET:
        table.create(asset)
    [(statement, parameters)] = asset_statements(lambda: table.count(AssetFilter(tag="finance", os="windows")) == 2)
    assert statement.lstrip().upper().startswith("SELECT COUNT(*)")
    assert "asset_tags" in statement
    assert "ix_asset_tags_value_key" in query_plan(store, statement, parameters)


def test_a_tag_filter_alone_reads_the_tagged_assets_not_every_asset(table: AssetTable, store: Store):
    # A correlated EXISTS ran the tag lookup once per asset: a scan of the whole inventory (200 ms at 100,000
    # assets in `make bench --only assets`). The tag index finds the assets, which are then read by key.
    table.create(Asset("ws-1", tags=("finance",)))
    [(statement, parameters)] = asset_statements(lambda: table.count(AssetFilter(tag="FINANCE")) == 1)
    plan = query_plan(store, statement, parameters)
    assert "ix_asset_tags_value_key" in plan, plan
    if store.dialect == "sqlite":
        assert "SCAN assets" not in plan, plan


def asset_statements(work: Callable[[], bool]) -> list[tuple[str, Any]]:
    """The statements on asset tables that `work` ran (it returns whether its answer was right)."""
    statements: list[tuple[str, Any]] = []

    def seen(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        statements.append((statement, parameters))

    event.listen(Engine, "before_cursor_execute", seen)
    try:
        assert work()
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
    return [(statement, parameters) for statement, parameters in statements if "asset" in statement]


def query_plan(store: Store, statement: str, parameters: Any) -> str:
    with store.begin() as connection:
        cursor = connection.connection.cursor()
        if store.dialect == "postgresql":
            # A few rows are cheaper to scan: the planner is told not to, to show the index can serve the query.
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("EXPLAIN " + statement, parameters)
        else:
            cursor.execute("EXPLAIN QUERY PLAN " + statement, parameters)
        return " ".join(str(row) for row in cursor.fetchall())


def test_search_reads_its_page_and_total_from_one_snapshot(table: AssetTable):
    for index in range(3):
        table.create(Asset(f"ws-{index}", os="Windows"))
    added: list[Any] = []

    def add_before_the_count(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if not added and " ".join(statement.split()).startswith("SELECT count(*) AS count_1 FROM assets"):
            added.append(None)  # first: the create's own count must not create again
            added[0] = outcome_of(lambda: table.create(Asset("ws-added-meanwhile", os="Windows")))

    event.listen(Engine, "before_cursor_execute", add_before_the_count)
    try:
        page = table.search(AssetFilter(os="windows"), "", 2)
    finally:
        event.remove(Engine, "before_cursor_execute", add_before_the_count)
    assert isinstance(added[0], Asset), added
    assert [asset.name for asset in page.assets] == ["ws-0", "ws-1"] and page.next_after == "ws-1"
    assert page.total == 3  # as the page saw the inventory, not with the asset added in between
    assert table.count(AssetFilter(os="windows")) == 4


def test_a_first_page_that_is_also_the_last_is_its_own_total_without_a_count(table: AssetTable):
    for asset in FLEET:
        table.create(asset)
    where = AssetFilter(os="windows")
    counted = [statement for statement, _ in asset_statements(lambda: table.search(where, "", 100).total == 6)
               if "count(" in statement.lower()]
    assert counted == []
    # A page with more after it, or one after the first, needs the count of every match.
    for after, limit in (("", 2), ("ws-001", 100)):
        counted = [statement for statement, _ in asset_statements(
            lambda after=after, limit=limit: table.search(where, after, limit).total == 6)
            if "count(" in statement.lower()]
        assert len(counted) == 1, (after, limit)


def host(index: int) -> str:
    return f"{'HOST' if index % 2 else 'host'}-{index:02d}"


def test_pages_follow_the_lower_cased_name_and_never_repeat_or_skip_while_the_inventory_changes(table: AssetTable):
    for index in range(20):
        table.create(Asset(host(index)))
    first, after = table.page(AssetFilter(), "", 7)
    assert [asset.name for asset in first] == [host(index) for index in range(7)]
    assert after == "host-06"
    # Between two pages: one asset added before the cursor, one after it, one not yet listed removed.
    table.create(Asset("host-03a"))
    table.create(Asset("host-15a"))
    table.delete("HOST-09")
    rest: list[str] = []
    while after:
        page, after = table.page(AssetFilter(), after, 7)
        rest += [asset.name for asset in page]
    assert rest == [*(host(index) for index in range(7, 16) if index != 9), "host-15a",
                    *(host(index) for index in range(16, 20))]
    assert table.page(AssetFilter(), "host-19", 7) == ([], "")


def test_an_asset_round_trips_with_every_field_and_its_times(table: AssetTable):
    asset = Asset("ws-042", hostname="WS-042.corp.example.com", addresses=("10.0.0.9", "2001:db8::42", "10.0.0.1"),
                  os="Microsoft Windows 10 Pro", platform="windows", site="Berlin", tags=("Zeta", "alpha", "Mid"),
                  winrm=WinrmProfile(port=5986, ssl=True, domain="CORP", credential="winrmprod",
                                     authentication="basic"))
    before = datetime.now(UTC)
    created = table.create(asset)
    assert created.created_at is not None and created.created_at >= before
    assert created.updated_at == created.created_at
    stored = table.get("WS-042")
    assert stored == created
    assert dataclasses.replace(stored, created_at=None, updated_at=None) == asset


def test_names_are_unique_regardless_of_case(table: AssetTable):
    table.create(Asset("WS-1", os="first"))
    with pytest.raises(AlreadyExistsError, match="'ws-1' is taken by the asset 'WS-1'"):
        table.create(Asset("ws-1", os="second"))
    assert table.get("wS-1").os == "first"
    assert table.count(AssetFilter()) == 1
    with pytest.raises(ResourceNotFoundError, match="no asset named 'ws-2'"):
        table.get("ws-2")


def test_update_changes_what_the_transform_returns_but_never_the_name_or_creation_time(table: AssetTable):
    created = table.create(Asset("ws-1", tags=("old",), addresses=("10.0.0.1",)))
    updated = table.update("WS-1", lambda asset: dataclasses.replace(
        asset, name="renamed", tags=("new", "second"), addresses=(), site="paris", created_at=None))
    assert updated.name == "ws-1" and updated.site == "paris" and updated.tags == ("new", "second")
    assert updated.created_at == created.created_at
    assert updated.updated_at is not None and created.updated_at is not None
    assert updated.updated_at > created.updated_at
    assert table.get("ws-1") == updated
    assert table.count(AssetFilter(tag="old")) == 0 and table.count(AssetFilter(tag="second")) == 1
    assert table.count(AssetFilter(name="renamed")) == 0


def test_an_update_whose_transform_refuses_changes_nothing_and_an_unknown_name_is_not_found(table: AssetTable):
    created = table.create(Asset("ws-1", tags=("kept",)))

    def refuse(asset: Asset) -> Asset:
        raise InvalidRequestError("refused by the caller's validation")

    with pytest.raises(InvalidRequestError):
        table.update("ws-1", refuse)
    assert table.get("ws-1") == created
    with pytest.raises(ResourceNotFoundError):
        table.update("ws-2", lambda asset: asset)


def test_delete_returns_the_asset_as_it_was_and_leaves_no_tag_or_address_behind(table: AssetTable, store: Store):
    table.create(Asset("ws-1", tags=("finance",), addresses=("10.0.0.1",)))
    kept = table.create(Asset("ws-2", tags=("finance",), addresses=("10.0.0.2",)))
    removed = table.delete("WS-1")
    assert removed.name == "ws-1" and removed.tags == ("finance",) and removed.addresses == ("10.0.0.1",)
    with pytest.raises(ResourceNotFoundError):
        table.delete("ws-1")
    assert table.count(AssetFilter(tag="finance")) == 1
    with store.begin() as connection:
        assert connection.execute(select(asset_tags.c.value)).scalars().all() == ["finance"]
        assert connection.execute(select(asset_addresses.c.address)).scalars().all() == ["10.0.0.2"]
    assert table.get("ws-2") == kept


def test_import_creates_and_replaces_by_name_regardless_of_case_keeping_the_creation_time(table: AssetTable):
    original = table.create(Asset("ws-1", os="old", tags=("old",)))
    table.create(Asset("untouched"))
    imported = [Asset("WS-1", os="new", tags=("new",)), *(Asset(f"new-{index}") for index in range(3))]
    assert table.import_all(imported, validate_only=True) == ImportSummary(created=3, replaced=1)
    assert table.get("ws-1") == original and table.count(AssetFilter()) == 2
    assert table.import_all(imported) == ImportSummary(created=3, replaced=1)
    replaced = table.get("ws-1")
    assert (replaced.name, replaced.os, replaced.tags) == ("WS-1", "new", ("new",))
    assert replaced.created_at == original.created_at
    assert table.count(AssetFilter(tag="old")) == 0
    assert every_page(table, AssetFilter(), 100) == ["new-0", "new-1", "new-2", "untouched", "WS-1"]


def test_an_import_the_database_refuses_at_its_last_record_leaves_the_inventory_as_it_was(table: AssetTable):
    table.create(Asset("ws-1", os="before"))
    snapshot = every_page(table, AssetFilter(), 100), table.get("ws-1")
    # Validation would refuse the last record (a tag twice, regardless of case); the table is shown it anyway,
    # so that the database refuses it after the records before it were written in the same transaction.
    imported = [Asset("ws-1", os="after"), Asset("ws-2"), Asset("ws-3", tags=("dup", "DUP"))]
    with pytest.raises(StoreValueError):
        table.import_all(imported)
    assert (every_page(table, AssetFilter(), 100), table.get("ws-1")) == snapshot


def test_an_import_naming_one_asset_twice_is_refused_before_anything_is_written(table: AssetTable):
    with pytest.raises(InvalidRequestError, match="names one asset twice"):
        table.import_all([Asset("ws-1"), Asset("WS-1")])
    assert table.count(AssetFilter()) == 0


def test_the_inventory_holds_at_most_max_assets(store: Store):
    table = AssetTable(store, max_assets=3)
    for index in range(3):
        table.create(Asset(f"ws-{index}"))
    with pytest.raises(FailedPreconditionError, match="at most 3 assets and has 3"):
        table.create(Asset("ws-3"))
    with pytest.raises(FailedPreconditionError, match="adding 1 would pass"):
        table.import_all([Asset("ws-0", os="replaced"), Asset("ws-3")], validate_only=True)
    with pytest.raises(FailedPreconditionError):
        table.import_all([Asset("ws-0", os="replaced"), Asset("ws-3")])
    assert table.get("ws-0").os == ""
    # Replacing adds nothing: allowed at the bound; so is a create once one is deleted.
    assert table.import_all([Asset("WS-0", os="replaced")]) == ImportSummary(created=0, replaced=1)
    table.delete("ws-1")
    table.create(Asset("ws-3"))
    assert table.count(AssetFilter()) == 3


def test_find_host_matches_a_name_first_then_every_hostname_regardless_of_case(table: AssetTable):
    table.create(Asset("web", hostname="ws-042.corp.example.com"))
    table.create(Asset("ws-042.corp.example.com", hostname="other.corp.example.com"))
    table.create(Asset("db-a", hostname="db.corp.example.com"))
    table.create(Asset("db-b", hostname="DB.corp.example.com"))
    assert [a.name for a in table.find_host("WS-042.CORP.EXAMPLE.COM")] == ["ws-042.corp.example.com"]
    assert [a.name for a in table.find_host("other.corp.example.com.")] == ["ws-042.corp.example.com"]
    assert [a.name for a in table.find_host("db.corp.example.com")] == ["db-a", "db-b"]
    assert [a.name for a in table.find_host("WEB")] == ["web"]
    assert table.find_host("nowhere.example.com") == []
    assert table.find_host("") == []
    assert table.find_host("%") == [] and table.find_host("*") == []


def test_close_names_suggest_names_and_hostnames_near_an_unknown_host_from_a_bounded_read(
        table: AssetTable, monkeypatch: pytest.MonkeyPatch):
    for index in range(60):
        table.create(Asset(f"WS-{index:03d}", hostname=f"pc{index:03d}.corp.example.com"))
    table.create(Asset("fileserver"))
    table.create(Asset("zz-fileserver"))
    suggested = table.close_names("ws-42")
    assert "WS-042" in suggested and len(suggested) <= 5
    assert "pc042.corp.example.com" in table.close_names("pc042.corp.example.co")
    assert table.close_names("fileservr", limit=1) == ["fileserver"]
    assert "zz-fileserver" in table.close_names("fileservr")
    assert table.close_names("qqqqqqqqqq") == []
    # Only the names and hostnames on either side of the host in sorted order are compared: "zz-fileserver" sorts
    # beyond 3 of them from "fileservr".
    monkeypatch.setattr(table_module, "CLOSE_NAMES_WINDOW", 3)
    assert table.close_names("fileservr") == ["fileserver"]


def test_close_names_find_typos_among_many_alike_names_and_beyond_the_characters_compared(table: AssetTable):
    table.import_all([Asset(f"ws-{index:04d}", hostname=f"ws-{index:04d}.corp.example.com") for index in range(2000)])
    long_prefix = "datacenter-frankfurt-rack-12-server-blade-chassis-07-node-"
    table.import_all([Asset(long_prefix + "3"), Asset(long_prefix + "4")])
    # Only CLOSE_NAMES_COMPARED similarities are computed, but of those that share the most characters.
    assert table.close_names("ws-1234x")[0] == "ws-1234"
    assert table.close_names("ws-1243.corp.example.co")[0] == "ws-1243.corp.example.com"
    # Names alike in the characters compared: those nearest in sorted order come first.
    assert sorted(table.close_names(long_prefix + "3x")[:2]) == [long_prefix + "3", long_prefix + "4"]


# --- races, made certain on PostgreSQL: a test connection holds the lock, the contenders queue behind it --------


@pytest.fixture
def postgres_table(postgres_url: URL) -> Iterator[AssetTable]:
    store = Store(postgres_url)
    yield AssetTable(store, max_assets=3)
    store.close()


async def test_two_updates_of_one_asset_take_turns_and_keep_both_changes(postgres_table: AssetTable,
                                                                         postgres_url: URL):
    postgres_table.create(Asset("ws-1"))
    with ThreadPoolExecutor(max_workers=2) as pool, psycopg.connect(libpq_dsn(postgres_url)) as holder:
        holder.execute("SELECT 1 FROM assets WHERE name_key = 'ws-1' FOR UPDATE")
        updates = [pool.submit(outcome_of, lambda tag=tag: postgres_table.update(
            "ws-1", lambda asset: dataclasses.replace(asset, tags=(*asset.tags, tag)))) for tag in ("a", "b")]
        await queued_behind_lock(postgres_url, updates, "both updates queued behind the asset's row")
        holder.rollback()
        for update in updates:
            outcome = await within(asyncio.wrap_future(update), "an update")
            assert not isinstance(outcome, Exception), outcome
    assert sorted(postgres_table.get("ws-1").tags) == ["a", "b"]


async def test_creates_racing_at_the_bound_and_for_one_name_keep_the_bound_and_the_name_unique(
        postgres_table: AssetTable, postgres_url: URL):
    postgres_table.create(Asset("ws-0"))
    with ThreadPoolExecutor(max_workers=6) as pool, psycopg.connect(libpq_dsn(postgres_url)) as holder:
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (INVENTORY_LOCK_ID,))
        creates = [pool.submit(outcome_of, lambda name=name: postgres_table.create(Asset(name)))
                   for name in ("ws-1", "WS-1", "ws-2", "ws-3", "ws-4", "ws-5")]
        await queued_behind_lock(postgres_url, creates, "six creates queued behind the inventory's lock")
        assert not any(create.done() for create in creates), "a create went ahead without the inventory's lock"
        holder.rollback()
        outcomes = [await within(asyncio.wrap_future(create), "a create") for create in creates]
    assert sum(isinstance(outcome, Asset) for outcome in outcomes) == 2, outcomes
    assert all(isinstance(outcome, (AlreadyExistsError, FailedPreconditionError))
               for outcome in outcomes if not isinstance(outcome, Asset)), outcomes
    assert postgres_table.count(AssetFilter()) == 3
    assert postgres_table.count(AssetFilter(name="ws-1")) <= 1


# --- migration ----------------------------------------------------------------------------------------------


def test_a_version_7_database_gets_the_asset_tables_and_keeps_its_rows(database: URL):
    engine = create_store_engine(database)
    try:
        now = datetime.now(UTC)
        with engine.begin() as connection:
            schema_version.metadata.create_all(connection)
            for migration in MIGRATIONS[:7]:
                migration.apply(connection)
                connection.execute(insert(schema_version), [{
                    "version": migration.version, "applied_at": now, "toolhost_version": "0.7.0",
                    "description": migration.description}])
            connection.execute(insert(todos), [{"owner": "token:alice", "session": "default", "id": 1,
                                                "content": "kept", "status": "pending", "created_at": now,
                                                "updated_at": now}])
        assert "assets" not in inspect(engine).get_table_names()

        store = Store(database)
        try:
            table = AssetTable(store)
            table.create(Asset("ws-1", tags=("finance",), addresses=("10.0.0.1",)))
            assert table.count(AssetFilter(tag="FINANCE")) == 1
        finally:
            store.close()
        with engine.begin() as connection:
            versions = connection.execute(select(schema_version.c.version, schema_version.c.description)
                                          .order_by(schema_version.c.version)).all()
            assert connection.execute(select(todos.c.content)).scalars().all() == ["kept"]
        assert LATEST_VERSION >= 8
        assert versions[7] == (8, "the assets, asset_addresses and asset_tags tables (the asset inventory)")
        assert {"assets", "asset_addresses", "asset_tags"} <= set(inspect(engine).get_table_names())
        assert {index["name"] for index in inspect(engine).get_indexes(assets.name)} >= {
            "ix_assets_name_key", "ix_assets_hostname_key", "ix_assets_platform_key", "ix_assets_site_key"}
    finally:
        engine.dispose()
