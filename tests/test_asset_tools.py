"""asset_count and asset_search through a real server, on SQLite and PostgreSQL: every filter (os a substring, the
others whole values, name a glob, all ignoring case), pages that add up to the count, pages cut to fit
max_output_bytes, tokens bound to their filters, no credential value in any answer, and `make run` serving both
with a Reload that misses none of seed 004's required tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.json_format import MessageToDict
from sqlalchemy import URL

from toolhost.v1 import tool_service_pb2, tool_service_pb2_grpc
from toolhost_server.assets.model import Asset, WinrmProfile
from toolhost_server.catalog.builtins import unserved_builtins
from toolhost_server.config import SEED_REQUIRED_TOOLS
from toolhost_server.tools.base import ToolServices

from helpers.asset_tools import add_assets, asset_tool, search_all
from helpers.calls import call
from helpers.make_run import make_run
from helpers.servers import RunningServer, ServerFactory
from helpers.status import error_details
from helpers.todos import store_settings

# The password of the credential ws-042's profile names: it must appear in no answer.
CANARY_PASSWORD = "canary-Pa55word-7f3a9c"

INVENTORY = (
    Asset("ws-042", hostname="ws-042.corp.example.com", addresses=("10.0.0.42",), os="Microsoft Windows 10 Pro",
          platform="windows", site="berlin", tags=("finance", "laptop"),
          winrm=WinrmProfile(domain="CORP", credential="opsadmin")),
    Asset("WS-043", os="Microsoft Windows 10 Enterprise", platform="Windows", site="Paris", tags=("Finance",)),
    Asset("srv-db1", os="Microsoft Windows Server 2019", platform="windows", site="Berlin", tags=("database",),
          winrm=WinrmProfile(ssl=True, authentication="basic")),
    Asset("lnx-01", os="Ubuntu 22.04", platform="linux", site="berlin", tags=("web",)),
    Asset("lnx-02", os="Debian 12", platform="linux", site="paris"),
)

# (filters, the names asset_search lists, sorted by name regardless of case)
FILTER_CASES: list[tuple[dict[str, str], list[str]]] = [
    ({}, ["lnx-01", "lnx-02", "srv-db1", "ws-042", "WS-043"]),
    ({"os": "Windows 10"}, ["ws-042", "WS-043"]),  # the seed's example: a substring, whatever the case
    ({"os": "WINDOWS"}, ["srv-db1", "ws-042", "WS-043"]),
    ({"os": "server 20"}, ["srv-db1"]),
    ({"platform": "windows"}, ["srv-db1", "ws-042", "WS-043"]),
    ({"platform": "win"}, []),  # a whole value, not a substring
    ({"site": "BERLIN"}, ["lnx-01", "srv-db1", "ws-042"]),
    ({"tag": "finance"}, ["ws-042", "WS-043"]),
    ({"tag": "fin"}, []),
    ({"name": "ws-*"}, ["ws-042", "WS-043"]),
    ({"name": "ws-04?"}, ["ws-042", "WS-043"]),
    ({"name": "*-0?"}, ["lnx-01", "lnx-02"]),
    ({"name": "SRV-DB1"}, ["srv-db1"]),
    ({"name": "srv"}, []),  # a glob matches the whole name
    ({"os": "windows", "site": "berlin"}, ["srv-db1", "ws-042"]),
    ({"tag": "FINANCE", "site": "paris"}, ["WS-043"]),
]


def credentials_dir(tmp_path: Path) -> Path:
    """A credentials_dir whose `opsadmin` (the credential ws-042's profile names) has the canary password."""
    directory = tmp_path / "credentials"
    directory.mkdir()
    (directory / "opsadmin.username").write_text("CORP\\operator")
    (directory / "opsadmin.password").write_text(CANARY_PASSWORD)
    return directory


async def inventory_server(start_server: ServerFactory, tmp_path: Path, **settings: Any) -> RunningServer:
    server = await start_server(credentials_dir=str(credentials_dir(tmp_path)), **settings)
    await add_assets(server, *INVENTORY)
    return server


async def test_every_filter_counts_and_lists_the_same_assets(start_server, database: URL, tmp_path: Path):
    server = await inventory_server(start_server, tmp_path, **store_settings(database, tmp_path))
    for filters, expected in FILTER_CASES:
        text, counted = await asset_tool(server, "asset_count", **filters)
        assert (text, counted) == (str(len(expected)), {"count": len(expected), "filters": filters}), filters
        assert await search_all(server, page_size=2, **filters) == expected, filters


async def test_an_empty_filter_filters_nothing(start_server, tmp_path: Path):
    server = await inventory_server(start_server, tmp_path)
    text, counted = await asset_tool(server, "asset_count", os="", tag="")
    assert (text, counted) == ("5", {"count": 5, "filters": {}})


async def test_search_shows_every_field_and_the_credential_name_but_no_credential_value(
        start_server, tmp_path: Path):
    server = await inventory_server(start_server, tmp_path)
    text, page = await asset_tool(server, "asset_search", os="windows")
    assert page["total"] == 3 and page["next_page_token"] == ""
    by_name = {asset["name"]: asset for asset in page["assets"]}
    assert by_name["ws-042"] == {
        "name": "ws-042", "hostname": "ws-042.corp.example.com", "addresses": ["10.0.0.42"],
        "os": "Microsoft Windows 10 Pro", "platform": "windows", "site": "berlin", "tags": ["finance", "laptop"],
        "winrm": {"port": 5985, "ssl": False, "domain": "CORP", "credential": "opsadmin", "authentication": "ntlm"}}
    # The defaults a profile leaves out are shown as the tools use them: HTTPS's port, the `winrm` credential.
    assert by_name["srv-db1"]["winrm"] == {"port": 5986, "ssl": True, "domain": "", "credential": "winrm",
                                           "authentication": "basic"}
    assert by_name["WS-043"]["hostname"] == "WS-043"
    assert text.splitlines()[0] == '3 of 3 assets matching os "windows"'
    assert ('- ws-042: hostname ws-042.corp.example.com; addresses 10.0.0.42; os "Microsoft Windows 10 Pro"; '
            'platform "windows"; site "berlin"; tags "finance", "laptop"; winrm http port 5985 ntlm domain "CORP" '
            'credential "opsadmin"') in text.splitlines()
    # The server knows the canary (opsadmin's password) and would redact it: asset_tool also checked that nothing
    # needed redacting, so no answer held it.
    assert CANARY_PASSWORD not in text + json.dumps(page)
    _, counted = await asset_tool(server, "asset_count", name="ws-042")
    assert CANARY_PASSWORD not in json.dumps(counted)


async def test_pages_follow_each_other_to_the_count(start_server, tmp_path: Path):
    server = await start_server()
    names = [f"{'Host' if i % 2 else 'host'}-{i:02d}" for i in range(23)]
    await add_assets(server, *(Asset(name, os="Linux", site="lab") for name in names))
    pages = []
    token = ""
    while True:
        text, page = await asset_tool(server, "asset_search", site="lab", page_size=5, page_token=token)
        pages.append([asset["name"] for asset in page["assets"]])
        token = page["next_page_token"]
        if not token:
            break
        assert text.splitlines()[-1].endswith(f"page_token {token}")
    assert [len(page) for page in pages] == [5, 5, 5, 5, 3]
    assert [name for page in pages for name in page] == sorted(names, key=str.lower)
    assert await search_all(server, page_size=1000, site="lab") == sorted(names, key=str.lower)


async def test_a_page_token_serves_only_the_filters_it_was_issued_for(start_server, tmp_path: Path):
    server = await inventory_server(start_server, tmp_path)
    _, first = await asset_tool(server, "asset_search", os="windows", page_size=1)
    token = first["next_page_token"]
    assert token
    for other in ({"os": "linux"}, {}, {"os": "windows", "site": "berlin"}):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call(server, "asset_search", page_size=1, page_token=token, **other)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        info, _ = error_details(refused.value)
        assert info.reason == "INVALID_PAGE_TOKEN"
        assert "same os, platform, site, tag and name" in refused.value.details()
    _, second = await asset_tool(server, "asset_search", os="windows", page_size=1, page_token=token)
    assert [asset["name"] for asset in second["assets"]] == ["ws-042"]


async def test_a_page_too_large_for_max_output_bytes_is_cut_and_continued(start_server, tmp_path: Path):
    limit = 8192
    server = await start_server(max_output_bytes=limit)
    # Each asset takes about 2 KB of text and as much of JSON: a few fit in a response, not 100.
    names = [f"big-{i:02d}" for i in range(12)]
    await add_assets(server, *(Asset(name, os="Ünïcode OS", tags=tuple(f"t{t}-" + "é" * 100 for t in range(10)))
                               for name in names))
    listed: list[str] = []
    token = ""
    pages = 0
    while True:
        response = await call(server, "asset_search", page_token=token)
        assert response.success and not response.truncated
        assert len(response.output.encode()) <= limit
        page = MessageToDict(response.structured_output)
        assert len(json.dumps(page, ensure_ascii=False).encode()) <= limit
        assert page["total"] == len(names) and 0 < len(page["assets"]) < len(names)
        listed += [asset["name"] for asset in page["assets"]]
        pages += 1
        token = page["next_page_token"]
        if not token:
            break
        assert response.output.splitlines()[-1].endswith(token)
    assert listed == names and pages > 1


async def test_one_asset_larger_than_max_output_bytes_is_a_clear_failure(start_server):
    server = await start_server(max_output_bytes=1024)
    await add_assets(server, Asset("huge", tags=tuple(f"tag-{t}-" + "x" * 200 for t in range(10))))
    response = await call(server, "asset_search")
    assert not response.success and response.error.code == "OUTPUT_TOO_LARGE"
    assert "'huge'" in response.error.message and "max_output_bytes" in response.error.message
    text, _ = await asset_tool(server, "asset_count")
    assert text == "1"


async def test_the_tools_describe_themselves_as_the_seed_lists_them(start_server):
    server = await start_server()
    for name in ("asset_count", "asset_search"):
        tool = (await server.stub.GetTool(tool_service_pb2.GetToolRequest(name=name))).tool
        assert tool.category == "asset" and tool.examples
        assert tool.annotations.read_only and tool.annotations.idempotent and not tool.annotations.open_world
        assert {"os", "platform", "site", "tag", "name"} <= set(MessageToDict(tool.input_schema)["properties"])
    count = (await server.stub.GetTool(tool_service_pb2.GetToolRequest(name="asset_count"))).tool
    assert count.description.startswith("Count assets in inventory")


def test_a_server_without_a_store_leaves_them_out_and_says_why():
    reasons = unserved_builtins(ToolServices())
    assert {"asset_count", "asset_search"} <= set(reasons["no store to keep the asset inventory in"])


async def test_a_default_server_misses_none_of_the_seeds_required_tools(start_server):
    server = await start_server()
    assert server.toolhost.config.required_tools == SEED_REQUIRED_TOOLS
    report = await server.stub.Reload(tool_service_pb2.ReloadRequest())
    assert {"asset_count", "asset_search"} <= set(report.tools)
    assert list(report.missing_required) == []


@pytest.mark.server
async def test_make_run_serves_the_asset_tools_and_misses_no_required_tool(tmp_path: Path):
    async with make_run(tmp_path) as server:
        stub = tool_service_pb2_grpc.ToolServiceStub(server.channel)

        async def called(name: str, **arguments: Any) -> tool_service_pb2.CallToolResponse:
            request = tool_service_pb2.CallToolRequest(name=name, arguments_json=json.dumps(arguments))
            response: tool_service_pb2.CallToolResponse = await stub.CallTool(request)
            assert response.success, response.error
            return response

        counted = await called("asset_count", os="Windows 10")
        assert counted.output == "0"
        searched = await called("asset_search")
        assert MessageToDict(searched.structured_output) == {"assets": [], "total": 0, "next_page_token": ""}
        assert "the inventory holds no assets" in searched.output
        report = await stub.Reload(tool_service_pb2.ReloadRequest())
    assert {"asset_count", "asset_search"} <= set(report.tools)
    assert list(report.missing_required) == []
