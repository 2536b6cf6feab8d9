"""The Python clients' AssetService methods against a real server: Client (in a thread) and AsyncClient, the
errors they raise (each a ToolhostError subclass carrying the server's reason and field violations), and the
requests they refuse to send."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from datetime import UTC
from pathlib import Path

import pytest

import toolhost
from toolhost_server.auth import hash_token

from helpers.servers import RunningServer, ServerFactory
from helpers.waiting import HANG_GUARD_SECONDS

CSV = ("name,os,site,tags,winrm_port\n"
       "ws-new,Microsoft Windows 10 Pro,berlin,a;b,5986\n"
       "WS-OLD,Ubuntu 24.04,after,,\n")
# Line 4: a name with a space; line 5: a port out of range.
BAD_CSV = CSV + "ws bad,x,y,,\nws-port,x,y,,70000\n"
YAML = "- name: ws-yaml\n  os: Microsoft Windows Server 2022\n  winrm: {ssl: true, authentication: basic}\n"


@pytest.fixture
async def server(start_server: ServerFactory) -> RunningServer:
    return await start_server()


def blocking_walk_through(target: str) -> None:
    with toolhost.Client(target, timeout=HANG_GUARD_SECONDS) as client:
        profile = toolhost.WinrmProfile(ssl=True, domain="CORP", credential="winrmberlin", authentication="basic")
        created = client.create_asset("ws-042", hostname="ws-042.corp.example.com", addresses=["192.0.2.42"],
                                      os="Microsoft Windows 10 Pro", platform="windows", site="berlin",
                                      tags=["finance"], winrm=profile)
        assert (created.name, created.addresses, created.tags, created.winrm) == (
            "ws-042", ("192.0.2.42",), ("finance",), profile)
        assert created.created_at.tzinfo is UTC and created.raw.name == "ws-042"
        with pytest.raises(toolhost.AlreadyExistsError) as taken:
            client.create_asset("WS-042")
        assert taken.value.reason == toolhost.ErrorReason.ALREADY_EXISTS

        assert client.get_asset("Ws-042") == created
        moved = client.update_asset("ws-042", winrm_port=5987)
        assert moved.winrm == toolhost.WinrmProfile(5987, True, "CORP", "winrmberlin", "basic")
        assert (moved.site, moved.tags) == ("berlin", ("finance",))  # not given: unchanged
        cleared = client.update_asset("ws-042", tags=[], hostname="")
        assert (cleared.tags, cleared.hostname, cleared.os) == ((), "", "Microsoft Windows 10 Pro")
        replaced = client.update_asset("ws-042", winrm=toolhost.WinrmProfile(), site="paris")
        assert (replaced.winrm, replaced.site) == (toolhost.WinrmProfile(), "paris")
        with pytest.raises(toolhost.NotFoundError) as missing:
            client.update_asset("ws-999", os="x")
        assert missing.value.reason == toolhost.ErrorReason.RESOURCE_NOT_FOUND

        assert client.delete_asset("ws-042").site == "paris"
        with pytest.raises(toolhost.NotFoundError):
            client.get_asset("ws-042")
        with pytest.raises(toolhost.NotFoundError):
            client.delete_asset("ws-042")


async def test_the_blocking_client_walks_an_asset_from_creation_to_deletion(server):
    await asyncio.to_thread(blocking_walk_through, server.target)


def blocking_listing(target: str) -> None:
    with toolhost.Client(target, timeout=HANG_GUARD_SECONDS) as client:
        client.create_asset("c", os="Microsoft Windows 10 Pro", platform="windows", site="berlin", tags=["Kiosk"])
        client.create_asset("a", os="Microsoft Windows 10 Enterprise", platform="windows", site="paris")
        client.create_asset("b", os="Microsoft Windows 10 Pro", platform="windows", site="berlin")
        client.create_asset("d", os="Ubuntu 24.04", platform="linux", site="berlin", tags=["kiosk"])

        def names(**filters: object) -> list[str]:
            return [asset.name for asset in client.list_assets(**filters)]  # type: ignore[arg-type]

        assert names(page_size=1) == ["a", "b", "c", "d"]
        assert names(os="WINDOWS 10", page_size=2) == ["a", "b", "c"]
        assert names(site="Berlin", platform="windows", name="?") == ["b", "c"]
        assert names(tag="KIOSK") == ["c", "d"]
        assert names(site="tokyo") == []

        first = client.list_assets_page(site="berlin", page_size=2)
        assert ([a.name for a in first.assets], first.total_size) == (["b", "c"], 3) and first.next_page_token
        last = client.list_assets_page(site="berlin", page_size=2, page_token=first.next_page_token)
        assert ([a.name for a in last.assets], last.next_page_token, last.total_size) == (["d"], "", 3)
        # A token continues the list it came from, not one with other filters.
        with pytest.raises(toolhost.InvalidArgumentError):
            client.list_assets_page(site="paris", page_size=2, page_token=first.next_page_token)
        with pytest.raises(toolhost.InvalidArgumentError):
            next(client.list_assets(page_size=-1))


async def test_the_blocking_client_lists_with_filters_over_every_page(server):
    await asyncio.to_thread(blocking_listing, server.target)


async def test_the_async_client_imports_all_or_nothing(server):
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS) as client:
        await client.create_asset("ws-old", site="before")
        checked = await client.import_assets("csv", CSV, validate_only=True)
        assert checked == toolhost.AssetImportSummary(created=1, replaced=1)
        with pytest.raises(toolhost.NotFoundError):
            await client.get_asset("ws-new")

        with pytest.raises(toolhost.InvalidArgumentError) as refused:
            await client.import_assets("csv", BAD_CSV)
        problems = [f"{v.field} {v.description}" for v in refused.value.field_violations]
        assert len(problems) == 2 and "line 4" in problems[0] and "line 5" in problems[1], problems
        assert (await client.get_asset("ws-old")).site == "before"

        assert await client.import_assets("csv", CSV) == toolhost.AssetImportSummary(created=1, replaced=1)
        fresh = await client.get_asset("ws-new")
        assert (fresh.tags, fresh.winrm.port) == (("a", "b"), 5986)
        assert (await client.get_asset("ws-old")).site == "after"
        assert await client.import_assets("yaml", YAML) == toolhost.AssetImportSummary(created=1, replaced=0)
        assert (await client.get_asset("ws-yaml")).winrm == toolhost.WinrmProfile(ssl=True, authentication="basic")

        listed = [asset.name.lower() async for asset in client.list_assets(name="ws-*", page_size=1)]
        assert listed == ["ws-new", "ws-old", "ws-yaml"]
        page = await client.list_assets_page(name="ws-*", page_size=1)
        assert (page.total_size, len(page.assets)) == (3, 1) and page.next_page_token
        updated = await client.update_asset("ws-yaml", winrm_authentication="ntlm", winrm_ssl=False)
        assert updated.winrm.authentication == "ntlm" and updated.winrm.ssl is False
        assert (await client.delete_asset("ws-yaml")).name == "ws-yaml"
        with pytest.raises(toolhost.NotFoundError):
            await client.delete_asset("ws-yaml")


async def test_an_unsafe_profile_is_invalid_naming_the_field_and_nothing_is_stored(server):
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS) as client:
        # Basic authentication over plain HTTP would send the password in clear.
        with pytest.raises(toolhost.InvalidArgumentError) as refused:
            await client.create_asset("clear", winrm=toolhost.WinrmProfile(authentication="basic"))
        assert any("winrm" in v.field for v in refused.value.field_violations), refused.value.field_violations
        with pytest.raises(toolhost.NotFoundError):
            await client.get_asset("clear")


async def test_hostile_values_come_back_as_invalid_argument_not_as_a_broken_call(server):
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS) as client:
        for name in ("ws\x00042", "../../etc/passwd", "x" * 10_000, "ws-042\n"):
            with pytest.raises(toolhost.InvalidArgumentError):
                await client.create_asset(name)
        with pytest.raises(toolhost.InvalidArgumentError):
            await client.create_asset("ws-1", hostname="host;rm -rf /", addresses=["not-an-ip"])
        with pytest.raises(toolhost.InvalidArgumentError):
            await client.import_assets("yaml", "- name: [unclosed\n")
        assert [a async for a in client.list_assets()] == []


async def test_a_document_over_the_message_limit_is_refused_by_grpc(start_server: ServerFactory):
    server = await start_server(max_message_bytes=64 * 1024)
    rows = "".join(f"ws-{n},Microsoft Windows 10 Pro,berlin\n" for n in range(5000))
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS) as client:
        with pytest.raises(toolhost.ResourceExhaustedError):
            await client.import_assets("csv", "name,os,site\n" + rows)
        assert (await client.list_assets_page()).total_size == 0


AUTH_FILE = """\
roles:
  inventory:
    manage_assets: true
  caller:
    call: {{tools: ["*"]}}
tokens:
  - {{name: inventory-token, sha256: {inventory}, roles: [inventory]}}
  - {{name: caller-token, sha256: {caller}, roles: [caller]}}
"""


async def test_only_a_role_with_manage_assets_may_use_the_inventory(start_server: ServerFactory, tmp_path: Path):
    tokens = {role: secrets.token_urlsafe(32) for role in ("inventory", "caller")}
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text(AUTH_FILE.format(**{role: hash_token(token) for role, token in tokens.items()}))
    server = await start_server(auth_file=str(auth_file))
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS, token=tokens["inventory"],
                                    insecure_token_ok=True) as allowed:
        await allowed.create_asset("ws-1", os="Microsoft Windows 10 Pro")
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS, token=tokens["caller"],
                                    insecure_token_ok=True) as client:
        # Refused before the request is looked at: the invalid values would otherwise be INVALID_ARGUMENT.
        calls: list[Callable[[], Awaitable[object]]] = [
            lambda: client.create_asset("bad name\x00"), lambda: client.get_asset("ws-1"),
            lambda: client.list_assets_page(page_size=-1), lambda: client.update_asset("ws-1", winrm_port=70000),
            lambda: client.delete_asset("ws-1"), lambda: client.import_assets("csv", BAD_CSV),
            lambda: client.import_assets("yaml", YAML, validate_only=True),
        ]
        for call in calls:
            with pytest.raises(toolhost.PermissionDeniedError) as refused:
                await call()
            assert refused.value.reason == toolhost.ErrorReason.PERMISSION_DENIED
        with pytest.raises(toolhost.PermissionDeniedError):
            [asset async for asset in client.list_assets()]
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS, token=tokens["inventory"],
                                    insecure_token_ok=True) as allowed:
        assert [a.name async for a in allowed.list_assets()] == ["ws-1"]


async def test_a_store_it_cannot_use_is_unavailable_with_store_unavailable(start_server: ServerFactory,
                                                                          tmp_path: Path):
    not_a_directory = tmp_path / "data-is-a-file"
    not_a_directory.write_text("")
    server = await start_server(data_dir=str(not_a_directory))
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS) as client:
        calls: list[Callable[[], Awaitable[object]]] = [
            client.list_assets_page, lambda: client.create_asset("ws-1"), lambda: client.import_assets("csv", CSV)]
        for call in calls:
            with pytest.raises(toolhost.UnavailableError) as unavailable:
                await call()
            assert unavailable.value.reason == toolhost.ErrorReason.STORE_UNAVAILABLE
            assert str(tmp_path) not in unavailable.value.message


def test_requests_are_checked_in_the_client():
    client = toolhost.Client("127.0.0.1:1")
    with pytest.raises(ValueError, match="at least one field"):
        client.update_asset("x")
    with pytest.raises(ValueError, match="not both"):
        client.update_asset("x", winrm=toolhost.WinrmProfile(), winrm_port=5986)
    with pytest.raises(TypeError, match="list of strings"):
        client.create_asset("x", tags="finance")
    with pytest.raises(TypeError, match="list of strings"):
        client.update_asset("x", addresses="192.0.2.1")
    with pytest.raises(TypeError, match="WinrmProfile"):
        client.create_asset("x", winrm={"port": 5986})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'ntlm' or 'basic'"):
        client.create_asset("x", winrm=toolhost.WinrmProfile(authentication="kerberos"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'ntlm' or 'basic'"):
        client.update_asset("x", winrm_authentication="digest")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'yaml' or 'csv'"):
        client.import_assets("xml", "<assets/>")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="text"):
        client.import_assets("csv", b"name\nws-1\n")  # type: ignore[arg-type]
    # Text that is no UTF-8 (a lone surrogate, as surrogateescape makes of a bad byte) never leaves the client.
    with pytest.raises(UnicodeEncodeError):
        client.import_assets("csv", "name\nws-\udc80\n")
    client.close()
