"""What the AssetService methods take and return: assets, their WinRM profiles, pages and import summaries, as
frozen dataclasses built from the toolhost.v1 messages (an asset keeps its proto as `raw`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from google.protobuf.timestamp_pb2 import Timestamp

from .v1 import asset_service_pb2 as pb

__all__ = [
    "Asset",
    "AssetImportFormat",
    "AssetImportSummary",
    "AssetPage",
    "WinrmAuthentication",
    "WinrmProfile",
]

WinrmAuthentication = Literal["ntlm", "basic"]
"""How to authenticate to WinRM: NTLM (over HTTP every message is encrypted), or basic (only with `ssl`)."""

AssetImportFormat = Literal["yaml", "csv"]
"""The format of an import document."""

AUTHENTICATIONS: dict[str, pb.WinrmAuthentication] = {
    "ntlm": pb.WINRM_AUTHENTICATION_NTLM,
    "basic": pb.WINRM_AUTHENTICATION_BASIC,
}
# Not set means NTLM, as the proto says.
_AUTHENTICATION_NAMES: dict[int, WinrmAuthentication] = {
    pb.WINRM_AUTHENTICATION_UNSPECIFIED: "ntlm", pb.WINRM_AUTHENTICATION_NTLM: "ntlm",
    pb.WINRM_AUTHENTICATION_BASIC: "basic",
}
IMPORT_FORMATS: dict[str, pb.AssetImportFormat] = {
    "yaml": pb.ASSET_IMPORT_FORMAT_YAML,
    "csv": pb.ASSET_IMPORT_FORMAT_CSV,
}


def authentication_value(authentication: str) -> pb.WinrmAuthentication:
    try:
        return AUTHENTICATIONS[authentication]
    except KeyError:
        raise ValueError(f"authentication must be 'ntlm' or 'basic', not {authentication!r}") from None


def _time(message: Timestamp) -> datetime:
    return message.ToDatetime(tzinfo=UTC)


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class WinrmProfile:
    """How windows_list_directory reaches an asset over WinRM: everything but the secret. `port` 0 means 5985,
    or 5986 with `ssl`; `domain` "" means the credential's own; `credential` "" means "winrm" (the name of the
    credential the server sends, only to the hosts its operator lists for it)."""

    port: int = 0
    ssl: bool = False
    domain: str = ""
    credential: str = ""
    authentication: WinrmAuthentication = "ntlm"

    @classmethod
    def from_proto(cls, message: pb.WinrmProfile) -> WinrmProfile:
        return cls(port=message.port, ssl=message.ssl, domain=message.domain, credential=message.credential,
                   authentication=_AUTHENTICATION_NAMES.get(message.authentication, "ntlm"))

    def to_proto(self) -> pb.WinrmProfile:
        return pb.WinrmProfile(port=self.port, ssl=self.ssl, domain=self.domain, credential=self.credential,
                               authentication=authentication_value(self.authentication))

    def to_dict(self) -> dict[str, Any]:
        return {"port": self.port, "ssl": self.ssl, "domain": self.domain, "credential": self.credential,
                "authentication": self.authentication}


@dataclass(frozen=True)
class Asset:
    """A machine of the inventory. `hostname` "" means the name; `addresses`, when set, are what WinRM connects
    to. The times are the server's."""

    name: str
    hostname: str
    addresses: tuple[str, ...]
    os: str
    platform: str
    site: str
    tags: tuple[str, ...]
    winrm: WinrmProfile
    created_at: datetime
    updated_at: datetime
    raw: pb.Asset = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, message: pb.Asset) -> Asset:
        return cls(name=message.name, hostname=message.hostname, addresses=tuple(message.addresses),
                   os=message.os, platform=message.platform, site=message.site, tags=tuple(message.tags),
                   winrm=WinrmProfile.from_proto(message.winrm), created_at=_time(message.create_time),
                   updated_at=_time(message.update_time), raw=message)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field but `raw`."""
        return {"name": self.name, "hostname": self.hostname, "addresses": list(self.addresses), "os": self.os,
                "platform": self.platform, "site": self.site, "tags": list(self.tags),
                "winrm": self.winrm.to_dict(), "created_at": _iso(self.created_at),
                "updated_at": _iso(self.updated_at)}


@dataclass(frozen=True)
class AssetPage:
    """One page of ListAssets: assets sorted by name, the token of the next page ("" on the last), and how many
    assets match the filter over every page."""

    assets: tuple[Asset, ...]
    next_page_token: str
    total_size: int

    @classmethod
    def from_proto(cls, message: pb.ListAssetsResponse) -> AssetPage:
        return cls(tuple(Asset.from_proto(a) for a in message.assets), message.next_page_token, message.total_size)


@dataclass(frozen=True)
class AssetImportSummary:
    """What an import did (or, validating only, would do): how many assets it created and how many existing ones
    (by name, regardless of case) it replaced."""

    created: int
    replaced: int

    @classmethod
    def from_proto(cls, message: pb.ImportAssetsResponse) -> AssetImportSummary:
        return cls(created=message.created, replaced=message.replaced)
