"""The user tools' records as the core hands them around: a user tool, one of its versions, a tool conflict.

Plain values with the proto messages' fields in Python types; api/ translates them, the store table reads and
writes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

DEFAULT_CATEGORY = "custom"
# The fields UpdateUserTool may change (its mask's names); `enabled` changes through SetUserToolEnabled.
MUTABLE_FIELDS = ("name", "description", "category", "system_prompt", "input_schema", "script", "timeout_seconds",
                  "tags", "credentials")


@dataclass(frozen=True, slots=True)
class UserToolRecord:
    """A user tool as stored. `version` is its latest version; `shadowed_by` is set (by the server, not the
    store) when a built-in or catalog tool of the same name is served instead, and names its source ("catalog",
    "builtin"), never its file: the caller may not see that tool. `timeout_seconds` None means the server's
    default."""

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
    shadowed_by: str = ""


@dataclass(frozen=True, slots=True)
class VersionDetails:
    """The rest of a tool's editable record at one version, besides its script, system prompt and schema."""

    name: str
    description: str
    category: str
    timeout_seconds: float | None
    tags: tuple[str, ...]
    credentials: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class UserToolVersionRecord:
    """One stored version: the tool's editable record at that version, who made it and how ("create",
    "update", "restore of version N"). `details` is None for a version stored before schema version 7, which
    kept only the script, the system prompt and the schema."""

    slug: str
    version: int
    script: str
    system_prompt: str
    input_schema: dict[str, Any]
    changed_by: str
    created_at: datetime
    change: str
    details: VersionDetails | None = None


@dataclass(frozen=True, slots=True)
class ConflictRecord:
    """Two tools that do the same thing (`equivalent`) or must not be enabled together (`incompatible`).
    The pair is unordered; `native:Name` is a CLI provider's own tool."""

    tool_a: str
    tool_b: str
    type: str
    resolution_hint: str
