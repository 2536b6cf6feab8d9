import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ToolSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOOL_SOURCE_UNSPECIFIED: _ClassVar[ToolSource]
    TOOL_SOURCE_BUILTIN: _ClassVar[ToolSource]
    TOOL_SOURCE_CATALOG: _ClassVar[ToolSource]
    TOOL_SOURCE_USER: _ClassVar[ToolSource]
    TOOL_SOURCE_REMOTE: _ClassVar[ToolSource]

class ToolView(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOOL_VIEW_UNSPECIFIED: _ClassVar[ToolView]
    TOOL_VIEW_BASIC: _ClassVar[ToolView]
    TOOL_VIEW_FULL: _ClassVar[ToolView]
TOOL_SOURCE_UNSPECIFIED: ToolSource
TOOL_SOURCE_BUILTIN: ToolSource
TOOL_SOURCE_CATALOG: ToolSource
TOOL_SOURCE_USER: ToolSource
TOOL_SOURCE_REMOTE: ToolSource
TOOL_VIEW_UNSPECIFIED: ToolView
TOOL_VIEW_BASIC: ToolView
TOOL_VIEW_FULL: ToolView

class Tool(_message.Message):
    __slots__ = ("name", "display_name", "description", "category", "platform", "version", "source", "parameters", "input_schema", "output_schema", "timeout", "requires_admin", "tags", "examples", "annotations", "origin", "fingerprint")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    REQUIRES_ADMIN_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    EXAMPLES_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    name: str
    display_name: str
    description: str
    category: str
    platform: str
    version: str
    source: ToolSource
    parameters: _containers.RepeatedCompositeFieldContainer[ToolParameter]
    input_schema: _struct_pb2.Struct
    output_schema: _struct_pb2.Struct
    timeout: _duration_pb2.Duration
    requires_admin: bool
    tags: _containers.RepeatedScalarFieldContainer[str]
    examples: _containers.RepeatedCompositeFieldContainer[ToolExample]
    annotations: ToolAnnotations
    origin: str
    fingerprint: str
    def __init__(self, name: _Optional[str] = ..., display_name: _Optional[str] = ..., description: _Optional[str] = ..., category: _Optional[str] = ..., platform: _Optional[str] = ..., version: _Optional[str] = ..., source: _Optional[_Union[ToolSource, str]] = ..., parameters: _Optional[_Iterable[_Union[ToolParameter, _Mapping]]] = ..., input_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., output_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., requires_admin: _Optional[bool] = ..., tags: _Optional[_Iterable[str]] = ..., examples: _Optional[_Iterable[_Union[ToolExample, _Mapping]]] = ..., annotations: _Optional[_Union[ToolAnnotations, _Mapping]] = ..., origin: _Optional[str] = ..., fingerprint: _Optional[str] = ...) -> None: ...

class ToolParameter(_message.Message):
    __slots__ = ("name", "type", "description", "required", "default", "enum")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_FIELD_NUMBER: _ClassVar[int]
    ENUM_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: str
    description: str
    required: bool
    default: _struct_pb2.Value
    enum: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Value]
    def __init__(self, name: _Optional[str] = ..., type: _Optional[str] = ..., description: _Optional[str] = ..., required: _Optional[bool] = ..., default: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., enum: _Optional[_Iterable[_Union[_struct_pb2.Value, _Mapping]]] = ...) -> None: ...

class ToolExample(_message.Message):
    __slots__ = ("description", "arguments", "expect", "skip_check")
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    EXPECT_FIELD_NUMBER: _ClassVar[int]
    SKIP_CHECK_FIELD_NUMBER: _ClassVar[int]
    description: str
    arguments: _struct_pb2.Struct
    expect: ExampleExpectation
    skip_check: bool
    def __init__(self, description: _Optional[str] = ..., arguments: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., expect: _Optional[_Union[ExampleExpectation, _Mapping]] = ..., skip_check: _Optional[bool] = ...) -> None: ...

class ExampleExpectation(_message.Message):
    __slots__ = ("success", "output_contains", "structured_subset")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_CONTAINS_FIELD_NUMBER: _ClassVar[int]
    STRUCTURED_SUBSET_FIELD_NUMBER: _ClassVar[int]
    success: bool
    output_contains: str
    structured_subset: _struct_pb2.Value
    def __init__(self, success: _Optional[bool] = ..., output_contains: _Optional[str] = ..., structured_subset: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class ToolAnnotations(_message.Message):
    __slots__ = ("read_only", "destructive", "idempotent", "open_world")
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    DESTRUCTIVE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENT_FIELD_NUMBER: _ClassVar[int]
    OPEN_WORLD_FIELD_NUMBER: _ClassVar[int]
    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool
    def __init__(self, read_only: _Optional[bool] = ..., destructive: _Optional[bool] = ..., idempotent: _Optional[bool] = ..., open_world: _Optional[bool] = ...) -> None: ...
