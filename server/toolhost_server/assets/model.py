"""The asset inventory's records as the core hands them around: an asset, its WinRM profile, a filter.

Plain values with the proto messages' fields (proto/toolhost/v1/asset_service.proto) in Python types; api/
translates them, assets/table.py stores them, the asset tools read them. An asset holds no secret: its profile
names a credential, whose values stay in the server's credential sources.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Literal

# Unique regardless of case; a name is what `toolhost assets get NAME` and windows_list_directory's `host` use.
NAME_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
MAX_ASSETS: Final = 100_000
MAX_IMPORT_ASSETS: Final = 10_000
MAX_IMPORT_PROBLEMS: Final = 100
MAX_ADDRESSES: Final = 32
MAX_TAGS: Final = 64
# Bounds on free text (os, platform, site, a tag, the domain, the credential name), in characters.
MAX_TEXT_CHARS: Final = 256
DEFAULT_PAGE_SIZE: Final = 100
MAX_PAGE_SIZE: Final = 1000

DEFAULT_CREDENTIAL: Final = "winrm"
HTTP_PORT: Final = 5985
HTTPS_PORT: Final = 5986

Authentication = Literal["ntlm", "basic"]
AUTHENTICATIONS: Final[tuple[Authentication, ...]] = ("ntlm", "basic")

# The fields UpdateAsset may change (its mask's names); `name` is the key and never changes.
MUTABLE_FIELDS: Final = ("hostname", "addresses", "os", "platform", "site", "tags", "winrm")
WINRM_FIELDS: Final = ("port", "ssl", "domain", "credential", "authentication")


@dataclass(frozen=True, slots=True)
class WinrmProfile:
    """How windows_list_directory reaches an asset. `port` 0 means the default for `ssl`; `credential` ""
    means DEFAULT_CREDENTIAL."""

    port: int = 0
    ssl: bool = False
    domain: str = ""
    credential: str = ""
    authentication: Authentication = "ntlm"

    @property
    def effective_port(self) -> int:
        return self.port or (HTTPS_PORT if self.ssl else HTTP_PORT)

    @property
    def effective_credential(self) -> str:
        return self.credential or DEFAULT_CREDENTIAL


@dataclass(frozen=True, slots=True)
class Asset:
    """A machine of the inventory. `hostname` "" means the name; the times are set by the store."""

    name: str
    hostname: str = ""
    addresses: tuple[str, ...] = ()
    os: str = ""
    platform: str = ""
    site: str = ""
    tags: tuple[str, ...] = ()
    winrm: WinrmProfile = field(default_factory=WinrmProfile)
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def effective_hostname(self) -> str:
        return self.hostname or self.name

    def summary(self) -> dict[str, object]:
        """The asset as asset_search returns it: every field but the times, JSON types, no secret (it holds none)."""
        return {
            "name": self.name, "hostname": self.effective_hostname, "addresses": list(self.addresses),
            "os": self.os, "platform": self.platform, "site": self.site, "tags": list(self.tags),
            "winrm": {"port": self.winrm.effective_port, "ssl": self.winrm.ssl, "domain": self.winrm.domain,
                      "credential": self.winrm.effective_credential,
                      "authentication": self.winrm.authentication},
        }


@dataclass(frozen=True, slots=True)
class AssetFilter:
    """Which assets match: every set field must. All comparisons ignore case. `os` is a substring, `name` a
    glob (`*` any characters, `?` one); `platform`, `site` and `tag` match whole values."""

    os: str = ""
    platform: str = ""
    site: str = ""
    tag: str = ""
    name: str = ""

    def is_empty(self) -> bool:
        return not (self.os or self.platform or self.site or self.tag or self.name)


@dataclass(frozen=True, slots=True)
class ImportProblem:
    """One thing wrong with an import document: its 1-based line (0 when the whole document is wrong), the
    field (or ""), and what to fix."""

    line: int
    field: str
    message: str

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line else "document"
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


@dataclass(frozen=True, slots=True)
class ImportSummary:
    """What an import did (or would do)."""

    created: int
    replaced: int
