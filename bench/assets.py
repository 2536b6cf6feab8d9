"""The asset inventory (issue 22) over 100,000 assets, and windows_list_directory's asset intelligence.

  asset_count_os_100k        CallTool(asset_count, os "windows 10": a substring, so every row is read) p50,
                             against the same SQL count run directly on the server's SQLite file (the sqlite3
                             module, this process). Target: the seed's "Local tool execution: <50ms".
  asset_count_tag_100k       the same for a tag filter (the tag index finds the assets). Target: the same.
  asset_search_page_100k     CallTool(asset_search, os "windows 10"), the first page of 100, p50, against the
                             statements the table runs for it (the page, its addresses and tags, the total) run
                             directly. Target: the same.
  asset_count_os_vs_echo_100k, asset_count_tag_vs_echo_100k, asset_search_page_vs_echo_100k
                             the same calls against CallTool(echo) on the same server: what the tool adds to the
                             call path's own cost. Reported.
  windows_list_directory_100 CallTool(windows_list_directory) of a directory of 100 entries on the WinRM fake
                             (basic auth over TLS), p50, against run_powershell of the same script on the same
                             fake, called directly in this process. Reported.
  asset_intelligence_ms      the difference of those two, round by round: the asset's lookup among 100,000, the
                             credential, the credential-host and egress checks, the merge (and the call path and
                             the listing's parsing). Target: the seed's "Asset intelligence: <100ms".

    .venv/bin/python -m bench.assets [--quick]      (from the repository root)

One server built in this process as the tests build them (create_toolhost + GrpcServer on 127.0.0.1 port 0, the
default SQLite store in its own data directory), reached over gRPC. The inventory is stored with the table's
import_all: 100,000 assets (10,000 in quick mode), one of them pointing at the fake. The fake is
tests/helpers/winrm_fake.py, imported as the tests import it (`helpers.*`, with tests/ on sys.path): no other
bench module imports a test helper of that package.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.json_format import MessageToDict

from bench.harness import ROOT, Figure, Target, interleave_async, run_standalone
from toolhost.v1 import tool_service_pb2, tool_service_pb2_grpc
from toolhost_server.api.server import GrpcServer, create_toolhost
from toolhost_server.app import Toolhost
from toolhost_server.assets.model import Asset, WinrmProfile
from toolhost_server.config import Config
from toolhost_server.store.engine import DATABASE_FILE_NAME
from toolhost_server.tools.egress import OPEN_ENV
from toolhost_server.windows.powershell import list_directory_script
from toolhost_server.windows.winrm_client import WinrmEndpoint, WinrmLogin, run_powershell

# The WinRM fake and its listing helpers import their siblings as `helpers.*`, as pytest puts tests/ on sys.path.
sys.path.insert(0, str(ROOT / "tests"))
from helpers.windows_hosts import PASSWORD, USERNAME, fake_asset, file_entry, listing_responder
from helpers.winrm_fake import FakeWinrm

COMMAND = 'make bench BENCH_ARGS="--only assets"'
LOCAL_TOOL_MS = 50.0  # seed 004: "Local tool execution: <50ms (direct execution)"
ASSET_INTELLIGENCE_MS = 100.0  # seed 004: "Asset intelligence: <100ms (database lookup + credential fetch)"
OS_FILTER = "windows 10"
TAG_FILTER = "finance"
PAGE_SIZE = 100
LISTED_ENTRIES = 100
WINDOWS_ASSET = "ws-bench-winrm"
OPERATING_SYSTEMS = (("Microsoft Windows 10 Pro", 30), ("Microsoft Windows 10 Enterprise", 10),
                     ("Microsoft Windows 11 Pro", 20), ("Microsoft Windows Server 2019 Datacenter", 10),
                     ("Microsoft Windows Server 2022 Standard", 5), ("Ubuntu 22.04.4 LTS", 12),
                     ("Red Hat Enterprise Linux 9.3", 8), ("macOS 14 Sonoma", 5))
TAGS = ("finance", "hr", "engineering", "sales", "support", "legal", "marketing", "it", "research", "operations",
        "pci", "laptop", "kiosk", "vip")
SITES = ("berlin", "london", "new-york", "singapore", "sao-paulo", "sydney", "toronto", "tokyo")

# The statements AssetTable issues for these filters (assets/table.py, as SQLAlchemy compiles them for SQLite).
COUNT_OS_SQL = "SELECT count(*) FROM assets WHERE instr(assets.os_key, ?) > 0"
COUNT_TAG_SQL = ("SELECT count(*) FROM assets WHERE assets.id IN (SELECT asset_id FROM asset_tags "
                 "WHERE asset_tags.value_key = ?)")
PAGE_OS_SQL = ("SELECT * FROM assets WHERE instr(assets.os_key, ?) > 0 AND assets.name_key > ? "
               "ORDER BY assets.name_key LIMIT ? OFFSET 0")
ADDRESSES_SQL = ("SELECT asset_id, address FROM asset_addresses WHERE asset_id IN ({}) "
                 "ORDER BY asset_id, position")
TAGS_SQL = "SELECT asset_id, value FROM asset_tags WHERE asset_id IN ({}) ORDER BY asset_id, position"


@dataclass(frozen=True)
class Plan:
    assets: int
    rounds: int  # interleaved rounds of each inventory figure
    calls: int  # consecutive calls per round and side there; the round's figure is their median
    listing_rounds: int
    listings: int  # consecutive listings per round and side


FULL = Plan(assets=100_000, rounds=7, calls=5, listing_rounds=7, listings=5)
QUICK = Plan(assets=10_000, rounds=3, calls=3, listing_rounds=3, listings=3)


# -- the inventory --------------------------------------------------------------------------------------------


def make_inventory(count: int, windows_asset: Asset) -> list[Asset]:
    """`count` assets, `windows_asset` one of them: names host-000000..., operating systems, sites and 1-4 tags
    drawn with fixed weights, so that os "windows 10" matches ~40% and tag "finance" ~18%."""
    rng = random.Random(22)
    systems = [name for name, _ in OPERATING_SYSTEMS]
    weights = [weight for _, weight in OPERATING_SYSTEMS]
    inventory = []
    for index in range(count - 1):
        system = rng.choices(systems, weights)[0]
        platform = "windows" if system.startswith("Microsoft") else "macos" if system.startswith("mac") else "linux"
        inventory.append(Asset(
            name=f"host-{index:06}", hostname=f"host-{index:06}.corp.example.com",
            addresses=(f"10.{index >> 16 & 255}.{index >> 8 & 255}.{index & 255}",), os=system, platform=platform,
            site=rng.choice(SITES), tags=tuple(rng.sample(TAGS, rng.randint(1, 4))),
            winrm=WinrmProfile(ssl=rng.random() < 0.3, domain="CORP" if platform == "windows" else "")))
    inventory.append(windows_asset)
    return inventory


def os_key(text: str) -> str:
    """An `os` filter as the table looks for it in the os_key column: lower-cased."""
    return text.lower()


class DirectSql:
    """The server's SQLite file opened read-only with the sqlite3 module: the bare work of each tool."""

    def __init__(self, path: Path) -> None:
        self.connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)

    def count_os(self) -> int:
        return int(self.connection.execute(COUNT_OS_SQL, (os_key(OS_FILTER),)).fetchone()[0])

    def count_tag(self) -> int:
        return int(self.connection.execute(COUNT_TAG_SQL, (TAG_FILTER,)).fetchone()[0])

    def first_page_os(self) -> tuple[list[str], int]:
        """asset_search's statements for the first page: the page (one row more, to know whether another
        follows), its addresses and tags, the total; the page's names and the total."""
        rows = self.connection.execute(PAGE_OS_SQL, (os_key(OS_FILTER), "", PAGE_SIZE + 1)).fetchall()
        ids = [row[0] for row in rows]
        marks = ",".join("?" * len(ids))
        self.connection.execute(ADDRESSES_SQL.format(marks), ids).fetchall()
        self.connection.execute(TAGS_SQL.format(marks), ids).fetchall()
        return [row[1] for row in rows[:PAGE_SIZE]], self.count_os()

    def close(self) -> None:
        self.connection.close()


# -- the server -----------------------------------------------------------------------------------------------


@dataclass
class Server:
    """One in-process server, with its stub."""

    toolhost: Toolhost
    grpc_server: GrpcServer
    channel: grpc.aio.Channel

    @property
    def tools(self) -> tool_service_pb2_grpc.ToolServiceStub:
        return tool_service_pb2_grpc.ToolServiceStub(self.channel)

    async def call(self, tool: str, **arguments: Any) -> tool_service_pb2.CallToolResponse:
        """A call that must succeed. Its structured output stays a protobuf Struct: converting it to Python
        (structured(), for the checks before the rounds) is the client's work, not the call's."""
        response: tool_service_pb2.CallToolResponse = await self.tools.CallTool(tool_service_pb2.CallToolRequest(
            name=tool, arguments_json=json.dumps(arguments)))
        if not response.success:
            raise RuntimeError(f"{tool} failed: {response.error}")
        return response

    async def close(self) -> None:
        await self.channel.close()
        self.toolhost.registry.close()
        await self.grpc_server.stop(0)
        await self.toolhost.close()


async def start_server(data_dir: Path, fake: FakeWinrm) -> Server:
    """A server as the tests' start_server builds one, whose `winrm` credential may go to loopback (the fake)."""
    assert fake.ca_file is not None
    config = dataclasses.replace(Config(), grpc_address="127.0.0.1:0", watch_catalog=False, data_dir=str(data_dir),
                                 winrm_credential_hosts=(("winrm", ("127.0.0.0/8",)),), winrm_ca_file=fake.ca_file)
    toolhost = create_toolhost(config)
    await toolhost.start()
    server = GrpcServer(toolhost)
    port = await server.start()
    return Server(toolhost, server, grpc.aio.insecure_channel(f"127.0.0.1:{port}"))


def structured(response: tool_service_pb2.CallToolResponse) -> dict[str, Any]:
    found: dict[str, Any] = MessageToDict(response.structured_output)
    return found


@contextlib.contextmanager
def environment(**values: str) -> Iterator[None]:
    """`values` set in os.environ (the egress policy and the credential sources read it), then restored."""
    previous = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


async def median_ms(runs: int, action: Callable[[], Awaitable[object]]) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        await action()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1e3


async def median_ms_sync(runs: int, action: Callable[[], object]) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1e3


# -- the figures ----------------------------------------------------------------------------------------------


async def measure_inventory(plan: Plan, server: Server, sql: DirectSql) -> list[Figure]:
    expected_os, expected_tag = sql.count_os(), sql.count_tag()
    expected_names, _ = sql.first_page_os()
    # Checked whole once (and warm); in the rounds, on their text's first line.
    assert structured(await server.call("asset_count", os=OS_FILTER))["count"] == expected_os
    assert structured(await server.call("asset_count", tag=TAG_FILTER))["count"] == expected_tag
    page = structured(await server.call("asset_search", os=OS_FILTER, page_size=PAGE_SIZE))
    assert [asset["name"] for asset in page["assets"]] == expected_names
    assert page["total"] == expected_os and page["next_page_token"], page["total"]
    page_header = f'{PAGE_SIZE} of {expected_os} assets matching os "{OS_FILTER}"'

    async def count_os() -> None:
        assert (await server.call("asset_count", os=OS_FILTER)).output == str(expected_os)

    async def count_tag() -> None:
        assert (await server.call("asset_count", tag=TAG_FILTER)).output == str(expected_tag)

    async def search_os() -> None:
        output = (await server.call("asset_search", os=OS_FILTER, page_size=PAGE_SIZE)).output
        assert output.partition("\n")[0] == page_header, output[:200]

    async def echo() -> None:
        assert (await server.call("echo", text="hi")).output == "hi"

    for action in (count_os, count_tag, search_os, echo):
        await action()
    cases = (
        ("asset_count_os", f'asset_count, os "{OS_FILTER}"', count_os, sql.count_os, expected_os, COUNT_OS_SQL),
        ("asset_count_tag", f'asset_count, tag "{TAG_FILTER}"', count_tag, sql.count_tag, expected_tag,
         COUNT_TAG_SQL),
        ("asset_search_page", f'asset_search, os "{OS_FILTER}", first page of {PAGE_SIZE}', search_os,
         sql.first_page_os, expected_os, "the page (LIMIT 101), its addresses and tags (IN lists), the count"),
    )
    label = f"{plan.assets:,} assets"
    how = (f"CallTool over gRPC to a server in this process (SQLite store, {label} stored with import_all); "
           f"{plan.rounds} interleaved rounds of {plan.calls} consecutive calls per side, each round's median")
    figures = []
    for key, title, tool_call, direct, matching, statement in cases:
        against_sql = await interleave_async(plan.rounds, lambda call=tool_call: median_ms(plan.calls, call),
                                             lambda work=direct: median_ms_sync(plan.calls, work))
        against_echo = await interleave_async(plan.rounds, lambda call=tool_call: median_ms(plan.calls, call),
                                              lambda: median_ms(plan.calls, echo))
        extra = {"matching": matching, "assets": plan.assets}
        figures += [
            Figure.from_rounds(
                key=f"{key}_100k", title=f"{title} over {label} (p50)", unit="ms", measured=against_sql[0],
                baseline=against_sql[1], baseline_name="the same SQL run directly on the SQLite file (sqlite3)",
                target=Target.value_at_most(LOCAL_TOOL_MS), command=COMMAND,
                note=(f"{matching:,} of {label} match; the direct side runs the statements the table issues "
                      f"({statement}) with the sqlite3 module on the server's file, read-only, in this process; "
                      f"{how}; the target is the seed's \"Local tool execution: <50ms\", judged on the median"),
                extra=extra),
            Figure.from_rounds(
                key=f"{key}_vs_echo_100k", title=f"{title} over {label}, against CallTool(echo) (p50)", unit="ms",
                measured=against_echo[0], baseline=against_echo[1], baseline_name="CallTool(echo), same server",
                target=None, command=COMMAND,
                note=f"what the tool adds to the call path's own cost; {how}", extra=extra),
        ]
    return figures


async def measure_listing(plan: Plan, server: Server, fake: FakeWinrm) -> list[Figure]:
    assert fake.ca_file is not None
    script = list_directory_script("C:\\")
    endpoint = WinrmEndpoint(fake.hostname, ("127.0.0.1",), fake.port, ssl=True, ca_file=fake.ca_file)
    login = WinrmLogin("basic", USERNAME, PASSWORD)

    listed = structured(await server.call("windows_list_directory", host=WINDOWS_ASSET, path="C:\\"))
    assert len(listed["entries"]) == LISTED_ENTRIES and not listed["truncated"], listed
    header = f'"C:\\\\" on {WINDOWS_ASSET}: {LISTED_ENTRIES} entries'

    async def tool() -> None:
        output = (await server.call("windows_list_directory", host=WINDOWS_ASSET, path="C:\\")).output
        assert output.partition("\n")[0] == header, output[:200]

    async def direct() -> None:
        output = await run_powershell(endpoint, login, script, timeout_seconds=60, max_output_bytes=32 << 20)
        assert output.exit_code == 0 and output.stdout and not output.truncated, output

    await direct()
    assert fake.scripts[-2:] == [script, script]  # both sides sent the same script
    measured, baseline = await interleave_async(plan.listing_rounds, lambda: median_ms(plan.listings, tool),
                                                lambda: median_ms(plan.listings, direct))
    echo = await median_ms(plan.listings, lambda: server.call("echo", text="hi"))
    differences = [tool_ms - direct_ms for tool_ms, direct_ms in zip(measured, baseline, strict=True)]
    how = (f"a directory of {LISTED_ENTRIES} entries on the WinRM fake (tests/helpers/winrm_fake.py: basic auth over "
           f"TLS with a throwaway CA, in this process, a new TLS connection and shell per listing on both sides); "
           f"the asset is one of {plan.assets:,}; {plan.listing_rounds} interleaved rounds of {plan.listings} "
           f"consecutive listings per side, each round's median")
    extra = {"echo_p50_ms": echo, "entries": LISTED_ENTRIES, "assets": plan.assets}
    return [
        Figure.from_rounds(
            key="windows_list_directory_100", title=f"windows_list_directory, {LISTED_ENTRIES} entries (p50)",
            unit="ms", measured=measured, baseline=baseline,
            baseline_name="run_powershell of the same script on the same fake, called directly", target=None,
            command=COMMAND, note=f"CallTool over gRPC against the WinRM client alone; {how}", extra=extra),
        Figure.from_rounds(
            key="asset_intelligence_ms", title="windows_list_directory's asset intelligence (CallTool − direct, p50)",
            unit="ms", measured=differences, baseline=baseline,
            baseline_name="run_powershell called directly", target=Target.value_at_most(ASSET_INTELLIGENCE_MS),
            command=COMMAND,
            note=(f"each round's CallTool median less its direct median: the asset's lookup by name among "
                  f"{plan.assets:,}, the credential from the environment, the credential-host and egress checks, "
                  f"the profile merged, plus the call path (CallTool(echo) p50 {echo:.2f} ms, in `extra`) and the "
                  f"listing's parsing; the ratio is that share of the direct listing; the target is the seed's "
                  f"\"Asset intelligence: <100ms\", judged on the median; {how}"),
            extra=extra),
    ]


async def measure_all(plan: Plan, scratch: Path) -> list[Figure]:
    with FakeWinrm(tls=True, authentication="basic", username=USERNAME, password=PASSWORD,
                   responder=listing_responder([file_entry(f"file-{index:03}.txt", index * 1000)
                                                for index in range(LISTED_ENTRIES)])) as fake:
        server = await start_server(scratch / "data", fake)
        try:
            inventory = make_inventory(plan.assets, fake_asset(fake, WINDOWS_ASSET))  # basic over TLS, as the fake
            table = server.toolhost.asset_table
            summary = await asyncio.to_thread(table.import_all, inventory)
            assert summary.created == plan.assets, summary
            sql = DirectSql(scratch / "data" / DATABASE_FILE_NAME)
            try:
                figures = await measure_inventory(plan, server, sql)
            finally:
                sql.close()
            figures += await measure_listing(plan, server, fake)
        finally:
            await server.close()
    return figures


def run(quick: bool) -> list[Figure]:
    plan = QUICK if quick else FULL
    scratch = Path(tempfile.mkdtemp(prefix="toolhost-bench-assets-"))
    try:
        with environment(**{OPEN_ENV: "127.0.0.0/8", "TOOLHOST_CRED_WINRM_USERNAME": USERNAME,
                            "TOOLHOST_CRED_WINRM_PASSWORD": PASSWORD}):
            return asyncio.run(measure_all(plan, scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    run_standalone("assets", run, __doc__)
