"""What the UserToolService methods return: user tools, their versions and tool conflicts, as frozen dataclasses
built from the toolhost.v1 messages (each keeps its proto as `raw`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from google.protobuf.timestamp_pb2 import Timestamp

from ._results import _struct
from .v1 import user_tool_service_pb2 as pb

__all__ = [
    "ConflictType",
    "ToolConflict",
    "ToolConflictPage",
    "UserTool",
    "UserToolEnabled",
    "UserToolPage",
    "UserToolVersion",
    "UserToolVersionPage",
]

ConflictType = Literal["equivalent", "incompatible"]
"""How two tools relate: `equivalent` tools do the same thing (both may be enabled; a CLI provider that has one
natively is not offered the other), `incompatible` ones must not be enabled together."""

CONFLICT_TYPES: dict[str, pb.ConflictType] = {
    "equivalent": pb.CONFLICT_TYPE_EQUIVALENT,
    "incompatible": pb.CONFLICT_TYPE_INCOMPATIBLE,
}
_CONFLICT_NAMES = {number: name for name, number in CONFLICT_TYPES.items()}


def _time(message: Timestamp) -> datetime:
    return message.ToDatetime(tzinfo=UTC)


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class UserTool:
    """A tool made at run time: a bash script with an input schema, served under its slug while enabled.
    `timeout_seconds` is None for the server's default; `shadowed_by` names the catalog or built-in tool that
    took the slug after the user tool was made (it is then not served)."""

    slug: str
    name: str
    description: str
    category: str
    system_prompt: str
    input_schema: dict[str, Any]
    script: str
    enabled: bool
    timeout_seconds: float | None
    tags: tuple[str, ...]
    credentials: tuple[str, ...]
    version: int
    created_at: datetime
    updated_at: datetime
    shadowed_by: str
    raw: pb.UserTool = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, message: pb.UserTool) -> UserTool:
        return cls(
            slug=message.slug, name=message.name, description=message.description, category=message.category,
            system_prompt=message.system_prompt, input_schema=_struct(message.input_schema), script=message.script,
            enabled=message.enabled, timeout_seconds=message.timeout_seconds or None, tags=tuple(message.tags),
            credentials=tuple(message.credentials), version=message.version,
            created_at=_time(message.create_time), updated_at=_time(message.update_time),
            shadowed_by=message.shadowed_by, raw=message)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field but `raw` (what `toolhost user-tools show --json` prints)."""
        return {
            "slug": self.slug, "name": self.name, "description": self.description, "category": self.category,
            "system_prompt": self.system_prompt, "input_schema": self.input_schema, "script": self.script,
            "enabled": self.enabled, "timeout_seconds": self.timeout_seconds, "tags": list(self.tags),
            "credentials": list(self.credentials), "version": self.version,
            "created_at": _iso(self.created_at), "updated_at": _iso(self.updated_at),
            "shadowed_by": self.shadowed_by,
        }


@dataclass(frozen=True)
class UserToolVersion:
    """One stored version of a user tool: what it ran, who made the change, when, and what it was ("create",
    "update", "restore of version N")."""

    slug: str
    version: int
    script: str
    system_prompt: str
    input_schema: dict[str, Any]
    changed_by: str
    created_at: datetime
    change: str
    raw: pb.UserToolVersion = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, message: pb.UserToolVersion) -> UserToolVersion:
        return cls(slug=message.slug, version=message.version, script=message.script,
                   system_prompt=message.system_prompt, input_schema=_struct(message.input_schema),
                   changed_by=message.changed_by, created_at=_time(message.create_time), change=message.change,
                   raw=message)

    def to_dict(self) -> dict[str, Any]:
        return {"slug": self.slug, "version": self.version, "script": self.script,
                "system_prompt": self.system_prompt, "input_schema": self.input_schema,
                "changed_by": self.changed_by, "created_at": _iso(self.created_at), "change": self.change}


@dataclass(frozen=True)
class ToolConflict:
    """A row of the conflicts table (the pair is unordered); `native:Name` is a CLI provider's own tool.
    `type` is "unspecified" only for a value this client has no name for."""

    tool_a: str
    tool_b: str
    type: str
    resolution_hint: str

    @classmethod
    def from_proto(cls, message: pb.ToolConflict) -> ToolConflict:
        return cls(message.tool_a, message.tool_b, _CONFLICT_NAMES.get(message.type, "unspecified"),
                   message.resolution_hint)

    def to_dict(self) -> dict[str, Any]:
        return {"tool_a": self.tool_a, "tool_b": self.tool_b, "type": self.type,
                "resolution_hint": self.resolution_hint}


@dataclass(frozen=True)
class UserToolEnabled:
    """SetUserToolEnabled's answer: the tool as stored now, and the `equivalent` conflicts it runs beside."""

    user_tool: UserTool
    conflicts: tuple[ToolConflict, ...]

    @classmethod
    def from_proto(cls, message: pb.SetUserToolEnabledResponse) -> UserToolEnabled:
        return cls(UserTool.from_proto(message.user_tool),
                   tuple(ToolConflict.from_proto(c) for c in message.conflicts))


@dataclass(frozen=True)
class UserToolPage:
    """One page of ListUserTools: tools sorted by slug, and the token of the next page ("" on the last)."""

    user_tools: tuple[UserTool, ...]
    next_page_token: str

    @classmethod
    def from_proto(cls, message: pb.ListUserToolsResponse) -> UserToolPage:
        return cls(tuple(UserTool.from_proto(t) for t in message.user_tools), message.next_page_token)


@dataclass(frozen=True)
class UserToolVersionPage:
    """One page of ListUserToolVersions: versions newest first, and the token of the next page."""

    versions: tuple[UserToolVersion, ...]
    next_page_token: str

    @classmethod
    def from_proto(cls, message: pb.ListUserToolVersionsResponse) -> UserToolVersionPage:
        return cls(tuple(UserToolVersion.from_proto(v) for v in message.versions), message.next_page_token)


@dataclass(frozen=True)
class ToolConflictPage:
    """One page of ListToolConflicts, sorted by the pair's names, and the token of the next page."""

    conflicts: tuple[ToolConflict, ...]
    next_page_token: str

    @classmethod
    def from_proto(cls, message: pb.ListToolConflictsResponse) -> ToolConflictPage:
        return cls(tuple(ToolConflict.from_proto(c) for c in message.conflicts), message.next_page_token)
