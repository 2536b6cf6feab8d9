"""Domain objects <-> toolhost.v1 messages."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from google.protobuf import json_format, struct_pb2
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from toolhost.v1 import tool_pb2, tool_service_pb2

from ..call_events import CallEvent, OutputChunk, Progress
from ..errors import InvalidRequestError
from ..model import NO_DEFAULT, Example, ExampleExpectation, Parameter, ToolSource, ToolSpec
from ..output_format import OutputFormat, ResultFormat
from ..pipeline import CallResult
from ..registry import CatalogProblem, GenerationChange, Snapshot
from ..reloading import ReloadReport

_SOURCES = {
    ToolSource.BUILTIN: tool_pb2.TOOL_SOURCE_BUILTIN,
    ToolSource.CATALOG: tool_pb2.TOOL_SOURCE_CATALOG,
    ToolSource.USER: tool_pb2.TOOL_SOURCE_USER,
    ToolSource.REMOTE: tool_pb2.TOOL_SOURCE_REMOTE,
}


def to_struct(mapping: Mapping[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    json_format.ParseDict(dict(mapping), message)
    return message


def to_value(value: Any) -> struct_pb2.Value:
    message = struct_pb2.Value()
    # Struct.update and ListValue.extend convert in the protobuf runtime's C code, 2.7x faster than ParseDict's
    # Python walk for a page of 100 assets (bench/findings/assets.md), with the same values. Unlike ParseDict they
    # set no nesting limit: a structured output comes from a Python tool (depth checked: 32) or a remote
    # toolhost's message (decoded under protobuf's recursion limit), both bounded before they get here.
    # SetInParent first: an empty {} or [] would otherwise leave the Value with no kind set at all.
    if isinstance(value, dict):
        message.struct_value.SetInParent()
        message.struct_value.update(value)
    elif isinstance(value, list):
        message.list_value.SetInParent()
        message.list_value.extend(value)
    else:
        json_format.ParseDict(value, message)
    return message


OUTPUT_FORMAT_MESSAGES = {
    OutputFormat.DEFAULT: tool_service_pb2.OUTPUT_FORMAT_UNSPECIFIED,
    OutputFormat.JSON: tool_service_pb2.OUTPUT_FORMAT_JSON,
    OutputFormat.PRETTY: tool_service_pb2.OUTPUT_FORMAT_PRETTY,
    OutputFormat.TEXT: tool_service_pb2.OUTPUT_FORMAT_TEXT,
}
_OUTPUT_FORMATS = {message: output_format for output_format, message in OUTPUT_FORMAT_MESSAGES.items()}


def result_format_of(
    request: tool_service_pb2.CallToolRequest | tool_service_pb2.StreamCallToolRequest,
) -> ResultFormat:
    """The request's output format and filtering; InvalidRequestError for an output format this server does not
    know (protobuf enums are open: a newer client may send a number that has no name here)."""
    output_format = _OUTPUT_FORMATS.get(request.output_format)
    if output_format is None:
        raise InvalidRequestError(
            f"output_format {request.output_format} is not a format this server knows: leave it unset for the "
            "tool's own text, or send OUTPUT_FORMAT_JSON (1), OUTPUT_FORMAT_PRETTY (2) or OUTPUT_FORMAT_TEXT (3)")
    return ResultFormat(output_format, request.filter_empty_fields)


def struct_to_dict(message: struct_pb2.Struct) -> dict[str, Any]:
    try:
        result: dict[str, Any] = json_format.MessageToDict(message)
    except ValueError:  # a number_value of NaN or an infinity, which JSON has no number for
        raise InvalidRequestError("the arguments hold NaN or an infinity, which JSON has no number for: send "
                                  "finite numbers") from None
    return result


def _parameter(p: Parameter) -> tool_pb2.ToolParameter:
    message = tool_pb2.ToolParameter(name=p.name, type=p.type, description=p.description, required=p.required)
    if p.has_default:
        message.default.CopyFrom(to_value(p.default))
    message.enum.extend(to_value(v) for v in p.enum)
    return message


def tool_message(spec: ToolSpec, full: bool) -> tool_pb2.Tool:
    """The Tool message for `spec`; BASIC leaves out parameters, schemas and examples."""
    message = tool_pb2.Tool(
        name=spec.name,
        display_name=spec.display_name,
        description=spec.description,
        category=spec.category,
        platform=spec.platform,
        version=spec.version,
        source=_SOURCES[spec.source],
        requires_admin=spec.requires_admin,
        tags=spec.tags,
        annotations=tool_pb2.ToolAnnotations(
            read_only=spec.annotations.read_only,
            destructive=spec.annotations.destructive,
            idempotent=spec.annotations.idempotent,
            open_world=spec.annotations.open_world,
        ),
        origin=spec.origin,
        fingerprint=spec.fingerprint,
    )
    if spec.timeout_seconds is not None:
        message.timeout.CopyFrom(_duration(spec.timeout_seconds))
    if full:
        message.parameters.extend(_parameter(p) for p in spec.parameters)
        message.input_schema.CopyFrom(to_struct(spec.input_schema))
        if spec.output_schema is not None:
            message.output_schema.CopyFrom(to_struct(spec.output_schema))
        message.examples.extend(_example(e) for e in spec.examples)
    return message


def _example(example: Example) -> tool_pb2.ToolExample:
    expect = example.expect
    message = tool_pb2.ToolExample(description=example.description, arguments=to_struct(example.arguments),
                                   skip_check=example.skip_check)
    # Left unset when it asks only for success, the default: most examples expect nothing more.
    if expect != ExampleExpectation():
        message.expect.output_contains = expect.output_contains
        if not expect.success:
            message.expect.success = False
        if expect.structured_subset is not NO_DEFAULT:
            message.expect.structured_subset.CopyFrom(to_value(expect.structured_subset))
    return message


def _duration(seconds: float) -> Duration:
    whole = math.floor(seconds)
    return Duration(seconds=whole, nanos=round((seconds - whole) * 1e9))


class _PreparedTool:
    """One tool's ListToolsResponse `tools` entry (tag, length, Tool bytes) in each view: a page is the join of
    its entries. Only the serialized form is kept (a parsed message costs several times its bytes), and the FULL
    view, with its schemas and examples, is built on the first request that wants it: most tools of a large
    catalog are only ever listed in the BASIC view, and a reload pays for what it builds."""

    __slots__ = ("_full_entry", "basic_entry", "spec")

    def __init__(self, spec: ToolSpec) -> None:
        self.spec = spec
        self.basic_entry = _list_entry(tool_message(spec, full=False))
        self._full_entry: bytes | None = None

    @property
    def full_entry(self) -> bytes:
        if self._full_entry is None:
            # Two requests may build it at once; both build the same bytes.
            self._full_entry = _list_entry(tool_message(self.spec, full=True))
        return self._full_entry

    def message(self, full: bool) -> tool_pb2.Tool:
        entry = self.full_entry if full else self.basic_entry
        return tool_service_pb2.ListToolsResponse.FromString(entry).tools[0]


def _list_entry(message: tool_pb2.Tool) -> bytes:
    holder = tool_service_pb2.ListToolsResponse()
    holder.tools.append(message)
    return holder.SerializeToString()


class ToolMessages:
    """The Tool messages of the serving snapshot: each tool's BASIC entry serialized when the snapshot is made,
    its FULL entry on the first request that wants it. A page joins the kept bytes; a request for one tool's
    message parses its entry.

    Unchanged tools (the same ToolSpec object, which the catalog reader reuses for unchanged files) keep
    their messages across reloads, so a reload only pays for what changed.
    """

    def __init__(self) -> None:
        self._by_spec: dict[int, _PreparedTool] = {}

    def prepare(self, snapshot: Snapshot) -> None:
        fresh: dict[int, _PreparedTool] = {}
        for tool in snapshot.tools().values():
            key = id(tool.spec)
            entry = self._by_spec.get(key)
            fresh[key] = entry if entry is not None and entry.spec is tool.spec else _PreparedTool(tool.spec)
        self._by_spec = fresh

    def _entry(self, spec: ToolSpec) -> _PreparedTool:
        entry = self._by_spec.get(id(spec))
        if entry is None or entry.spec is not spec:
            # A request holding an older snapshot than the one prepared last: build it on the spot.
            return _PreparedTool(spec)
        return entry

    def get(self, spec: ToolSpec, full: bool) -> tool_pb2.Tool:
        entry = self._entry(spec)
        return entry.message(full)

    def page(self, specs: Iterable[ToolSpec], full: bool) -> bytes:
        """The serialized `tools` field of a ListToolsResponse holding these tools, in order."""
        entries = (self._entry(spec) for spec in specs)
        return b"".join(e.full_entry if full else e.basic_entry for e in entries)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def call_response(result: CallResult) -> tool_service_pb2.CallToolResponse:
    outcome = result.outcome
    # Exact integer microseconds since the epoch: Timestamp.FromDatetime goes through a UTC time tuple, a cost
    # on every call.
    seconds, micros = divmod((result.started_at - _EPOCH) // _MICROSECOND, 1_000_000)
    timestamp = Timestamp(seconds=seconds, nanos=micros * 1000)
    response = tool_service_pb2.CallToolResponse(
        success=result.success,
        tool=result.tool,
        call_id=result.call_id,
        output=outcome.output,
        stderr=outcome.stderr,
        duration_ms=result.duration_ms,
        trace_id=result.trace_id,
        timestamp=timestamp,
        truncated=outcome.truncated,
        original_size_bytes=outcome.original_size_bytes,
        redacted=result.redacted,
        generation=result.generation,
    )
    if outcome.structured is not None:
        response.structured_output.CopyFrom(to_value(outcome.structured))
    if outcome.failure is not None:
        response.error.code = outcome.failure.code
        response.error.message = outcome.failure.message
    if outcome.exit_code is not None:
        response.exit_code = outcome.exit_code
    return response


_OUTPUT_STREAMS = {
    "stdout": tool_service_pb2.OUTPUT_STREAM_STDOUT,
    "stderr": tool_service_pb2.OUTPUT_STREAM_STDERR,
}


def stream_response(event: CallEvent | CallResult) -> tool_service_pb2.StreamCallToolResponse:
    if isinstance(event, OutputChunk):
        return tool_service_pb2.StreamCallToolResponse(output=tool_service_pb2.OutputChunk(
            stream=_OUTPUT_STREAMS[event.stream], data=event.text.encode("utf-8")))
    if isinstance(event, Progress):
        progress = tool_service_pb2.CallProgress(progress=event.progress, message=event.message)
        if event.total is not None:
            progress.total = event.total
        return tool_service_pb2.StreamCallToolResponse(progress=progress)
    return tool_service_pb2.StreamCallToolResponse(result=call_response(event))


def _catalog_error(problem: CatalogProblem) -> tool_service_pb2.CatalogError:
    return tool_service_pb2.CatalogError(file=problem.file, line=problem.line, reason=problem.reason)


def reload_response(report: ReloadReport) -> tool_service_pb2.ReloadResponse:
    return tool_service_pb2.ReloadResponse(
        success=report.success,
        count=len(report.tools),
        tools=report.tools,
        missing_required=report.missing_required,
        catalog_dirs=report.catalog_dirs,
        generation=report.generation,
        errors=[_catalog_error(p) for p in report.problems],
        added=report.added,
        removed=report.removed,
        changed=report.changed,
    )


def watch_response(change: GenerationChange) -> tool_service_pb2.WatchToolsResponse:
    return tool_service_pb2.WatchToolsResponse(
        generation=change.generation, count=change.count, added=change.added, removed=change.removed,
        changed=change.changed,
    )
