"""UserToolService messages to the user-tool records of the core and back, UpdateUserTool's field mask, and
the byte budget of a page of tools."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from google.protobuf import json_format, struct_pb2
from google.protobuf.timestamp_pb2 import Timestamp

from toolhost.v1 import user_tool_service_pb2 as pb

from ..errors import InvalidRequestError
from ..user_tools.records import MUTABLE_FIELDS, ConflictRecord, UserToolRecord, UserToolVersionRecord
from .convert import to_struct

# Output-only or set elsewhere: named in a mask, they get their own explanation.
_NOT_UPDATABLE = {
    "slug": "the slug cannot change: create a tool under the new slug and delete the old one",
    "enabled": "`enabled` changes through SetUserToolEnabled (`toolhost user-tools enable|disable`)",
    **{field: f"{field} is set by the server" for field in ("version", "create_time", "update_time", "shadowed_by")},
}
_CONFLICT_TYPES = {pb.CONFLICT_TYPE_EQUIVALENT: "equivalent", pb.CONFLICT_TYPE_INCOMPATIBLE: "incompatible"}
_CONFLICT_MESSAGES = {name: number for number, name in _CONFLICT_TYPES.items()}
# Only what a record needs to be built: the core sets the version and the times of a new tool itself.
_UNSET_TIME = datetime.fromtimestamp(0, UTC)
_QUOTED_PATH_CHARS = 64
# A JSON number past this is not an exact integer in a double, so it stays a float.
_EXACT_INTEGERS = 2**53


def _timestamp(moment: datetime) -> Timestamp:
    timestamp = Timestamp()
    timestamp.FromDatetime(moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC))
    return timestamp


def _integers_restored(value: Any) -> Any:
    """`value` with each whole float turned back into an int: a Struct carries every number as a double, and a
    schema says `"maxLength": 10`, not 10.0 (the metaschema wants integers there)."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= _EXACT_INTEGERS:
        return int(value)
    if isinstance(value, dict):
        return {key: _integers_restored(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integers_restored(item) for item in value]
    return value


def schema_of(message: struct_pb2.Struct) -> dict[str, Any]:
    """The input schema a request carries, as JSON values."""
    try:
        schema: dict[str, Any] = json_format.MessageToDict(message)
    except ValueError:  # a number_value of NaN or an infinity
        raise InvalidRequestError("user_tool.input_schema holds NaN or an infinity, which JSON has no number for: "
                                  "send finite numbers") from None
    restored: dict[str, Any] = _integers_restored(schema)
    return restored


def _timeout_of(message: pb.UserTool) -> float | None:
    seconds = message.timeout_seconds
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidRequestError(
            f"user_tool.timeout_seconds must be a finite number of seconds, 0 or more (0: the server's default), "
            f"not {seconds}")
    return seconds or None


def user_tool_record(message: pb.UserTool) -> UserToolRecord:
    """The tool of a CreateUserTool request. `enabled`, `version`, the times and `shadowed_by` are the server's:
    a new tool is enabled at version 1, whatever the request says."""
    return UserToolRecord(
        slug=message.slug, name=message.name, description=message.description, category=message.category,
        system_prompt=message.system_prompt, input_schema=schema_of(message.input_schema), script=message.script,
        enabled=True, timeout_seconds=_timeout_of(message), tags=tuple(message.tags),
        credentials=tuple(message.credentials), version=0, created_at=_UNSET_TIME, updated_at=_UNSET_TIME,
        shadowed_by="")


def slug_only_tool(slug: str) -> UserToolRecord:
    """What a CreateUserTool request from a caller who will be refused stands for: its slug (the refusal's audit
    entry names it) and nothing else of the request, unread. Without a script or a description it could never
    be stored either."""
    return UserToolRecord(
        slug=slug, name="", description="", category="", system_prompt="", input_schema={}, script="",
        enabled=False, timeout_seconds=None, tags=(), credentials=(), version=0, created_at=_UNSET_TIME,
        updated_at=_UNSET_TIME, shadowed_by="")


def unread_conflict(message: pb.ToolConflict) -> ConflictRecord:
    """What a SetToolConflict request from a caller who will be refused stands for: the pair's names (the
    refusal's audit entry names them), with no type, so that it could never be stored either."""
    return ConflictRecord(tool_a=message.tool_a, tool_b=message.tool_b, type="", resolution_hint="")


def _populated(message: pb.UserTool) -> tuple[str, ...]:
    """The mutable fields `message` sets to something other than their default (AIP-134's populated fields)."""
    return tuple(field for field in MUTABLE_FIELDS
                 if (message.HasField(field) if field == "input_schema" else bool(getattr(message, field))))


def update_paths(message: pb.UserTool, paths: Sequence[str]) -> tuple[str, ...]:
    """The fields an update changes, each once, in the proto's order: those the mask names; for an empty mask
    those `message` populates (AIP-134); for `*` every mutable field (a full replacement). InvalidRequestError
    for any other path, or for an empty mask on a request that sets nothing, saying why."""
    if list(paths) == ["*"]:
        return MUTABLE_FIELDS
    if not paths:
        populated = _populated(message)
        if not populated:
            raise InvalidRequestError(
                f"the request sets no field to change and its update_mask is empty: set the new values (one of "
                f"{', '.join(MUTABLE_FIELDS)}), and name a field in update_mask to give it its empty value")
        return populated
    for path in paths:
        # Quoted cut short: the message travels in a gRPC header, which a path of any length would overflow.
        quoted = repr(path) if len(path) <= _QUOTED_PATH_CHARS else f"{path[:_QUOTED_PATH_CHARS]!r}..."
        if path in _NOT_UPDATABLE:
            raise InvalidRequestError(f"update_mask names {quoted}: {_NOT_UPDATABLE[path]}")
        if path not in MUTABLE_FIELDS:
            raise InvalidRequestError(
                f"update_mask names {quoted}, which is no field UpdateUserTool changes: name the fields among "
                f"{', '.join(MUTABLE_FIELDS)} (or `*` to replace them all, or leave the mask empty to change "
                f"the fields the request sets)")
    return tuple(field for field in MUTABLE_FIELDS if field in paths)


def update_changes(message: pb.UserTool, paths: Sequence[str]) -> dict[str, Any]:
    """What UpdateUserTool changes: each field update_paths gives, with its new value."""
    values: dict[str, Any] = {}
    for field in update_paths(message, paths):
        if field == "input_schema":
            values[field] = schema_of(message.input_schema)
        elif field == "timeout_seconds":
            values[field] = _timeout_of(message)
        elif field in ("tags", "credentials"):
            values[field] = tuple(getattr(message, field))
        else:
            values[field] = getattr(message, field)
    return values


def user_tool_message(record: UserToolRecord) -> pb.UserTool:
    return pb.UserTool(
        slug=record.slug, name=record.name, description=record.description, category=record.category,
        system_prompt=record.system_prompt, input_schema=to_struct(record.input_schema), script=record.script,
        enabled=record.enabled, timeout_seconds=record.timeout_seconds or 0.0, tags=list(record.tags),
        credentials=list(record.credentials), version=record.version, create_time=_timestamp(record.created_at),
        update_time=_timestamp(record.updated_at), shadowed_by=record.shadowed_by)


def version_message(record: UserToolVersionRecord) -> pb.UserToolVersion:
    return pb.UserToolVersion(
        slug=record.slug, version=record.version, script=record.script, system_prompt=record.system_prompt,
        input_schema=to_struct(record.input_schema), changed_by=record.changed_by,
        create_time=_timestamp(record.created_at), change=record.change)


def conflict_message(record: ConflictRecord) -> pb.ToolConflict:
    return pb.ToolConflict(tool_a=record.tool_a, tool_b=record.tool_b,
                           type=_CONFLICT_MESSAGES.get(record.type, pb.CONFLICT_TYPE_UNSPECIFIED),
                           resolution_hint=record.resolution_hint)


def conflict_record(message: pb.ToolConflict) -> ConflictRecord:
    """The conflict of a SetToolConflict request; InvalidRequestError when its type is not set (or is a number
    this server has no name for: protobuf enums are open)."""
    kind = _CONFLICT_TYPES.get(message.type)
    if kind is None:
        raise InvalidRequestError(
            "conflict.type must be CONFLICT_TYPE_EQUIVALENT (1: both may be enabled) or CONFLICT_TYPE_INCOMPATIBLE "
            "(2: enabling one while the other is enabled is refused)")
    return ConflictRecord(tool_a=message.tool_a, tool_b=message.tool_b, type=kind,
                          resolution_hint=message.resolution_hint)

