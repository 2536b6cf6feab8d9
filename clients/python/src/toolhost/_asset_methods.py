"""The AssetService methods of Client and AsyncClient (mixed in), and the requests they share.

    with toolhost.Client("127.0.0.1:50051", timeout=30) as client:
        client.create_asset("ws-042", hostname="ws-042.corp.example.com", os="Microsoft Windows 10 Pro",
                            platform="windows", site="berlin", tags=["finance"],
                            winrm=toolhost.WinrmProfile(ssl=True, credential="winrmberlin"))
        for asset in client.list_assets(os="windows 10", site="berlin"):
            print(asset.name, asset.hostname)
        client.update_asset("ws-042", winrm_port=5987)
        with open("assets.csv", encoding="utf-8") as document:
            print(client.import_assets("csv", document.read(), validate_only=True))
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from google.protobuf import field_mask_pb2

from ._asset_results import (
    IMPORT_FORMATS,
    Asset,
    AssetImportFormat,
    AssetImportSummary,
    AssetPage,
    WinrmAuthentication,
    WinrmProfile,
    authentication_value,
)
from .v1 import asset_service_pb2 as pb

__all__ = ["AssetMethods", "AsyncAssetMethods"]

_Response = TypeVar("_Response")

# update_asset's keywords for one field of the profile, and the mask path each one names.
_PROFILE_KEYWORDS = {"winrm_port": "port", "winrm_ssl": "ssl", "winrm_domain": "domain",
                     "winrm_credential": "credential", "winrm_authentication": "authentication"}


def _values(values: Iterable[str], what: str) -> list[str]:
    if isinstance(values, str):
        raise TypeError(f"{what} must be a list of strings, not one string")
    return list(values)


def _profile(winrm: WinrmProfile) -> pb.WinrmProfile:
    if not isinstance(winrm, WinrmProfile):
        raise TypeError(f"winrm must be a toolhost.WinrmProfile, not {type(winrm).__name__}")
    return winrm.to_proto()


def create_request(
    name: str, hostname: str, addresses: Iterable[str], os: str, platform: str, site: str, tags: Iterable[str],
    winrm: WinrmProfile | None,
) -> pb.CreateAssetRequest:
    asset = pb.Asset(name=name, hostname=hostname, addresses=_values(addresses, "addresses"), os=os,
                     platform=platform, site=site, tags=_values(tags, "tags"))
    if winrm is not None:
        asset.winrm.CopyFrom(_profile(winrm))
    return pb.CreateAssetRequest(asset=asset)


def list_request(
    os: str, platform: str, site: str, tag: str, name: str, page_size: int, page_token: str
) -> pb.ListAssetsRequest:
    return pb.ListAssetsRequest(
        filter=pb.AssetFilter(os=os, platform=platform, site=site, tag=tag, name=name), page_size=page_size,
        page_token=page_token)


def update_request(name: str, changes: Mapping[str, Any]) -> pb.UpdateAssetRequest:
    """The request that changes the fields in `changes` (update_asset's keyword arguments that are not None) and
    only those: they are the update mask, so "" or [] clears a field."""
    asset = pb.Asset(name=name)
    paths = []
    for key, value in changes.items():
        if value is None:
            continue
        if key in _PROFILE_KEYWORDS:
            field = _PROFILE_KEYWORDS[key]
            if field == "authentication":
                asset.winrm.authentication = authentication_value(value)
            else:
                setattr(asset.winrm, field, value)
            paths.append(f"winrm.{field}")
        elif key == "winrm":
            asset.winrm.CopyFrom(_profile(value))
            paths.append(key)
        elif key in ("addresses", "tags"):
            getattr(asset, key).extend(_values(value, key))
            paths.append(key)
        else:
            setattr(asset, key, value)
            paths.append(key)
    if not paths:
        raise ValueError("update_asset needs at least one field to change (os=..., tags=[...], winrm_port=...)")
    if "winrm" in paths and any(path.startswith("winrm.") for path in paths):
        raise ValueError("give winrm= (the whole profile) or winrm_* keywords (fields of it), not both")
    return pb.UpdateAssetRequest(asset=asset, update_mask=field_mask_pb2.FieldMask(paths=paths))


def import_request(format: AssetImportFormat, content: str, validate_only: bool) -> pb.ImportAssetsRequest:
    try:
        value = IMPORT_FORMATS[format]
    except KeyError:
        raise ValueError(f"format must be 'yaml' or 'csv', not {format!r}") from None
    if not isinstance(content, str):
        raise TypeError(f"content must be the document's text (str), not {type(content).__name__}")
    return pb.ImportAssetsRequest(format=value, content=content, validate_only=validate_only)


class AssetMethods:
    """AssetService for the blocking Client. Every method needs the admin role or a role with the
    `manage_assets` right when the server authenticates (PermissionDeniedError otherwise, before anything else
    of the request is looked at). A database the server cannot use now is UnavailableError with reason
    STORE_UNAVAILABLE (retry later)."""

    _asset_stub: Any

    def _unary(self, method: Callable[..., _Response], request: Any, deadline: float | None = None) -> _Response:
        raise NotImplementedError  # the Client's

    def create_asset(
        self, name: str, *, hostname: str = "", addresses: Iterable[str] = (), os: str = "", platform: str = "",
        site: str = "", tags: Iterable[str] = (), winrm: WinrmProfile | None = None,
    ) -> Asset:
        """Store a new asset. AlreadyExistsError when the name is taken (regardless of case); InvalidArgumentError
        naming the field for a bad name, hostname or address, or an unsafe profile (basic without ssl)."""
        request = create_request(name, hostname, addresses, os, platform, site, tags, winrm)
        return Asset.from_proto(self._unary(self._asset_stub.CreateAsset, request).asset)

    def get_asset(self, name: str) -> Asset:
        """One asset by name, regardless of case; NotFoundError when there is none."""
        return Asset.from_proto(self._unary(self._asset_stub.GetAsset, pb.GetAssetRequest(name=name)).asset)

    def list_assets_page(
        self, *, os: str = "", platform: str = "", site: str = "", tag: str = "", name: str = "",
        page_size: int = 0, page_token: str = "",
    ) -> AssetPage:
        """One page of the assets matching every filter given, regardless of case: `os` a part of the asset's
        ("windows 10" matches "Microsoft Windows 10 Pro"), `platform`, `site` and `tag` whole values, `name` a
        glob. page_size 0 means the server's 100, at most 1000; a page_token goes with the filters it came from."""
        request = list_request(os, platform, site, tag, name, page_size, page_token)
        return AssetPage.from_proto(self._unary(self._asset_stub.ListAssets, request))

    def list_assets(
        self, *, os: str = "", platform: str = "", site: str = "", tag: str = "", name: str = "", page_size: int = 0,
    ) -> Iterator[Asset]:
        """Every asset matching the filters (as list_assets_page's), sorted by name; pages are fetched as the
        iteration needs them."""
        request = list_request(os, platform, site, tag, name, page_size, "")
        while True:
            page = AssetPage.from_proto(self._unary(self._asset_stub.ListAssets, request))
            yield from page.assets
            if not page.next_page_token:
                return
            request.page_token = page.next_page_token

    def update_asset(
        self, name: str, *, hostname: str | None = None, addresses: Iterable[str] | None = None,
        os: str | None = None, platform: str | None = None, site: str | None = None,
        tags: Iterable[str] | None = None, winrm: WinrmProfile | None = None, winrm_port: int | None = None,
        winrm_ssl: bool | None = None, winrm_domain: str | None = None, winrm_credential: str | None = None,
        winrm_authentication: WinrmAuthentication | None = None,
    ) -> Asset:
        """Change the fields given (None leaves a field as it is, "" or [] clears it): `winrm` replaces the whole
        profile, `winrm_*` one field of it. The name never changes; NotFoundError when there is no such asset."""
        request = update_request(name, {
            "hostname": hostname, "addresses": addresses, "os": os, "platform": platform, "site": site,
            "tags": tags, "winrm": winrm, "winrm_port": winrm_port, "winrm_ssl": winrm_ssl,
            "winrm_domain": winrm_domain, "winrm_credential": winrm_credential,
            "winrm_authentication": winrm_authentication})
        return Asset.from_proto(self._unary(self._asset_stub.UpdateAsset, request).asset)

    def delete_asset(self, name: str) -> Asset:
        """Remove an asset; the asset as it was. NotFoundError when there is none."""
        return Asset.from_proto(self._unary(self._asset_stub.DeleteAsset, pb.DeleteAssetRequest(name=name)).asset)

    def import_assets(
        self, format: AssetImportFormat, content: str, *, validate_only: bool = False
    ) -> AssetImportSummary:
        """Create or replace (by name) every asset of a YAML or CSV document, all or nothing: one bad record stores
        nothing and raises InvalidArgumentError, whose field_violations name each problem with its line (at most
        100). validate_only=True checks the document and stores nothing."""
        request = import_request(format, content, validate_only)
        return AssetImportSummary.from_proto(self._unary(self._asset_stub.ImportAssets, request))


class AsyncAssetMethods:
    """AssetService for the AsyncClient: the same methods as Client's, awaited (list_assets is an async
    iterator)."""

    _asset_stub: Any

    async def _unary(
        self, method: Callable[..., Awaitable[_Response]], request: Any, deadline: float | None = None
    ) -> _Response:
        raise NotImplementedError  # the AsyncClient's

    async def create_asset(
        self, name: str, *, hostname: str = "", addresses: Iterable[str] = (), os: str = "", platform: str = "",
        site: str = "", tags: Iterable[str] = (), winrm: WinrmProfile | None = None,
    ) -> Asset:
        """See Client.create_asset."""
        request = create_request(name, hostname, addresses, os, platform, site, tags, winrm)
        return Asset.from_proto((await self._unary(self._asset_stub.CreateAsset, request)).asset)

    async def get_asset(self, name: str) -> Asset:
        """See Client.get_asset."""
        return Asset.from_proto((await self._unary(self._asset_stub.GetAsset, pb.GetAssetRequest(name=name))).asset)

    async def list_assets_page(
        self, *, os: str = "", platform: str = "", site: str = "", tag: str = "", name: str = "",
        page_size: int = 0, page_token: str = "",
    ) -> AssetPage:
        """See Client.list_assets_page."""
        request = list_request(os, platform, site, tag, name, page_size, page_token)
        return AssetPage.from_proto(await self._unary(self._asset_stub.ListAssets, request))

    async def list_assets(
        self, *, os: str = "", platform: str = "", site: str = "", tag: str = "", name: str = "", page_size: int = 0,
    ) -> AsyncIterator[Asset]:
        """See Client.list_assets."""
        request = list_request(os, platform, site, tag, name, page_size, "")
        while True:
            page = AssetPage.from_proto(await self._unary(self._asset_stub.ListAssets, request))
            for asset in page.assets:
                yield asset
            if not page.next_page_token:
                return
            request.page_token = page.next_page_token

    async def update_asset(
        self, name: str, *, hostname: str | None = None, addresses: Iterable[str] | None = None,
        os: str | None = None, platform: str | None = None, site: str | None = None,
        tags: Iterable[str] | None = None, winrm: WinrmProfile | None = None, winrm_port: int | None = None,
        winrm_ssl: bool | None = None, winrm_domain: str | None = None, winrm_credential: str | None = None,
        winrm_authentication: WinrmAuthentication | None = None,
    ) -> Asset:
        """See Client.update_asset."""
        request = update_request(name, {
            "hostname": hostname, "addresses": addresses, "os": os, "platform": platform, "site": site,
            "tags": tags, "winrm": winrm, "winrm_port": winrm_port, "winrm_ssl": winrm_ssl,
            "winrm_domain": winrm_domain, "winrm_credential": winrm_credential,
            "winrm_authentication": winrm_authentication})
        return Asset.from_proto((await self._unary(self._asset_stub.UpdateAsset, request)).asset)

    async def delete_asset(self, name: str) -> Asset:
        """See Client.delete_asset."""
        response = await self._unary(self._asset_stub.DeleteAsset, pb.DeleteAssetRequest(name=name))
        return Asset.from_proto(response.asset)

    async def import_assets(
        self, format: AssetImportFormat, content: str, *, validate_only: bool = False
    ) -> AssetImportSummary:
        """See Client.import_assets."""
        request = import_request(format, content, validate_only)
        return AssetImportSummary.from_proto(await self._unary(self._asset_stub.ImportAssets, request))
