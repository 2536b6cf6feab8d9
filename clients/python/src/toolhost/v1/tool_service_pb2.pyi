import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from toolhost.v1 import tool_pb2 as _tool_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OutputFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTPUT_FORMAT_UNSPECIFIED: _ClassVar[OutputFormat]
    OUTPUT_FORMAT_JSON: _ClassVar[OutputFormat]
    OUTPUT_FORMAT_PRETTY: _ClassVar[OutputFormat]
    OUTPUT_FORMAT_TEXT: _ClassVar[OutputFormat]

class OutputStream(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTPUT_STREAM_UNSPECIFIED: _ClassVar[OutputStream]
    OUTPUT_STREAM_STDOUT: _ClassVar[OutputStream]
    OUTPUT_STREAM_STDERR: _ClassVar[OutputStream]
OUTPUT_FORMAT_UNSPECIFIED: OutputFormat
OUTPUT_FORMAT_JSON: OutputFormat
OUTPUT_FORMAT_PRETTY: OutputFormat
OUTPUT_FORMAT_TEXT: OutputFormat
OUTPUT_STREAM_UNSPECIFIED: OutputStream
OUTPUT_STREAM_STDOUT: OutputStream
OUTPUT_STREAM_STDERR: OutputStream

class ListToolsRequest(_message.Message):
    __slots__ = ("platform", "category", "tags", "provider", "view", "page_size", "page_token")
    PLATFORM_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    platform: str
    category: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    provider: str
    view: _tool_pb2.ToolView
    page_size: int
    page_token: str
    def __init__(self, platform: _Optional[str] = ..., category: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., provider: _Optional[str] = ..., view: _Optional[_Union[_tool_pb2.ToolView, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListToolsResponse(_message.Message):
    __slots__ = ("tools", "next_page_token", "total_size", "generation")
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    tools: _containers.RepeatedCompositeFieldContainer[_tool_pb2.Tool]
    next_page_token: str
    total_size: int
    generation: int
    def __init__(self, tools: _Optional[_Iterable[_Union[_tool_pb2.Tool, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_size: _Optional[int] = ..., generation: _Optional[int] = ...) -> None: ...

class GetToolRequest(_message.Message):
    __slots__ = ("name", "view")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    name: str
    view: _tool_pb2.ToolView
    def __init__(self, name: _Optional[str] = ..., view: _Optional[_Union[_tool_pb2.ToolView, str]] = ...) -> None: ...

class GetToolResponse(_message.Message):
    __slots__ = ("tool", "generation")
    TOOL_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    tool: _tool_pb2.Tool
    generation: int
    def __init__(self, tool: _Optional[_Union[_tool_pb2.Tool, _Mapping]] = ..., generation: _Optional[int] = ...) -> None: ...

class CallToolRequest(_message.Message):
    __slots__ = ("name", "arguments", "arguments_json", "call_id", "output_format", "filter_empty_fields")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FORMAT_FIELD_NUMBER: _ClassVar[int]
    FILTER_EMPTY_FIELDS_FIELD_NUMBER: _ClassVar[int]
    name: str
    arguments: _struct_pb2.Struct
    arguments_json: str
    call_id: str
    output_format: OutputFormat
    filter_empty_fields: bool
    def __init__(self, name: _Optional[str] = ..., arguments: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., arguments_json: _Optional[str] = ..., call_id: _Optional[str] = ..., output_format: _Optional[_Union[OutputFormat, str]] = ..., filter_empty_fields: _Optional[bool] = ...) -> None: ...

class StreamCallToolRequest(_message.Message):
    __slots__ = ("name", "arguments", "arguments_json", "call_id", "output_format", "filter_empty_fields")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FORMAT_FIELD_NUMBER: _ClassVar[int]
    FILTER_EMPTY_FIELDS_FIELD_NUMBER: _ClassVar[int]
    name: str
    arguments: _struct_pb2.Struct
    arguments_json: str
    call_id: str
    output_format: OutputFormat
    filter_empty_fields: bool
    def __init__(self, name: _Optional[str] = ..., arguments: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., arguments_json: _Optional[str] = ..., call_id: _Optional[str] = ..., output_format: _Optional[_Union[OutputFormat, str]] = ..., filter_empty_fields: _Optional[bool] = ...) -> None: ...

class StreamCallToolResponse(_message.Message):
    __slots__ = ("progress", "output", "result")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    progress: CallProgress
    output: OutputChunk
    result: CallToolResponse
    def __init__(self, progress: _Optional[_Union[CallProgress, _Mapping]] = ..., output: _Optional[_Union[OutputChunk, _Mapping]] = ..., result: _Optional[_Union[CallToolResponse, _Mapping]] = ...) -> None: ...

class CallProgress(_message.Message):
    __slots__ = ("progress", "total", "message")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    progress: float
    total: float
    message: str
    def __init__(self, progress: _Optional[float] = ..., total: _Optional[float] = ..., message: _Optional[str] = ...) -> None: ...

class OutputChunk(_message.Message):
    __slots__ = ("stream", "data")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    stream: OutputStream
    data: bytes
    def __init__(self, stream: _Optional[_Union[OutputStream, str]] = ..., data: _Optional[bytes] = ...) -> None: ...

class CallToolResponse(_message.Message):
    __slots__ = ("success", "tool", "call_id", "output", "stderr", "structured_output", "error", "duration_ms", "trace_id", "timestamp", "exit_code", "truncated", "original_size_bytes", "redacted", "generation")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    STRUCTURED_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    REDACTED_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    success: bool
    tool: str
    call_id: str
    output: str
    stderr: str
    structured_output: _struct_pb2.Value
    error: ToolError
    duration_ms: float
    trace_id: str
    timestamp: _timestamp_pb2.Timestamp
    exit_code: int
    truncated: bool
    original_size_bytes: int
    redacted: bool
    generation: int
    def __init__(self, success: _Optional[bool] = ..., tool: _Optional[str] = ..., call_id: _Optional[str] = ..., output: _Optional[str] = ..., stderr: _Optional[str] = ..., structured_output: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., error: _Optional[_Union[ToolError, _Mapping]] = ..., duration_ms: _Optional[float] = ..., trace_id: _Optional[str] = ..., timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., exit_code: _Optional[int] = ..., truncated: _Optional[bool] = ..., original_size_bytes: _Optional[int] = ..., redacted: _Optional[bool] = ..., generation: _Optional[int] = ...) -> None: ...

class ToolError(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ReloadRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReloadResponse(_message.Message):
    __slots__ = ("success", "count", "tools", "missing_required", "catalog_dirs", "generation", "errors", "added", "removed", "changed")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    MISSING_REQUIRED_FIELD_NUMBER: _ClassVar[int]
    CATALOG_DIRS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    ADDED_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    success: bool
    count: int
    tools: _containers.RepeatedScalarFieldContainer[str]
    missing_required: _containers.RepeatedScalarFieldContainer[str]
    catalog_dirs: _containers.RepeatedScalarFieldContainer[str]
    generation: int
    errors: _containers.RepeatedCompositeFieldContainer[CatalogError]
    added: _containers.RepeatedScalarFieldContainer[str]
    removed: _containers.RepeatedScalarFieldContainer[str]
    changed: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, success: _Optional[bool] = ..., count: _Optional[int] = ..., tools: _Optional[_Iterable[str]] = ..., missing_required: _Optional[_Iterable[str]] = ..., catalog_dirs: _Optional[_Iterable[str]] = ..., generation: _Optional[int] = ..., errors: _Optional[_Iterable[_Union[CatalogError, _Mapping]]] = ..., added: _Optional[_Iterable[str]] = ..., removed: _Optional[_Iterable[str]] = ..., changed: _Optional[_Iterable[str]] = ...) -> None: ...

class CatalogError(_message.Message):
    __slots__ = ("file", "line", "reason")
    FILE_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    file: str
    line: int
    reason: str
    def __init__(self, file: _Optional[str] = ..., line: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class GetInstructionsRequest(_message.Message):
    __slots__ = ("provider",)
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    provider: str
    def __init__(self, provider: _Optional[str] = ...) -> None: ...

class GetInstructionsResponse(_message.Message):
    __slots__ = ("markdown", "tool_names")
    MARKDOWN_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAMES_FIELD_NUMBER: _ClassVar[int]
    markdown: str
    tool_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, markdown: _Optional[str] = ..., tool_names: _Optional[_Iterable[str]] = ...) -> None: ...

class WatchToolsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WatchToolsResponse(_message.Message):
    __slots__ = ("generation", "count", "added", "removed", "changed")
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    ADDED_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    generation: int
    count: int
    added: _containers.RepeatedScalarFieldContainer[str]
    removed: _containers.RepeatedScalarFieldContainer[str]
    changed: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, generation: _Optional[int] = ..., count: _Optional[int] = ..., added: _Optional[_Iterable[str]] = ..., removed: _Optional[_Iterable[str]] = ..., changed: _Optional[_Iterable[str]] = ...) -> None: ...

class SearchToolsRequest(_message.Message):
    __slots__ = ("query", "page_size", "platform", "category", "tags", "provider")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    query: str
    page_size: int
    platform: str
    category: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    provider: str
    def __init__(self, query: _Optional[str] = ..., page_size: _Optional[int] = ..., platform: _Optional[str] = ..., category: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., provider: _Optional[str] = ...) -> None: ...

class SearchToolsResponse(_message.Message):
    __slots__ = ("results", "generation")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[SearchToolsResult]
    generation: int
    def __init__(self, results: _Optional[_Iterable[_Union[SearchToolsResult, _Mapping]]] = ..., generation: _Optional[int] = ...) -> None: ...

class SearchToolsResult(_message.Message):
    __slots__ = ("tool", "score", "matched_intent", "arguments")
    TOOL_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    MATCHED_INTENT_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    tool: _tool_pb2.Tool
    score: float
    matched_intent: str
    arguments: _struct_pb2.Struct
    def __init__(self, tool: _Optional[_Union[_tool_pb2.Tool, _Mapping]] = ..., score: _Optional[float] = ..., matched_intent: _Optional[str] = ..., arguments: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...
