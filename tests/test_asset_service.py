"""AssetService over gRPC against a real server: every RPC through the generated stub, field masks, filtered
pages and their tokens, imports (all or nothing), the error codes and reasons, who may call it, and the audit."""

from __future__ import annotations

import logging
import secrets
import socket

import grpc
import pytest
from google.protobuf import field_mask_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from toolhost.v1 import asset_service_pb2 as pb
from toolhost.v1 import asset_service_pb2_grpc
from toolhost_server.auth import AuthFileError, hash_token, read_auth_file

from helpers.servers import RunningServer, ServerFactory
from helpers.status import error_details

SERVICE = "toolhost.v1.AssetService"


def stub_of(server: RunningServer) -> asset_service_pb2_grpc.AssetServiceStub:
    return asset_service_pb2_grpc.AssetServiceStub(server.channel)


def workstation(name: str = "ws-042", **fields) -> pb.Asset:
    fields.setdefault("hostname", f"{name.lower()}.corp.example.com")
    fields.setdefault("os", "Microsoft Windows 10 Pro")
    fields.setdefault("platform", "windows")
    fields.setdefault("site", "berlin-dc1")
    return pb.Asset(name=name, **fields)


async def refused(rpc, request, code: grpc.StatusCode, reason: str, metadata=()) -> grpc.aio.AioRpcError:
    """The refusal `rpc(request)` must be, with its code and ErrorInfo reason."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await rpc(request, metadata=metadata)
    assert caught.value.code() == code, caught.value.details()
    info, _ = error_details(caught.value)
    assert info.reason == reason, caught.value.details()
    return caught.value


async def names_of(stub, asset_filter: pb.AssetFilter | None = None, page_size: int = 0) -> list[str]:
    """Every asset's name the filter matches, page after page."""
    names, token = [], ""
    while True:
        page = await stub.ListAssets(pb.ListAssetsRequest(filter=asset_filter, page_size=page_size, page_token=token))
        names += [asset.name for asset in page.assets]
        token = page.next_page_token
        if not token:
            return names


# --- the life of an asset ---------------------------------------------------------------------------------------


async def test_create_get_update_delete_through_the_stub(start_server: ServerFactory):
    stub = stub_of(await start_server())
    created = (await stub.CreateAsset(pb.CreateAssetRequest(asset=workstation(
        addresses=["10.0.0.42"], tags=["finance", "vip"],
        winrm=pb.WinrmProfile(domain="CORP", credential="winrmcorp"),
        create_time={"seconds": 1})))).asset
    assert (created.name, created.hostname, list(created.addresses)) == \
        ("ws-042", "ws-042.corp.example.com", ["10.0.0.42"])
    assert list(created.tags) == ["finance", "vip"] and created.winrm.domain == "CORP"
    # Defaults stay as stored (0: 5985 when used; NTLM when unset), and the times are the server's.
    assert (created.winrm.port, created.winrm.ssl) == (0, False)
    assert created.winrm.authentication in (pb.WINRM_AUTHENTICATION_NTLM, pb.WINRM_AUTHENTICATION_UNSPECIFIED)
    assert created.create_time.seconds > 1 and created.update_time == created.create_time

    assert (await stub.GetAsset(pb.GetAssetRequest(name="WS-042"))).asset == created  # regardless of case

    updated = (await stub.UpdateAsset(pb.UpdateAssetRequest(
        asset=pb.Asset(name="ws-042", site="ignored", winrm=pb.WinrmProfile(
            port=5986, ssl=True, authentication=pb.WINRM_AUTHENTICATION_BASIC, domain="ignored")),
        update_mask=field_mask_pb2.FieldMask(paths=["winrm.port", "winrm.ssl", "winrm.authentication"])))).asset
    assert (updated.winrm.port, updated.winrm.ssl, updated.winrm.authentication) == \
        (5986, True, pb.WINRM_AUTHENTICATION_BASIC)
    # What the mask does not name stays: the site, and the rest of the profile.
    assert updated.site == "berlin-dc1" and updated.winrm.domain == "CORP" and updated.winrm.credential == "winrmcorp"
    assert updated.create_time == created.create_time and updated.update_time.ToDatetime() >= \
        created.update_time.ToDatetime()

    deleted = (await stub.DeleteAsset(pb.DeleteAssetRequest(name="Ws-042"))).asset
    assert deleted.winrm.port == 5986
    await refused(stub.GetAsset, pb.GetAssetRequest(name="ws-042"), grpc.StatusCode.NOT_FOUND, "RESOURCE_NOT_FOUND")
    await refused(stub.DeleteAsset, pb.DeleteAssetRequest(name="ws-042"), grpc.StatusCode.NOT_FOUND,
                  "RESOURCE_NOT_FOUND")
    await refused(stub.UpdateAsset, pb.UpdateAssetRequest(asset=pb.Asset(name="ws-042", os="x")),
                  grpc.StatusCode.NOT_FOUND, "RESOURCE_NOT_FOUND")


async def test_a_name_taken_regardless_of_case_is_already_exists(start_server: ServerFactory):
    stub = stub_of(await start_server())
    await stub.CreateAsset(pb.CreateAssetRequest(asset=workstation("ws-042")))
    await refused(stub.CreateAsset, pb.CreateAssetRequest(asset=workstation("WS-042")),
                  grpc.StatusCode.ALREADY_EXISTS, "ALREADY_EXISTS")


@pytest.mark.parametrize(("asset", "field"), [
    (pb.Asset(name=""), "asset.name"),
    (pb.Asset(name="-starts-with-a-dash"), "asset.name"),
    (pb.Asset(name="ws-1", hostname="https://ws-1.example.com/"), "asset.hostname"),
    (pb.Asset(name="ws-1", addresses=["10.0.0.256"]), "asset.addresses"),
    (pb.Asset(name="ws-1", winrm=pb.WinrmProfile(authentication=pb.WINRM_AUTHENTICATION_BASIC)), "asset.winrm"),
    (pb.Asset(name="ws-1", winrm=pb.WinrmProfile(port=70000)), "asset.winrm.port"),
    (pb.Asset(name="ws-1", winrm=pb.WinrmProfile(authentication=7)), "asset.winrm.authentication"),
])
async def test_an_asset_that_cannot_be_stored_is_invalid_argument_naming_the_field(
        start_server: ServerFactory, asset: pb.Asset, field: str):
    stub = stub_of(await start_server())
    error = await refused(stub.CreateAsset, pb.CreateAssetRequest(asset=asset), grpc.StatusCode.INVALID_ARGUMENT,
                          "INVALID_REQUEST")
    _, violations = error_details(error)
    assert violations and any(name.startswith(field) for name, _ in violations), violations
    assert field in (error.details() or "")
    assert (await stub.ListAssets(pb.ListAssetsRequest())).total_size == 0


async def test_basic_authentication_needs_ssl_on_update_too(start_server: ServerFactory):
    stub = stub_of(await start_server())
    await stub.CreateAsset(pb.CreateAssetRequest(asset=workstation(winrm=pb.WinrmProfile(
        ssl=True, authentication=pb.WINRM_AUTHENTICATION_BASIC))))
    # Turning TLS off under basic authentication would send the password in clear: refused, nothing changed.
    error = await refused(stub.UpdateAsset, pb.UpdateAssetRequest(
        asset=pb.Asset(name="ws-042"), update_mask=field_mask_pb2.FieldMask(paths=["winrm.ssl"])),
        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST")
    assert "ssl" in (error.details() or "")
    assert (await stub.GetAsset(pb.GetAssetRequest(name="ws-042"))).asset.winrm.ssl is True


# --- update masks (AIP-134) -------------------------------------------------------------------------------------


async def test_an_empty_mask_changes_only_the_fields_the_request_populates(start_server: ServerFactory):
    stub = stub_of(await start_server())
    await stub.CreateAsset(pb.CreateAssetRequest(asset=workstation(tags=["a"], winrm=pb.WinrmProfile(
        domain="CORP", credential="winrmcorp"))))
    updated = (await stub.UpdateAsset(pb.UpdateAssetRequest(asset=pb.Asset(
        name="ws-042", site="paris", winrm=pb.WinrmProfile(port=5990))))).asset
    assert (updated.site, updated.winrm.port) == ("paris", 5990)
    # Within the profile too, only the populated field changed.
    assert (updated.os, list(updated.tags), updated.winrm.domain, updated.winrm.credential) == \
        ("Microsoft Windows 10 Pro", ["a"], "CORP", "winrmcorp")


async def test_a_named_field_is_cleared_and_star_replaces_every_mutable_field(start_server: ServerFactory):
    stub = stub_of(await start_server())
    await stub.CreateAsset(pb.CreateAssetRequest(asset=workstation(tags=["a"], winrm=pb.WinrmProfile(domain="C"))))
    cleared = (await stub.UpdateAsset(pb.UpdateAssetRequest(
        asset=pb.Asset(name="ws-042"), update_mask=field_mask_pb2.FieldMask(paths=["tags", "winrm.domain"])))).asset
    assert list(cleared.tags) == [] and cleared.winrm.domain == "" and cleared.site == "berlin-dc1"
    replaced = (await stub.UpdateAsset(pb.UpdateAssetRequest(
        asset=pb.Asset(name="ws-042", os="Ubuntu 24.04"), update_mask=field_mask_pb2.FieldMask(paths=["*"])))).asset
    assert (replaced.name, replaced.os, replaced.hostname, replaced.site, replaced.platform) == \
        ("ws-042", "Ubuntu 24.04", "", "", "")
    winrm = (await stub.UpdateAsset(pb.UpdateAssetRequest(
        asset=pb.Asset(name="ws-042", winrm=pb.WinrmProfile(port=1234)),
        update_mask=field_mask_pb2.FieldMask(paths=["winrm"])))).asset.winrm
    assert (winrm.port, winrm.domain) == (1234, "")


@pytest.mark.parametrize(("paths", "hint"), [
    (["name"], "cannot change"),
    (["create_time"], "set by the server"),
    (["winrm.password"], "no field UpdateAsset changes"),
    (["addresses", "hostname.x"], "no field UpdateAsset changes"),
    ([], "changes no field"),
])
async def test_a_mask_naming_what_update_does_not_change_is_refused(start_server: ServerFactory, paths, hint):
    stub = stub_of(await start_server())
    await stub.CreateAsset(pb.CreateAssetRequest(asset=workstation()))
    error = await refused(stub.UpdateAsset, pb.UpdateAssetRequest(
        asset=pb.Asset(name="ws-042"), update_mask=field_mask_pb2.FieldMask(paths=paths)),
        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST")
    assert hint in (error.details() or "")


# --- listing ----------------------------------------------------------------------------------------------------


async def test_list_filters_as_asset_count_does_and_counts_every_match(start_server: ServerFactory):
    stub = stub_of(await start_server())
    for asset in (
        workstation("ws-001", tags=["finance"]),
        workstation("WS-002", os="Microsoft Windows 10 Enterprise", site="paris"),
        workstation("ws-003", os="Microsoft Windows 11 Pro", tags=["Finance", "vip"]),
        workstation("db-001", os="Ubuntu 24.04", platform="linux", tags=["finance"]),
    ):
        await stub.CreateAsset(pb.CreateAssetRequest(asset=asset))

    async def listed(**filters) -> tuple[list[str], int]:
        page = await stub.ListAssets(pb.ListAssetsRequest(filter=pb.AssetFilter(**filters)))
        return [asset.name for asset in page.assets], page.total_size

    assert await listed() == (["db-001", "ws-001", "WS-002", "ws-003"], 4)  # sorted regardless of case
    assert await listed(os="windows 10") == (["ws-001", "WS-002"], 2)
    assert await listed(platform="LINUX") == (["db-001"], 1)
    assert await listed(site="Paris") == (["WS-002"], 1)
    assert await listed(tag="FINANCE") == (["db-001", "ws-001", "ws-003"], 3)
    assert await listed(name="WS-00?") == (["ws-001", "WS-002", "ws-003"], 3)
    assert await listed(name="*1", tag="finance", os="windows") == (["ws-001"], 1)
    assert await listed(os="windows 10%") == ([], 0)  # `%` is no wildcard


async def test_pages_continue_the_same_filtered_list_and_a_token_is_bound_to_its_filter(
        start_server: ServerFactory):
    stub = stub_of(await start_server())
    for n in range(7):
        await stub.CreateAsset(pb.CreateAssetRequest(asset=workstation(f"ws-{n:03}", site="lab" if n % 2 else "hq")))
    lab = pb.AssetFilter(site="lab")
    first = await stub.ListAssets(pb.ListAssetsRequest(filter=lab, page_size=2))
    assert [a.name for a in first.assets] == ["ws-001", "ws-003"] and first.total_size == 3 and first.next_page_token
    assert await names_of(stub, lab, page_size=2) == ["ws-001", "ws-003", "ws-005"]
    assert await names_of(stub, page_size=3) == [f"ws-{n:03}" for n in range(7)]
    # The token of the `lab` list, with another filter: refused, not a page of another list.
    for other in (pb.AssetFilter(site="hq"), pb.AssetFilter(), pb.AssetFilter(site="lab", tag="x")):
        error = await refused(stub.ListAssets, pb.ListAssetsRequest(filter=other, page_token=first.next_page_token),
                              grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PAGE_TOKEN")
        assert "other filters" in (error.details() or "")
    await refused(stub.ListAssets, pb.ListAssetsRequest(page_size=-1), grpc.StatusCode.INVALID_ARGUMENT,
                  "INVALID_REQUEST")
    # Past the maximum: clamped, not refused.
    assert len((await stub.ListAssets(pb.ListAssetsRequest(page_size=5000))).assets) == 7


async def test_a_page_of_big_assets_stays_under_the_message_limit(start_server: ServerFactory):
    # Assets of 64 tags of 250 characters are about 16 KB each: 40 of them fill more than half of 512 KiB.
    limit = 512 * 1024
    stub = stub_of(await start_server(max_message_bytes=limit))
    names = [f"big-{n:02}" for n in range(40)]
    for name in names:
        tags = [f"{name}-{t:02}-" + "x" * 240 for t in range(64)]
        await stub.CreateAsset(pb.CreateAssetRequest(asset=workstation(name, tags=tags)))
    pages, token = [], ""
    while True:
        page = await stub.ListAssets(pb.ListAssetsRequest(page_size=1000, page_token=token))
        assert page.ByteSize() <= limit // 2 + 1024 and page.total_size == 40
        pages.append([asset.name for asset in page.assets])
        token = page.next_page_token
        if not token:
            break
    assert len(pages) > 1 and all(pages)
    assert [name for page in pages for name in page] == names  # nothing lost or repeated


# --- import -----------------------------------------------------------------------------------------------------

YAML_DOCUMENT = """\
- name: ws-001
  os: Microsoft Windows 10 Pro
  tags: [finance]
  winrm: {port: 5986, ssl: true, authentication: basic, credential: winrmcorp}
- name: ws-002
  hostname: ws-002.corp.example.com
  addresses: [10.0.0.2]
"""
CSV_DOCUMENT = """\
name,hostname,addresses,os,platform,site,tags,winrm_port,winrm_ssl,winrm_domain,winrm_credential,winrm_authentication
WS-001,ws-001.corp.example.com,10.0.0.1;10.0.1.1,Microsoft Windows 11 Pro,windows,paris,finance;vip,,false,CORP,,ntlm
db-001,,,Ubuntu 24.04,linux,paris,,,,,,
"""


async def test_import_creates_then_replaces_by_name_and_validate_only_stores_nothing(start_server: ServerFactory):
    stub = stub_of(await start_server())
    checked = await stub.ImportAssets(pb.ImportAssetsRequest(format=pb.ASSET_IMPORT_FORMAT_YAML,
                                                             content=YAML_DOCUMENT, validate_only=True))
    assert (checked.created, checked.replaced) == (2, 0)
    assert (await stub.ListAssets(pb.ListAssetsRequest())).total_size == 0

    done = await stub.ImportAssets(pb.ImportAssetsRequest(format=pb.ASSET_IMPORT_FORMAT_YAML, content=YAML_DOCUMENT))
    assert (done.created, done.replaced) == (2, 0)
    first = (await stub.GetAsset(pb.GetAssetRequest(name="ws-001"))).asset
    assert (first.winrm.port, first.winrm.ssl, first.winrm.authentication, list(first.tags)) == \
        (5986, True, pb.WINRM_AUTHENTICATION_BASIC, ["finance"])

    # The CSV names ws-001 in capitals: it replaces the asset, whose profile is now the CSV's.
    again = await stub.ImportAssets(pb.ImportAssetsRequest(format=pb.ASSET_IMPORT_FORMAT_CSV, content=CSV_DOCUMENT))
    assert (again.created, again.replaced) == (1, 1)
    replaced = (await stub.GetAsset(pb.GetAssetRequest(name="ws-001"))).asset
    assert (replaced.os, list(replaced.addresses), list(replaced.tags), replaced.winrm.ssl, replaced.winrm.domain) \
        == ("Microsoft Windows 11 Pro", ["10.0.0.1", "10.0.1.1"], ["finance", "vip"], False, "CORP")
    # A replaced asset takes the document's record whole, the spelling of its name too.
    assert await names_of(stub) == ["db-001", "WS-001", "ws-002"]


async def test_one_bad_record_imports_nothing_and_every_problem_is_listed_by_line(start_server: ServerFactory):
    stub = stub_of(await start_server())
    await stub.CreateAsset(pb.CreateAssetRequest(asset=workstation("ws-001", site="before")))
    document = CSV_DOCUMENT.replace("WS-001,", "ws-001,") + \
        "bad name,,,,,,,,,,,\n" + \
        "ws-009,,10.0.0.300,,,,,,,,,\n" + \
        "ws-010,,,,,,,,,,,basic\n"
    error = await refused(stub.ImportAssets, pb.ImportAssetsRequest(format=pb.ASSET_IMPORT_FORMAT_CSV,
                                                                    content=document),
                          grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST")
    _, violations = error_details(error)
    descriptions = [description for _, description in violations]
    # Lines 4, 5 and 6 of the document (the header is line 1), each with its field.
    assert [d.split(":")[0] for d in descriptions] == ["line 4", "line 5", "line 6"], violations
    assert {field.split(".")[-1].split("[")[0] for field, _ in violations} >= {"name", "addresses"}
    assert "line 4" in (error.details() or "") and "nothing changed" in (error.details() or "")
    # All or nothing: the valid records were not stored either, and ws-001 is as it was.
    assert await names_of(stub) == ["ws-001"]
    assert (await stub.GetAsset(pb.GetAssetRequest(name="ws-001"))).asset.site == "before"


@pytest.mark.parametrize(("format", "content", "hint"), [
    (pb.ASSET_IMPORT_FORMAT_UNSPECIFIED, YAML_DOCUMENT, "yaml or csv"),
    (9, YAML_DOCUMENT, "yaml or csv"),
    (pb.ASSET_IMPORT_FORMAT_YAML, "- name: [unclosed", "line"),
    (pb.ASSET_IMPORT_FORMAT_CSV, "hostname\nws-1.example.com\n", "name"),
])
async def test_a_document_that_cannot_be_read_is_invalid_argument(start_server: ServerFactory, format, content,
                                                                  hint):
    stub = stub_of(await start_server())
    error = await refused(stub.ImportAssets, pb.ImportAssetsRequest(format=format, content=content),
                          grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST")
    assert hint in (error.details() or "")


# --- rights and audit -------------------------------------------------------------------------------------------

ROLES = ("caller", "toolsmith", "inventory", "admin")


def auth_file_text(tokens: dict[str, str]) -> str:
    """A plain caller, a tool manager (manage_tools, not manage_assets), an inventory keeper, an admin."""
    return """\
roles:
  caller:
    call: {tools: ["*"]}
  toolsmith:
    manage_tools: true
  inventory:
    manage_assets: true
  admin:
    admin: true
tokens:
""" + "".join(f"  - {{name: {role}-token, sha256: {hash_token(token)}, roles: [{role}]}}\n"
              for role, token in tokens.items())


@pytest.mark.parametrize("value", ['"true"', "{credentials: [winrm]}", "[]", "1"])
def test_manage_assets_in_the_auth_file_is_true_or_false(tmp_path, value):
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text(f"roles:\n  inventory:\n    manage_assets: {value}\n")
    with pytest.raises(AuthFileError) as caught:
        read_auth_file(auth_file)
    assert caught.value.line == 3 and "manage_assets must be true or false" in str(caught.value)
    auth_file.write_text("roles:\n  inventory:\n    manage_assets: true\n  smith:\n    manage_tools: true\n"
                         "  boss:\n    admin: true\n")
    roles = read_auth_file(auth_file).roles
    # Admin implies it; manage_tools does not.
    assert [roles[r].may_manage_assets for r in ("inventory", "smith", "boss")] == [True, False, True]


@pytest.fixture
async def authenticated(start_server: ServerFactory, tmp_path) -> tuple[RunningServer, dict[str, str]]:
    tokens = {role: secrets.token_urlsafe(32) for role in ROLES}
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text(auth_file_text(tokens))
    return await start_server(auth_file=str(auth_file)), tokens


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


def every_rpc(stub: asset_service_pb2_grpc.AssetServiceStub, name: str) -> list[tuple[object, object]]:
    """A request to every RPC that succeeds for a caller with the right, in an order that leaves nothing behind."""
    return [
        (stub.CreateAsset, pb.CreateAssetRequest(asset=workstation(name))),
        (stub.GetAsset, pb.GetAssetRequest(name=name)),
        (stub.ListAssets, pb.ListAssetsRequest(filter=pb.AssetFilter(name=name))),
        (stub.UpdateAsset, pb.UpdateAssetRequest(asset=pb.Asset(name=name, site="paris"))),
        (stub.ImportAssets, pb.ImportAssetsRequest(format=pb.ASSET_IMPORT_FORMAT_YAML,
                                                   content=f"- {{name: {name}, site: rome}}\n")),
        (stub.DeleteAsset, pb.DeleteAssetRequest(name=name)),
    ]


def malformed_rpcs(stub: asset_service_pb2_grpc.AssetServiceStub, name: str) -> list[tuple[object, object]]:
    """A request to every RPC that the server refuses for what it holds (INVALID_ARGUMENT), were the caller
    allowed to send it."""
    return [
        (stub.CreateAsset, pb.CreateAssetRequest(asset=pb.Asset(name=name, addresses=["x"], winrm=pb.WinrmProfile(
            port=-1, authentication=9)))),
        (stub.GetAsset, pb.GetAssetRequest(name="no name\x00")),
        (stub.ListAssets, pb.ListAssetsRequest(page_size=-1, page_token="not-a-token")),
        (stub.UpdateAsset, pb.UpdateAssetRequest(asset=pb.Asset(name=name), update_mask=field_mask_pb2.FieldMask(
            paths=["name", "winrm.password"]))),
        (stub.ImportAssets, pb.ImportAssetsRequest(format=pb.ASSET_IMPORT_FORMAT_UNSPECIFIED, content="\x00")),
        (stub.DeleteAsset, pb.DeleteAssetRequest(name="")),
    ]


@pytest.mark.parametrize("requests", [every_rpc, malformed_rpcs])
def test_the_rights_tests_cover_every_rpc_of_the_service(requests):
    service = pb.DESCRIPTOR.services_by_name["AssetService"]
    stub = asset_service_pb2_grpc.AssetServiceStub(grpc.insecure_channel("127.0.0.1:1"))
    called = {rpc._method.decode().rsplit("/", 1)[1] for rpc, _ in requests(stub, "x")}
    assert called == {method.name for method in service.methods}


async def test_a_malformed_request_is_invalid_argument_for_a_caller_with_the_right(authenticated):
    # The other half of the next test: these requests are refused for what they hold when the right is there.
    server, tokens = authenticated
    stub = stub_of(server)
    await stub.CreateAsset(pb.CreateAssetRequest(asset=workstation("kept")), metadata=bearer(tokens["admin"]))
    for rpc, request in malformed_rpcs(stub, "kept"):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await rpc(request, metadata=bearer(tokens["inventory"]))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (rpc, caught.value.details())


@pytest.mark.parametrize("role", ["caller", "toolsmith"])
async def test_a_caller_without_manage_assets_is_denied_before_its_request_is_looked_at(
        authenticated, caplog: pytest.LogCaptureFixture, role: str):
    server, tokens = authenticated
    stub = stub_of(server)
    await stub.CreateAsset(pb.CreateAssetRequest(asset=workstation("kept")), metadata=bearer(tokens["admin"]))
    caplog.set_level(logging.INFO, logger="toolhost.audit")
    for rpc, request in [*malformed_rpcs(stub, "kept"), *every_rpc(stub, "kept")]:
        error = await refused(rpc, request, grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED",
                              bearer(tokens[role]))
        assert "manage_assets" in (error.details() or "") and f"{role}-token" in (error.details() or "")
    # Every refused change is audited as a refusal of the right, under the name the request gave.
    refusals = [(r.audit["tool"], r.audit["outcome"]) for r in caplog.records  # type: ignore[attr-defined]
                if hasattr(r, "audit") and r.audit["caller"] == f"{role}-token"]
    assert ("asset:kept", "ASSET_CREATE_REFUSED:PERMISSION_DENIED") in refusals
    assert ("asset:kept", "ASSET_UPDATE_REFUSED:PERMISSION_DENIED") in refusals
    assert ("asset:kept", "ASSET_DELETE_REFUSED:PERMISSION_DENIED") in refusals
    assert ("assets:import", "ASSETS_IMPORT_REFUSED:PERMISSION_DENIED") in refusals
    assert {outcome.split(":")[1] for _, outcome in refusals} == {"PERMISSION_DENIED"}
    # Nothing changed.
    kept = (await stub.GetAsset(pb.GetAssetRequest(name="kept"), metadata=bearer(tokens["admin"]))).asset
    assert kept == (await stub.ListAssets(pb.ListAssetsRequest(), metadata=bearer(tokens["admin"]))).assets[0]
    assert kept.site == "berlin-dc1"


@pytest.mark.parametrize("role", ["inventory", "admin"])
async def test_manage_assets_and_admin_may_call_every_rpc_and_each_change_is_audited(
        authenticated, caplog: pytest.LogCaptureFixture, role: str):
    server, tokens = authenticated
    stub = stub_of(server)
    caplog.set_level(logging.INFO, logger="toolhost.audit")
    for rpc, request in every_rpc(stub, f"made-by-{role}"):
        await rpc(request, metadata=bearer(tokens[role]))
    assert (await stub.ListAssets(pb.ListAssetsRequest(), metadata=bearer(tokens[role]))).total_size == 0
    changes = [(r.audit["tool"], r.audit["outcome"], tuple(r.audit["argument_keys"]))
               for r in caplog.records if hasattr(r, "audit")]  # type: ignore[attr-defined]
    name = f"asset:made-by-{role}"
    assert changes == [(name, "ASSET_CREATED", ()), (name, "ASSET_UPDATED", ("site",)),
                       ("assets:import", "ASSETS_IMPORTED", ("content", "format")), (name, "ASSET_DELETED", ())]
    assert all(r.audit["caller"] == f"{role}-token" for r in caplog.records if hasattr(r, "audit"))


async def test_an_unauthenticated_request_is_refused_before_anything(authenticated):
    server, _ = authenticated
    stub = stub_of(server)
    await refused(stub.ListAssets, pb.ListAssetsRequest(), grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED")
    await refused(stub.CreateAsset, pb.CreateAssetRequest(asset=workstation()), grpc.StatusCode.UNAUTHENTICATED,
                  "UNAUTHENTICATED", bearer("not-a-token-" * 4))


async def test_a_refused_change_is_audited_with_its_reason(start_server: ServerFactory,
                                                           caplog: pytest.LogCaptureFixture):
    stub = stub_of(await start_server())
    await stub.CreateAsset(pb.CreateAssetRequest(asset=workstation()))
    caplog.set_level(logging.INFO, logger="toolhost.audit")
    await refused(stub.CreateAsset, pb.CreateAssetRequest(asset=workstation()), grpc.StatusCode.ALREADY_EXISTS,
                  "ALREADY_EXISTS")
    await refused(stub.DeleteAsset, pb.DeleteAssetRequest(name="ws-999"), grpc.StatusCode.NOT_FOUND,
                  "RESOURCE_NOT_FOUND")
    await refused(stub.ImportAssets, pb.ImportAssetsRequest(format=pb.ASSET_IMPORT_FORMAT_YAML, content="- {}\n"),
                  grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST")
    outcomes = [(r.audit["tool"], r.audit["outcome"]) for r in caplog.records if hasattr(r, "audit")]  # type: ignore[attr-defined]
    assert outcomes == [("asset:ws-042", "ASSET_CREATE_REFUSED:ALREADY_EXISTS"),
                        ("asset:ws-999", "ASSET_DELETE_REFUSED:RESOURCE_NOT_FOUND"),
                        ("assets:import", "ASSETS_IMPORT_REFUSED:INVALID_REQUEST")]


# --- the service as a whole -------------------------------------------------------------------------------------


async def test_health_and_reflection_name_the_service(start_server: ServerFactory):
    server = await start_server()
    answer = await health_pb2_grpc.HealthStub(server.channel).Check(health_pb2.HealthCheckRequest(service=SERVICE))
    assert answer.status == health_pb2.HealthCheckResponse.SERVING
    reflection = reflection_pb2_grpc.ServerReflectionStub(server.channel)
    async for response in reflection.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(
            list_services="")])):
        assert SERVICE in {service.name for service in response.list_services_response.service}
        break
    # Every RPC declares the right it needs, as the route inspector reports it.
    rights = {m.full_name: m.required_right for m in server.toolhost.surface.grpc_methods()
              if m.full_name.startswith(f"{SERVICE}/")}
    assert len(rights) == 6 and set(rights.values()) == {"manage_assets"}


def closed_port() -> int:
    """A port of 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_database_out_of_reach_is_unavailable_saying_to_retry_and_rights_still_come_first(
        authenticated_factory, caplog: pytest.LogCaptureFixture):
    server, tokens = await authenticated_factory(
        database_url=f"postgresql+psycopg://toolhost:hunter2@127.0.0.1:{closed_port()}/toolhost")
    stub = stub_of(server)
    caplog.set_level(logging.INFO, logger="toolhost.audit")
    for rpc, request in every_rpc(stub, "ws-042"):
        error = await refused(rpc, request, grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE",
                              bearer(tokens["inventory"]))
        assert "retry later" in (error.details() or "") and "hunter2" not in (error.details() or "")
        assert "127.0.0.1" not in (error.details() or "")
        await refused(rpc, request, grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED", bearer(tokens["caller"]))
    # The audit says why each change was refused.
    outcomes = {r.audit["outcome"] for r in caplog.records  # type: ignore[attr-defined]
                if hasattr(r, "audit") and r.audit["caller"] == "inventory-token"}
    assert outcomes == {"ASSET_CREATE_REFUSED:STORE_UNAVAILABLE", "ASSET_UPDATE_REFUSED:STORE_UNAVAILABLE",
                        "ASSETS_IMPORT_REFUSED:STORE_UNAVAILABLE", "ASSET_DELETE_REFUSED:STORE_UNAVAILABLE"}


@pytest.fixture
def authenticated_factory(start_server: ServerFactory, tmp_path):
    async def start(**overrides) -> tuple[RunningServer, dict[str, str]]:
        tokens = {role: secrets.token_urlsafe(32) for role in ROLES}
        auth_file = tmp_path / "auth.yaml"
        auth_file.write_text(auth_file_text(tokens))
        return await start_server(auth_file=str(auth_file), **overrides), tokens
    return start
