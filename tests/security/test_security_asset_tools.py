"""asset_count and asset_search under attack, on SQLite and PostgreSQL: LIKE's own characters (`%`, `_`, `\\`) and
glob look-alikes in every filter match only themselves; filters too long or holding NUL and other control characters
are INVALID_ARGUMENT before the database sees them; forged page tokens (a NUL, an upper-case or over-long position,
another type, nested JSON) are INVALID_PAGE_TOKEN, never INTERNAL. The store under load (review finding 4): an `os`
filter is a substring search, never a LIKE pattern whose cost is the product of two lengths per asset; a read lets
writers commit while it runs; no statement outlives its call; at most max_concurrency calls read at once. Unknown
hosts (finding 9): close names of an inventory built to be alike cost bounded work."""

from __future__ import annotations

import asyncio
import base64
import json
import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import grpc
import psycopg
import pytest
from sqlalchemy import URL, Engine, event

from toolhost.v1 import asset_service_pb2, asset_service_pb2_grpc
from toolhost_server.assets.model import Asset
from toolhost_server.assets.table import AssetTable
from toolhost_server.store.database import Store
from toolhost_server.store.engine import sqlite_file_url
from toolhost_server.tools.asset_tools import AssetCount

from helpers.asset_tools import add_assets, asset_tool, search_all
from helpers.calls import call
from helpers.lock_races import libpq_dsn, outcome_of, store_connections_waiting_on_locks
from helpers.servers import RunningServer
from helpers.status import error_details
from helpers.todos import store_settings
from helpers.waiting import until, within

HOSTILE_INVENTORY = (
    Asset("a-pct", os="100% Linux_x64", platform="linux", site="lab", tags=("web",)),
    Asset("b-plain", os="Linux amd64", platform="linux", site="lab", tags=("db",)),
    Asset("c-back", os="Back\\slash OS", platform="other", site="lab"),
    Asset("srv_1", os="Système ÉTÉ"),
    Asset("srv-1"),
    Asset("srvx1"),
)

# (filters, the names that must match: only what the characters say literally)
LITERAL_CASES: list[tuple[dict[str, str], list[str]]] = [
    ({"os": "%"}, ["a-pct"]),
    ({"os": "_"}, ["a-pct"]),
    ({"os": "100%"}, ["a-pct"]),
    ({"os": "1_0"}, []),
    ({"os": "\\"}, ["c-back"]),
    ({"os": "\\%"}, []),
    ({"os": "%%"}, []),
    ({"os": "été"}, ["srv_1"]),  # ignoring case beyond ASCII
    ({"os": "\uff2c\uff29\uff2e\uff35\uff38"}, []),  # LINUX in full-width letters: other letters
    ({"name": "srv_1"}, ["srv_1"]),
    ({"name": "SRV?1"}, ["srv-1", "srv_1", "srvx1"]),
    ({"name": "a_pct"}, []),
    ({"name": "%"}, []),
    ({"name": "a%"}, []),
    ({"name": "[ab]*"}, []),  # no character classes: not SQLite's GLOB
    ({"name": "*"}, ["a-pct", "b-plain", "c-back", "srv-1", "srv_1", "srvx1"]),
    ({"tag": "%"}, []),
    ({"tag": "_eb"}, []),
    ({"platform": "%"}, []),
    ({"site": "l_b"}, []),
]


async def refused(server: RunningServer, tool: str, **arguments: Any) -> tuple[str, list[tuple[str, str]]]:
    """The ErrorInfo reason and field violations of a call that must be INVALID_ARGUMENT."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(server, tool, arguments)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    info, violations = error_details(caught.value)
    return info.reason, violations


async def test_like_and_glob_characters_match_only_themselves(start_server, database: URL, tmp_path: Path):
    server = await start_server(**store_settings(database, tmp_path))
    await add_assets(server, *HOSTILE_INVENTORY)
    for filters, expected in LITERAL_CASES:
        text, _ = await asset_tool(server, "asset_count", **filters)
        assert text == str(len(expected)), filters
        assert sorted(await search_all(server, **filters), key=str.lower) == sorted(expected, key=str.lower), filters


@pytest.mark.parametrize("tool", ["asset_count", "asset_search"])
@pytest.mark.parametrize(("argument", "value"), [
    ("os", "x" * 257),
    ("name", "*" * 257),
    ("os", "Windows\x00 10"),
    ("tag", "finance\n"),
    ("site", "\x1b[31mred"),
    ("platform", "win\x7f"),
])
async def test_overlong_and_control_character_filters_never_reach_the_database(start_server, tool, argument, value):
    server = await start_server()
    reason, violations = await refused(server, tool, **{argument: value})
    assert reason == "INVALID_ARGUMENTS"
    assert [field for field, _ in violations] == [f"/{argument}"]


async def test_the_longest_filter_allowed_is_answered(start_server):
    server = await start_server()
    await add_assets(server, Asset("ws-1", os="Windows"))
    text, _ = await asset_tool(server, "asset_count", os="é" * 256, name="*" * 256)
    assert text == "0"
    assert await search_all(server, name="*" * 256) == ["ws-1"]


@pytest.mark.parametrize(("argument", "value"), [("page_size", 0), ("page_size", 1001), ("page_size", -1),
                                                 ("page_token", "x" * 513)])
async def test_page_arguments_out_of_bounds_are_refused(start_server, argument, value):
    server = await start_server()
    reason, violations = await refused(server, "asset_search", **{argument: value})
    assert reason == "INVALID_ARGUMENTS" and [field for field, _ in violations] == [f"/{argument}"]


def _forge(token: str, **changes: Any) -> str:
    data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    data.update(changes)
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


async def test_forged_page_tokens_are_refused_not_run(start_server):
    server = await start_server()
    await add_assets(server, *(Asset(f"ws-{i}", os="Windows") for i in range(3)))
    _, first = await asset_tool(server, "asset_search", page_size=1)
    token = first["next_page_token"]
    nested = "[" * 100_000
    forged = [
        "garbage", "!!!", "eyJhIjogMX0", token + "x",
        _forge(token, a="ws-0\x00"), _forge(token, a="WS-0"), _forge(token, a="x" * 129), _forge(token, a=5),
        _forge(token, a=["ws-0"]), _forge(token, a="' OR 1=1 --"), _forge(token, f=None),
        base64.urlsafe_b64encode(nested.encode()[:380]).decode(),
    ]
    for bad in forged:
        reason, _ = await refused(server, "asset_search", page_size=1, page_token=bad)
        assert reason == "INVALID_PAGE_TOKEN", bad
    # The genuine one still works after all that.
    _, second = await asset_tool(server, "asset_search", page_size=1, page_token=token)
    assert [asset["name"] for asset in second["assets"]] == ["ws-1"]


# --- the store under load (review finding 4) ------------------------------------------------------------------

# The longest `os` filter allowed, built for LIKE '%...%': against an os of 256 'a's every start position matched
# 255 characters before failing (7 s over 100,000 assets on SQLite, holding its write lock).
WORST_LIKE_FILTER = "a" * 255 + "b"
# A statement on the assets of an asset tool call, as the database gets it.
Statement = tuple[str, Any]


@contextmanager
def asset_statements() -> Iterator[list[Statement]]:
    """The statements on the asset tables run while the block runs, by any thread of this process (the server's)."""
    seen: list[Statement] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if "assets" in statement:
            seen.append((statement, parameters))

    event.listen(Engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(Engine, "before_cursor_execute", record)


async def test_an_os_filter_is_one_substring_search_per_asset_never_a_like_pattern(start_server, database: URL,
                                                                                  tmp_path: Path):
    server = await start_server(**store_settings(database, tmp_path))
    await add_assets(server, Asset("ws-1", os="a" * 256), Asset("ws-2", os="A" * 255 + "B"))
    with asset_statements() as seen:
        text, _ = await asset_tool(server, "asset_count", os=WORST_LIKE_FILTER)
    assert text == "1"  # ignoring case, as before
    assert seen
    for statement, _ in seen:
        assert "LIKE" not in statement.upper(), statement
        assert ("instr(" if database.get_backend_name() == "sqlite" else "strpos(") in statement, statement
    assert await search_all(server, os=WORST_LIKE_FILTER.upper()) == ["ws-2"]


async def test_an_asset_read_lets_a_writer_commit_while_it_runs(start_server, database: URL, tmp_path: Path):
    # A read that took SQLite's write lock (BEGIN IMMEDIATE) made every writer of the store wait for it: audit,
    # user tools, memory, asset edits. Here the writer commits from inside the read's own statement.
    server = await start_server(**store_settings(database, tmp_path))
    await add_assets(server, Asset("ws-1", os="Windows"))
    table = server.toolhost.asset_table
    written: list[Any] = []

    def write_once(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if not written and " ".join(statement.split()).startswith("SELECT count(*) AS count_1 FROM assets"):
            written.append(None)
            written[0] = outcome_of(lambda: table.create(Asset("ws-written-meanwhile")))

    event.listen(Engine, "before_cursor_execute", write_once)
    try:
        text, _ = await asset_tool(server, "asset_count", os="windows")
    finally:
        event.remove(Engine, "before_cursor_execute", write_once)
    assert isinstance(written[0], Asset), written[0]
    assert text == "1"
    assert await asset_tool(server, "asset_count", name="ws-written-meanwhile") == (
        "1", {"count": 1, "filters": {"name": "ws-written-meanwhile"}})


@pytest.mark.parametrize("tool", ["asset_count", "asset_search"])
async def test_no_statement_of_an_asset_tool_outlives_its_call(start_server, postgres_url: URL, tmp_path: Path,
                                                              tool: str):
    # The statement waits behind a lock the test holds: without a bound it would wait until the lock is released,
    # long after its call ended, holding a worker thread and a store connection.
    server = await start_server(**store_settings(postgres_url, tmp_path), max_call_seconds=1.0)
    await add_assets(server, Asset("ws-1", os="Windows"))
    with psycopg.connect(libpq_dsn(postgres_url)) as holder:
        holder.execute("LOCK TABLE assets IN ACCESS EXCLUSIVE MODE")
        response = await call(server, tool, {"os": "windows"})
        assert not response.success and response.error.code == "TIMEOUT", response
        await until(lambda: store_connections_waiting_on_locks(postgres_url) == 0,
                    "the statement of the timed-out call stopped, while the lock is still held")
        holder.rollback()
    assert (await asset_tool(server, "asset_count"))[0] == "1"


@pytest.mark.parametrize("rpc", ["GetAsset", "ListAssets"])
async def test_no_statement_of_an_asset_service_read_outlives_max_call_seconds(start_server, postgres_url: URL,
                                                                                tmp_path: Path, rpc: str):
    # The reads of AssetService are bounded as the tools' are (second review, D): a statement waiting behind the
    # test's lock stops at max_call_seconds, the RPC answers UNAVAILABLE, and nothing waits on after it.
    server = await start_server(**store_settings(postgres_url, tmp_path), max_call_seconds=1.0)
    await add_assets(server, Asset("ws-1", os="Windows"))
    stub = asset_service_pb2_grpc.AssetServiceStub(server.channel)
    request = asset_service_pb2.GetAssetRequest(name="ws-1") if rpc == "GetAsset" else \
        asset_service_pb2.ListAssetsRequest()
    with psycopg.connect(libpq_dsn(postgres_url)) as holder:
        holder.execute("LOCK TABLE assets IN ACCESS EXCLUSIVE MODE")
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await getattr(stub, rpc)(request)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, refused.value
        await until(lambda: store_connections_waiting_on_locks(postgres_url) == 0,
                    "the statement of the refused read stopped, while the lock is still held")
        holder.rollback()
    assert (await stub.GetAsset(asset_service_pb2.GetAssetRequest(name="ws-1"))).asset.name == "ws-1"


async def test_at_most_max_concurrency_calls_of_an_asset_tool_read_at_once(start_server, postgres_url: URL,
                                                                          tmp_path: Path):
    server = await start_server(**store_settings(postgres_url, tmp_path))
    await add_assets(server, Asset("ws-1", os="Windows"))
    limit = AssetCount.max_concurrency
    assert limit is not None
    with psycopg.connect(libpq_dsn(postgres_url)) as holder:
        holder.execute("LOCK TABLE assets IN ACCESS EXCLUSIVE MODE")
        reading = [asyncio.create_task(call(server, "asset_count", {"os": "windows"})) for _ in range(limit)]
        await until(lambda: store_connections_waiting_on_locks(postgres_url) == limit,
                    f"{limit} asset_count calls wait behind the lock")
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(server, "asset_count", {"os": "windows"})
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, caught.value.details()
        assert "max_concurrency" in (caught.value.details() or "")
        holder.rollback()
        responses = await within(asyncio.gather(*reading), "the calls that waited")
    assert [response.output for response in responses] == ["1"] * limit


# --- close names of an unknown host (review finding 9) ----------------------------------------------------------

# Function calls, Python's and C's, as a profile hook counts them: work, whatever the machine's speed. close_names
# made about 90,000 for the inventory below; comparing every name whole made hundreds of millions (seconds).
CLOSE_NAMES_CALLS_BOUND = 400_000


class WorkExceeded(Exception):
    pass


def calls_made(work: Any, bound: int) -> int:
    """How many function calls `work()` makes in this thread; WorkExceeded as soon as it passes `bound`."""
    made = 0

    def count(frame: FrameType, event_name: str, arg: Any) -> None:
        nonlocal made
        if event_name in ("call", "c_call"):
            made += 1
            if made > bound:
                sys.setprofile(None)
                raise WorkExceeded(f"more than {bound} function calls")

    sys.setprofile(count)
    try:
        work()
    finally:
        sys.setprofile(None)
    return made


def test_close_names_of_names_built_to_be_alike_cost_bounded_work(tmp_path: Path):
    # An asset editor's names: 1,000 of 128 characters over {a, b} (difflib finds no junk in them), hostnames alike
    # of 253; the caller's host: 199 characters over {a, b}, just below difflib's autojunk length.
    rng = random.Random(2)

    def alike(length: int) -> str:
        return "".join(rng.choice("ab") for _ in range(length))

    (tmp_path / "data").mkdir(mode=0o700)
    store = Store(sqlite_file_url(tmp_path / "data" / "toolhost.db"))
    table = AssetTable(store)
    names = sorted({alike(128) for _ in range(1000)})
    table.import_all([Asset(name, hostname=".".join(alike(63) for _ in range(4)) + "z") for name in names])
    try:
        host = alike(199)
        suggested: list[str] = []
        made = calls_made(lambda: suggested.extend(table.close_names(host)), CLOSE_NAMES_CALLS_BOUND)
        assert 0 < made <= CLOSE_NAMES_CALLS_BOUND
        assert len(suggested) == 5  # still answered: names alike are close
        # A name with a typo is still found among them.
        assert table.close_names(names[500][:100] + "c" + names[500][101:])[0] == names[500]
    finally:
        store.close()
