"""What the client returns: plain frozen dataclasses built from the toolhost.v1 responses.

Each keeps its proto as `raw`, so nothing the server sent is out of reach. Struct and Value fields become
Python values (dict, list, str, float, ...); protobuf carries every number in them as a double, so a whole
number comes back as an int, as it was in the catalog YAML or the JSON the tool produced.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

from google.protobuf import json_format, struct_pb2

from .v1 import tool_pb2, tool_service_pb2

__all__ = [
    "CatalogError",
    "ExampleExpectation",
    "GenerationEvent",
    "ReloadResult",
    "ToolAnnotations",
    "ToolError",
    "ToolExample",
    "ToolInfo",
    "ToolPage",
    "ToolParameter",
    "ToolResult",
]

# Doubles hold integers exactly up to 2**53; beyond that a whole float is not known to have been an integer.
_EXACT_INTEGER_LIMIT = 2**53

_SOURCE_NAMES = {
    tool_pb2.TOOL_SOURCE_BUILTIN: "builtin",
    tool_pb2.TOOL_SOURCE_CATALOG: "catalog",
    tool_pb2.TOOL_SOURCE_USER: "user",
    tool_pb2.TOOL_SOURCE_REMOTE: "remote",
}


def plain_value(value: Any) -> Any:
    """`value` (from a Struct or Value) with whole floats turned back into ints, recursively."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= _EXACT_INTEGER_LIMIT:
        return int(value)
    if isinstance(value, dict):
        return {key: plain_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain_value(item) for item in value]
    return value


def _struct(message: struct_pb2.Struct) -> dict[str, Any]:
    result: dict[str, Any] = plain_value(json_format.MessageToDict(message))
    return result


def _value(message: struct_pb2.Value) -> Any:
    return plain_value(json_format.MessageToDict(message))


@dataclass(frozen=True)
class ToolParameter:
    """One declared argument of a tool. `has_default` tells a null default from none."""

    name: str
    type: str
    description: str
    required: bool
    default: Any = None
    has_default: bool = False
    enum: tuple[Any, ...] = ()

    @classmethod
    def from_proto(cls, message: tool_pb2.ToolParameter) -> ToolParameter:
        has_default = message.HasField("default")
        return cls(
            name=message.name,
            type=message.type,
            description=message.description,
            required=message.required,
            default=_value(message.default) if has_default else None,
            has_default=has_default,
            enum=tuple(_value(v) for v in message.enum),
        )


@dataclass(frozen=True)
class ExampleExpectation:
    """What `toolhost check` asks of a sample call; each part must hold. `success` is whether the call must
    succeed; `output_contains` text its output must hold ("": none asked); `structured_subset` a value the
    structured output must contain, when `has_structured_subset` (it may be None: a JSON null)."""

    success: bool = True
    output_contains: str = ""
    structured_subset: Any = None
    has_structured_subset: bool = False

    @classmethod
    def from_proto(cls, message: tool_pb2.ExampleExpectation) -> ExampleExpectation:
        has_subset = message.HasField("structured_subset")
        return cls(
            success=message.success if message.HasField("success") else True,
            output_contains=message.output_contains,
            structured_subset=_value(message.structured_subset) if has_subset else None,
            has_structured_subset=has_subset,
        )

    def to_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = {"success": self.success, "output_contains": self.output_contains}
        if self.has_structured_subset:
            result["structured_subset"] = self.structured_subset
        return result


@dataclass(frozen=True)
class ToolExample:
    """A sample call: what it shows and its arguments; what `toolhost check` expects of it, or that it leaves
    it out (`skip_check`)."""

    description: str
    arguments: dict[str, Any]
    expect: ExampleExpectation = ExampleExpectation()
    skip_check: bool = False

    @classmethod
    def from_proto(cls, message: tool_pb2.ToolExample) -> ToolExample:
        return cls(message.description, _struct(message.arguments), ExampleExpectation.from_proto(message.expect),
                   message.skip_check)

    def to_dict(self) -> dict[str, Any]:
        return {"description": self.description, "arguments": self.arguments, "expect": self.expect.to_dict(),
                "skip_check": self.skip_check}


@dataclass(frozen=True)
class ToolAnnotations:
    """Behaviour hints (MCP meaning); written by the tool's author, not enforced by the server."""

    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False


@dataclass(frozen=True)
class ToolInfo:
    """A tool as ListTools and GetTool describe it.

    `source` is "builtin", "catalog", "user" or "remote". `parameters`, `input_schema`, `output_schema` and
    `examples` are empty / None in the "basic" view. `timeout` is the tool's own limit in seconds, or None.
    """

    name: str
    display_name: str
    description: str
    category: str
    platform: str
    version: str
    source: str
    parameters: tuple[ToolParameter, ...]
    input_schema: dict[str, Any] | None
    output_schema: dict[str, Any] | None
    timeout: float | None
    requires_admin: bool
    tags: tuple[str, ...]
    examples: tuple[ToolExample, ...]
    annotations: ToolAnnotations
    origin: str
    fingerprint: str
    raw: tool_pb2.Tool = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, message: tool_pb2.Tool) -> ToolInfo:
        hint = message.annotations
        return cls(
            name=message.name,
            display_name=message.display_name,
            description=message.description,
            category=message.category,
            platform=message.platform,
            version=message.version,
            source=_SOURCE_NAMES.get(message.source, "unspecified"),
            parameters=tuple(ToolParameter.from_proto(p) for p in message.parameters),
            input_schema=_struct(message.input_schema) if message.HasField("input_schema") else None,
            output_schema=_struct(message.output_schema) if message.HasField("output_schema") else None,
            timeout=message.timeout.ToTimedelta().total_seconds() if message.HasField("timeout") else None,
            requires_admin=message.requires_admin,
            tags=tuple(message.tags),
            examples=tuple(ToolExample.from_proto(e) for e in message.examples),
            annotations=ToolAnnotations(hint.read_only, hint.destructive, hint.idempotent, hint.open_world),
            origin=message.origin,
            fingerprint=message.fingerprint,
            raw=message,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field but `raw` (what `toolhost tools list --json` prints)."""
        parameters = []
        for p in self.parameters:
            item: dict[str, Any] = {"name": p.name, "type": p.type, "description": p.description,
                                    "required": p.required}
            if p.has_default:
                item["default"] = p.default
            if p.enum:
                item["enum"] = list(p.enum)
            parameters.append(item)
        return {
            "name": self.name,
            "display_name": self.display_name,
            "description": self.description,
            "category": self.category,
            "platform": self.platform,
            "version": self.version,
            "source": self.source,
            "parameters": parameters,
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
            "timeout_seconds": self.timeout,
            "requires_admin": self.requires_admin,
            "tags": list(self.tags),
            "examples": [e.to_dict() for e in self.examples],
            "annotations": {
                "read_only": self.annotations.read_only,
                "destructive": self.annotations.destructive,
                "idempotent": self.annotations.idempotent,
                "open_world": self.annotations.open_world,
            },
            "origin": self.origin,
            "fingerprint": self.fingerprint,
        }


@dataclass(frozen=True)
class ToolPage:
    """One page of ListTools: the tools, the token of the next page ("" on the last), and how many match."""

    tools: tuple[ToolInfo, ...]
    next_page_token: str
    total_size: int
    generation: int
    raw: tool_service_pb2.ListToolsResponse = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, message: tool_service_pb2.ListToolsResponse) -> ToolPage:
        return cls(tuple(ToolInfo.from_proto(t) for t in message.tools), message.next_page_token,
                   message.total_size, message.generation, message)


@dataclass(frozen=True)
class ToolError:
    """Why a tool that ran did not succeed: a stable `code` (TIMEOUT, NON_ZERO_EXIT, TOOL_EXCEPTION, ...)."""

    code: str
    message: str


@dataclass(frozen=True)
class ToolResult:
    """What a tool call produced. When `success` is False, `error` says why; the call did not raise.

    `structured_output` is the tool's JSON value (None when it returned none); `exit_code` is set only for
    processes; `timestamp` is when the call started, in UTC.
    """

    success: bool
    tool: str
    call_id: str
    output: str
    stderr: str
    structured_output: Any
    error: ToolError | None
    duration_ms: float
    trace_id: str
    timestamp: datetime
    exit_code: int | None
    truncated: bool
    original_size_bytes: int
    redacted: bool
    generation: int
    raw: tool_service_pb2.CallToolResponse = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, message: tool_service_pb2.CallToolResponse) -> ToolResult:
        return cls(
            success=message.success,
            tool=message.tool,
            call_id=message.call_id,
            output=message.output,
            stderr=message.stderr,
            structured_output=(
                _value(message.structured_output) if message.HasField("structured_output") else None),
            error=ToolError(message.error.code, message.error.message) if message.HasField("error") else None,
            duration_ms=message.duration_ms,
            trace_id=message.trace_id,
            timestamp=message.timestamp.ToDatetime(tzinfo=timezone.utc),  # noqa: UP017 - datetime.UTC is 3.11+
            exit_code=message.exit_code if message.HasField("exit_code") else None,
            truncated=message.truncated,
            original_size_bytes=message.original_size_bytes,
            redacted=message.redacted,
            generation=message.generation,
            raw=message,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field but `raw`: `error` as {"code", "message"} or None, `timestamp` as
        ISO 8601 text in UTC."""
        return {
            "success": self.success,
            "tool": self.tool,
            "call_id": self.call_id,
            "output": self.output,
            "stderr": self.stderr,
            "structured_output": self.structured_output,
            "error": {"code": self.error.code, "message": self.error.message} if self.error is not None else None,
            "duration_ms": self.duration_ms,
            "trace_id": self.trace_id,
            "timestamp": self.timestamp.isoformat(),
            "exit_code": self.exit_code,
            "truncated": self.truncated,
            "original_size_bytes": self.original_size_bytes,
            "redacted": self.redacted,
            "generation": self.generation,
        }


@dataclass(frozen=True)
class CallProgress:
    """A streamed call's progress as the tool reported it: `progress` of `total` (None when unknown)."""

    progress: float
    total: float | None
    message: str


@dataclass(frozen=True)
class OutputChunk:
    """A piece of a streamed call's output, in order: `stream` is "stdout" or "stderr", `data` UTF-8 bytes."""

    stream: Literal["stdout", "stderr"]
    data: bytes

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


StreamEvent = CallProgress | OutputChunk | ToolResult
"""What a StreamCallTool stream yields: progress and output chunks, then the ToolResult."""


def stream_event_from_proto(message: tool_service_pb2.StreamCallToolResponse) -> StreamEvent:
    which = message.WhichOneof("event")
    if which == "output":
        stream: Literal["stdout", "stderr"] = (
            "stderr" if message.output.stream == tool_service_pb2.OUTPUT_STREAM_STDERR else "stdout")
        return OutputChunk(stream, message.output.data)
    if which == "progress":
        progress = message.progress
        return CallProgress(progress.progress, progress.total if progress.HasField("total") else None,
                            progress.message)
    if which == "result":
        return ToolResult.from_proto(message.result)
    raise ValueError(f"the server sent a stream event this client does not know ({which}); upgrade the client")


@dataclass(frozen=True)
class CatalogError:
    """A bad catalog file or directory: path, 1-based line (0 when unknown) and what to fix."""

    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}" if self.line else f"{self.file}: {self.reason}"


@dataclass(frozen=True)
class ReloadResult:
    """The outcome of a reload. `success` is False when a catalog directory could not be read; the previous
    tools then keep serving and `errors` says why."""

    success: bool
    count: int
    tools: tuple[str, ...]
    missing_required: tuple[str, ...]
    catalog_dirs: tuple[str, ...]
    generation: int
    errors: tuple[CatalogError, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]
    raw: tool_service_pb2.ReloadResponse = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, message: tool_service_pb2.ReloadResponse) -> ReloadResult:
        return cls(
            success=message.success,
            count=message.count,
            tools=tuple(message.tools),
            missing_required=tuple(message.missing_required),
            catalog_dirs=tuple(message.catalog_dirs),
            generation=message.generation,
            errors=tuple(CatalogError(e.file, e.line, e.reason) for e in message.errors),
            added=tuple(message.added),
            removed=tuple(message.removed),
            changed=tuple(message.changed),
            raw=message,
        )


@dataclass(frozen=True)
class GenerationEvent:
    """One registry generation from watch_tools: the first lists every tool in `added`; later ones what
    changed. Applying them in order to an empty set gives the current tool names."""

    generation: int
    count: int
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]

    @classmethod
    def from_proto(cls, message: tool_service_pb2.WatchToolsResponse) -> GenerationEvent:
        return cls(message.generation, message.count, tuple(message.added), tuple(message.removed),
                   tuple(message.changed))

