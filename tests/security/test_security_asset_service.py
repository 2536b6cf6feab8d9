"""Attacks on AssetService through a real server: refusals that would not fit in a gRPC status, names and filters
that carry NUL bytes, escapes or megabytes, forged and borrowed page tokens, update masks that reach for fields
that do not exist, a password smuggled into an import, YAML bombs, and profiles that would send a password in
clear. Each is refused with a status the client can read, nothing reaches the inventory, and the audit keeps a
printable record."""

from __future__ import annotations

import base64
import json
import logging

import grpc
import pytest
from google.protobuf import field_mask_pb2

from toolhost.v1 import asset_service_pb2 as pb
from toolhost.v1 import asset_service_pb2_grpc
from toolhost_server.assets.model import AssetFilter
from toolhost_server.assets.paging import filter_digest

from helpers.servers import RunningServer, ServerFactory
from helpers.status import error_details

# What a gRPC client takes of a status's trailers by default; a refusal past it reaches the client as a
# transport error instead of the problems.
TRAILER_LIMIT = 8 * 1024


def stub_of(server: RunningServer) -> asset_service_pb2_grpc.AssetServiceStub:
    return asset_service_pb2_grpc.AssetServiceStub(server.channel)


async def refusal(rpc, request) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await rpc(request)
    return caught.value


async def inventory_is_empty(stub) -> bool:
    return (await stub.ListAssets(pb.ListAssetsRequest())).total_size == 0


def trailer_bytes(error: grpc.aio.AioRpcError) -> int:
    """Roughly what the status took on the wire: grpc-message and grpc-status-details-bin (base64)."""
    details = dict(error.trailing_metadata() or ()).get("grpc-status-details-bin", b"")
    return len((error.details() or "").encode()) * 3 + len(base64.b64encode(details))


# --- refusals that must fit in a status -------------------------------------------------------------------------


async def test_an_import_with_thousands_of_long_problems_is_still_a_readable_invalid_argument(
        start_server: ServerFactory):
    stub = stub_of(await start_server())
    # 2,000 records, each wrong three ways with long non-ASCII values (3 bytes each in grpc-message's
    # percent-encoding): listed whole, the problems would be megabytes.
    rows = "".join(f"ж{'ш' * 200}{n},{'ф' * 250}.example.com,10.0.0.{n}00,,,,,99999,,,,\n" for n in range(2000))
    document = "name,hostname,addresses,os,platform,site,tags,winrm_port,winrm_ssl,winrm_domain,winrm_credential," \
               "winrm_authentication\n" + rows
    error = await refusal(stub.ImportAssets, pb.ImportAssetsRequest(format=pb.ASSET_IMPORT_FORMAT_CSV,
                                                                    content=document))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
    info, violations = error_details(error)
    assert info.reason == "INVALID_REQUEST"
    assert 1 <= len(violations) <= 100 and all(d.startswith("line ") for _, d in violations[:-1])
    assert trailer_bytes(error) < TRAILER_LIMIT
    assert "fix these" in (error.details() or "")
    assert await inventory_is_empty(stub)


async def test_an_asset_wrong_in_every_field_is_a_readable_invalid_argument(start_server: ServerFactory):
    stub = stub_of(await start_server())
    asset = pb.Asset(name="ж" * 5000, hostname="ш" * 5000, addresses=["ф" * 300] * 200, os="\x1b[2J" * 1000,
                     tags=["\u202e" + "т" * 300] * 500, site="\x00" * 1000,
                     winrm=pb.WinrmProfile(port=-5, domain="CORP\\admin" * 100, credential="../" * 100,
                                           authentication=pb.WINRM_AUTHENTICATION_BASIC))
    error = await refusal(stub.CreateAsset, pb.CreateAssetRequest(asset=asset))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
    _, violations = error_details(error)
    assert violations and trailer_bytes(error) < TRAILER_LIMIT
    # Control characters come back escaped, never as themselves.
    assert "\x1b" not in (error.details() or "") and "\x00" not in (error.details() or "")
    assert all("\x1b" not in d and "\u202e" not in d for _, d in violations)
    assert await inventory_is_empty(stub)


# --- names --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ws-1\x00", "ws-1\n", "../etc/passwd", "ws-1' OR '1'='1", "*", "%", "a" * 129,
                                  "x" * 1_000_000, "ws\u202e1", "ws\u200b1", "\u2028"])
async def test_a_name_no_asset_can_have_is_refused_before_the_database_and_audited_printably(
        start_server: ServerFactory, caplog: pytest.LogCaptureFixture, name: str):
    stub = stub_of(await start_server())
    await stub.CreateAsset(pb.CreateAssetRequest(asset=pb.Asset(name="ws-1")))
    caplog.set_level(logging.INFO, logger="toolhost.audit")
    for rpc, request in ((stub.GetAsset, pb.GetAssetRequest(name=name)),
                         (stub.DeleteAsset, pb.DeleteAssetRequest(name=name)),
                         (stub.UpdateAsset, pb.UpdateAssetRequest(asset=pb.Asset(name=name, os="x")))):
        error = await refusal(rpc, request)
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
        assert len(error.details() or "") < 1000 and "\x00" not in (error.details() or "")
    # ws-1 is untouched: `*` and `%` are no wildcards, the quote is no SQL.
    assert (await stub.GetAsset(pb.GetAssetRequest(name="ws-1"))).asset.os == ""
    for record in caplog.records:
        audit = getattr(record, "audit", None)
        if audit is not None:
            assert audit["tool"].isprintable() and len(audit["tool"]) <= 256
            assert audit["outcome"].endswith(":INVALID_REQUEST")


# --- filters and page tokens ------------------------------------------------------------------------------------


async def test_wildcards_and_quotes_in_filters_are_literal(start_server: ServerFactory):
    stub = stub_of(await start_server())
    for name, os in (("ws-1", "Windows 10"), ("ws-2", "Windows_10"), ("ws-3", "100% Windows"),
                     ("ws-4", "Win\\dows")):
        await stub.CreateAsset(pb.CreateAssetRequest(asset=pb.Asset(name=name, os=os)))

    async def names(**filters) -> list[str]:
        page = await stub.ListAssets(pb.ListAssetsRequest(filter=pb.AssetFilter(**filters)))
        return [asset.name for asset in page.assets]

    assert await names(os="_") == ["ws-2"]
    assert await names(os="%") == ["ws-3"]
    assert await names(os="\\") == ["ws-4"]
    assert await names(os="' OR '1'='1") == []
    assert await names(name="ws-[12]") == []  # a glob has * and ? only
    assert await names(name="%") == []


@pytest.mark.parametrize("asset_filter", [
    pb.AssetFilter(os="x" * 1_000_000), pb.AssetFilter(name="ws-1\x00"), pb.AssetFilter(tag="\x1b[31m"),
    pb.AssetFilter(site="s" * 257),
])
async def test_a_filter_no_asset_can_match_is_refused_before_the_database(start_server: ServerFactory,
                                                                           asset_filter: pb.AssetFilter):
    stub = stub_of(await start_server())
    error = await refusal(stub.ListAssets, pb.ListAssetsRequest(filter=asset_filter))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and len(error.details() or "") < 300


def forged(data: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


@pytest.mark.parametrize("token", [
    "not-a-token", "%%%", "A" * 100_000, forged([]), forged({"a": 1, "f": "x"}), forged({"a": "ws-1"}),
    forged({"a": "", "f": "x"}), forged({"a": "x" * 500, "f": "x"}),
    base64.urlsafe_b64encode(b"[" * 50_000 + b"]" * 50_000).decode(),
    base64.urlsafe_b64encode(b"\xff\xfe").decode(),
    # With the right digest of the empty filter (not secret: anyone can compute it), a position no lower-cased
    # name can be: a NUL would reach PostgreSQL, which refuses it outright (UNAVAILABLE instead of this refusal).
    forged({"a": "ws\u0000", "f": filter_digest(AssetFilter())}),
    forged({"a": "WS-1", "f": filter_digest(AssetFilter())}),
    forged({"a": "ws 1", "f": filter_digest(AssetFilter())}),
])
async def test_a_forged_page_token_is_refused(start_server: ServerFactory, token: str):
    stub = stub_of(await start_server())
    error = await refusal(stub.ListAssets, pb.ListAssetsRequest(page_token=token))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    info, _ = error_details(error)
    assert info.reason == "INVALID_PAGE_TOKEN"


async def test_a_token_is_bound_to_its_filter_and_does_not_carry_it(start_server: ServerFactory):
    stub = stub_of(await start_server())
    for n in range(3):
        await stub.CreateAsset(pb.CreateAssetRequest(asset=pb.Asset(name=f"ws-{n}", site="secret-site")))
    page = await stub.ListAssets(pb.ListAssetsRequest(filter=pb.AssetFilter(site="secret-site"), page_size=1))
    # Opaque: the filter it belongs to is not readable from it.
    decoded = base64.urlsafe_b64decode(page.next_page_token + "=" * (-len(page.next_page_token) % 4))
    assert b"secret-site" not in decoded
    # A token forged from a real one, with its `after` moved, continues the same list from there, no further:
    # it cannot widen the filter.
    data = json.loads(decoded)
    error = await refusal(stub.ListAssets, pb.ListAssetsRequest(page_token=forged({**data, "f": "0" * 24})))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    moved = await stub.ListAssets(pb.ListAssetsRequest(filter=pb.AssetFilter(site="secret-site"),
                                                       page_token=forged({**data, "a": "ws-1"})))
    assert [a.name for a in moved.assets] == ["ws-2"]


# --- update masks -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("paths", [
    ["winrm.password"], ["winrm..port"], ["winrm.port.x"], ["__class__"], ["name"], ["created_at"],
    ["x" * 100_000], ["\x00"], ["tags", "*"],
])
async def test_a_mask_reaching_for_anything_else_changes_nothing(start_server: ServerFactory, paths):
    stub = stub_of(await start_server())
    await stub.CreateAsset(pb.CreateAssetRequest(asset=pb.Asset(name="ws-1", tags=["kept"])))
    error = await refusal(stub.UpdateAsset, pb.UpdateAssetRequest(
        asset=pb.Asset(name="ws-1"), update_mask=field_mask_pb2.FieldMask(paths=paths)))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and len(error.details() or "") < 1000
    assert "\x00" not in (error.details() or "")
    assert list((await stub.GetAsset(pb.GetAssetRequest(name="ws-1"))).asset.tags) == ["kept"]


# --- secrets and unsafe profiles --------------------------------------------------------------------------------

CANARY = "Canary-Passw0rd-4f1c9e"


@pytest.mark.parametrize(("format", "document"), [
    (pb.ASSET_IMPORT_FORMAT_YAML, f"- name: ws-1\n  winrm: {{password: {CANARY}}}\n"),
    (pb.ASSET_IMPORT_FORMAT_YAML, f"- name: ws-1\n  password: {CANARY}\n"),
    (pb.ASSET_IMPORT_FORMAT_CSV, f"name,password\nws-1,{CANARY}\n"),
])
async def test_a_password_smuggled_into_an_import_is_refused_and_never_echoed(
        start_server: ServerFactory, caplog: pytest.LogCaptureFixture, format, document):
    stub = stub_of(await start_server())
    caplog.set_level(logging.DEBUG)
    error = await refusal(stub.ImportAssets, pb.ImportAssetsRequest(format=format, content=document))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    _, violations = error_details(error)
    assert "password" in (error.details() or "")
    assert CANARY not in (error.details() or "") and all(CANARY not in d for _, d in violations)
    assert CANARY not in caplog.text
    assert await inventory_is_empty(stub)


@pytest.mark.parametrize("profile", [
    pb.WinrmProfile(authentication=pb.WINRM_AUTHENTICATION_BASIC),
    pb.WinrmProfile(authentication=pb.WINRM_AUTHENTICATION_BASIC, port=5986),
    pb.WinrmProfile(authentication=pb.WINRM_AUTHENTICATION_BASIC, port=443, ssl=False),
])
async def test_basic_authentication_without_tls_is_refused_everywhere(start_server: ServerFactory, profile):
    stub = stub_of(await start_server())
    error = await refusal(stub.CreateAsset, pb.CreateAssetRequest(asset=pb.Asset(name="ws-1", winrm=profile)))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    yaml = f"- name: ws-1\n  winrm: {{authentication: basic, port: {profile.port}}}\n"
    error = await refusal(stub.ImportAssets, pb.ImportAssetsRequest(format=pb.ASSET_IMPORT_FORMAT_YAML,
                                                                    content=yaml))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    # Nor reached by turning ssl off afterwards, or by switching an HTTPS asset's profile whole.
    await stub.CreateAsset(pb.CreateAssetRequest(asset=pb.Asset(name="ws-1", winrm=pb.WinrmProfile(
        ssl=True, authentication=pb.WINRM_AUTHENTICATION_BASIC))))
    for paths in (["winrm.ssl"], ["winrm"], ["*"]):
        error = await refusal(stub.UpdateAsset, pb.UpdateAssetRequest(
            asset=pb.Asset(name="ws-1", winrm=profile), update_mask=field_mask_pb2.FieldMask(paths=paths)))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, paths
    assert (await stub.GetAsset(pb.GetAssetRequest(name="ws-1"))).asset.winrm.ssl is True


# --- hostile documents ------------------------------------------------------------------------------------------

BILLION_LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


@pytest.mark.parametrize(("format", "document"), [
    (pb.ASSET_IMPORT_FORMAT_YAML, BILLION_LAUGHS),
    (pb.ASSET_IMPORT_FORMAT_YAML, "[" * 100_000 + "]" * 100_000),
    (pb.ASSET_IMPORT_FORMAT_YAML, "- !!python/object/apply:os.system ['touch /tmp/pwned']\n"),
    (pb.ASSET_IMPORT_FORMAT_YAML, "\x00" * 1000),
    (pb.ASSET_IMPORT_FORMAT_CSV, "name\n" + "x" * 4_000_000 + "\n"),
    (pb.ASSET_IMPORT_FORMAT_CSV, "name\n\"" + "unterminated" * 1000),
])
async def test_a_hostile_document_is_refused_and_the_server_keeps_serving(start_server: ServerFactory,
                                                                          format, document):
    stub = stub_of(await start_server())
    error = await refusal(stub.ImportAssets, pb.ImportAssetsRequest(format=format, content=document))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
    assert trailer_bytes(error) < TRAILER_LIMIT
    assert await inventory_is_empty(stub)
