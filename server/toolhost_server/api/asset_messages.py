"""AssetService messages to the asset records of the core and back, UpdateAsset's field mask (AIP-134), and
the byte budget of a page of assets."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final, cast

from google.protobuf.timestamp_pb2 import Timestamp

from toolhost.v1 import asset_service_pb2 as pb

from ..assets.model import MUTABLE_FIELDS, WINRM_FIELDS, Asset, AssetFilter, Authentication, WinrmProfile

_AUTHENTICATIONS: Final[dict[int, Authentication]] = {
    pb.WINRM_AUTHENTICATION_UNSPECIFIED: "ntlm",
    pb.WINRM_AUTHENTICATION_NTLM: "ntlm",
    pb.WINRM_AUTHENTICATION_BASIC: "basic",
}
_AUTHENTICATION_MESSAGES: Final[dict[Authentication, int]] = {
    "ntlm": pb.WINRM_AUTHENTICATION_NTLM, "basic": pb.WINRM_AUTHENTICATION_BASIC}
_FORMATS: Final[dict[int, str]] = {pb.ASSET_IMPORT_FORMAT_YAML: "yaml", pb.ASSET_IMPORT_FORMAT_CSV: "csv"}


def _timestamp(moment: datetime | None) -> Timestamp | None:
    if moment is None:
        return None
    timestamp = Timestamp()
    timestamp.FromDatetime(moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC))
    return timestamp


def _authentication(number: int) -> Authentication:
    """The profile's authentication. A number this server has no name for (protobuf enums are open) becomes
    one the core's validation refuses, naming the field, when the request would store it: refused there, the
    refusal is audited as every other is."""
    return _AUTHENTICATIONS.get(number, cast(Authentication, f"WinrmAuthentication {number}"))


def winrm_profile(message: pb.WinrmProfile) -> WinrmProfile:
    return WinrmProfile(port=message.port, ssl=message.ssl, domain=message.domain, credential=message.credential,
                        authentication=_authentication(message.authentication))


def asset_record(message: pb.Asset) -> Asset:
    """The asset of a request. The times are the server's: a request's are ignored."""
    return Asset(name=message.name, hostname=message.hostname, addresses=tuple(message.addresses), os=message.os,
                 platform=message.platform, site=message.site, tags=tuple(message.tags),
                 winrm=winrm_profile(message.winrm))


def asset_message(asset: Asset) -> pb.Asset:
    """The asset as stored: a port of 0 and an empty credential stay so (their defaults apply when used), so
    that what a client reads back and sends again means the same."""
    profile = asset.winrm
    return pb.Asset(
        name=asset.name, hostname=asset.hostname, addresses=list(asset.addresses), os=asset.os,
        platform=asset.platform, site=asset.site, tags=list(asset.tags),
        winrm=pb.WinrmProfile(port=profile.port, ssl=profile.ssl, domain=profile.domain,
                              credential=profile.credential,
                              authentication=_AUTHENTICATION_MESSAGES[profile.authentication]),  # type: ignore[arg-type]
        create_time=_timestamp(asset.created_at), update_time=_timestamp(asset.updated_at))


def asset_filter(message: pb.AssetFilter) -> AssetFilter:
    return AssetFilter(os=message.os, platform=message.platform, site=message.site, tag=message.tag,
                       name=message.name)


def import_format(number: int) -> str:
    """The core's name of an import format; for an unset or unknown one, what the refusal quotes."""
    return _FORMATS.get(number, "unset" if number == pb.ASSET_IMPORT_FORMAT_UNSPECIFIED else str(number))


def _populated(message: pb.Asset) -> tuple[str, ...]:
    """The mutable fields `message` sets to something other than their default (AIP-134's populated fields):
    within the profile, each of its fields on its own, so that `winrm {port: 5986}` leaves the rest of it."""
    paths = [field for field in MUTABLE_FIELDS if field != "winrm" and bool(getattr(message, field))]
    if message.HasField("winrm"):
        paths += [f"winrm.{field}" for field in WINRM_FIELDS if bool(getattr(message.winrm, field))]
    return tuple(paths)


def update_paths(message: pb.Asset, paths: Sequence[str]) -> tuple[str, ...]:
    """The paths an update changes: those the mask names (the core checks them, and refuses none); for an empty
    mask those `message` populates; for `*` every mutable field."""
    if list(paths) == ["*"]:
        return MUTABLE_FIELDS
    return tuple(paths) if paths else _populated(message)


