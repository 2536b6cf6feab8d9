import datetime

from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ConflictType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONFLICT_TYPE_UNSPECIFIED: _ClassVar[ConflictType]
    CONFLICT_TYPE_EQUIVALENT: _ClassVar[ConflictType]
    CONFLICT_TYPE_INCOMPATIBLE: _ClassVar[ConflictType]
CONFLICT_TYPE_UNSPECIFIED: ConflictType
CONFLICT_TYPE_EQUIVALENT: ConflictType
CONFLICT_TYPE_INCOMPATIBLE: ConflictType

class UserTool(_message.Message):
    __slots__ = ("slug", "name", "description", "category", "system_prompt", "input_schema", "script", "enabled", "timeout_seconds", "tags", "credentials", "version", "create_time", "update_time", "shadowed_by")
    SLUG_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    SCRIPT_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    SHADOWED_BY_FIELD_NUMBER: _ClassVar[int]
    slug: str
    name: str
    description: str
    category: str
    system_prompt: str
    input_schema: _struct_pb2.Struct
    script: str
    enabled: bool
    timeout_seconds: float
    tags: _containers.RepeatedScalarFieldContainer[str]
    credentials: _containers.RepeatedScalarFieldContainer[str]
    version: int
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    shadowed_by: str
    def __init__(self, slug: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., category: _Optional[str] = ..., system_prompt: _Optional[str] = ..., input_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., script: _Optional[str] = ..., enabled: _Optional[bool] = ..., timeout_seconds: _Optional[float] = ..., tags: _Optional[_Iterable[str]] = ..., credentials: _Optional[_Iterable[str]] = ..., version: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., shadowed_by: _Optional[str] = ...) -> None: ...

class UserToolVersion(_message.Message):
    __slots__ = ("slug", "version", "script", "system_prompt", "input_schema", "changed_by", "create_time", "change")
    SLUG_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SCRIPT_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    CHANGED_BY_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    slug: str
    version: int
    script: str
    system_prompt: str
    input_schema: _struct_pb2.Struct
    changed_by: str
    create_time: _timestamp_pb2.Timestamp
    change: str
    def __init__(self, slug: _Optional[str] = ..., version: _Optional[int] = ..., script: _Optional[str] = ..., system_prompt: _Optional[str] = ..., input_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., changed_by: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., change: _Optional[str] = ...) -> None: ...

class ToolConflict(_message.Message):
    __slots__ = ("tool_a", "tool_b", "type", "resolution_hint")
    TOOL_A_FIELD_NUMBER: _ClassVar[int]
    TOOL_B_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_HINT_FIELD_NUMBER: _ClassVar[int]
    tool_a: str
    tool_b: str
    type: ConflictType
    resolution_hint: str
    def __init__(self, tool_a: _Optional[str] = ..., tool_b: _Optional[str] = ..., type: _Optional[_Union[ConflictType, str]] = ..., resolution_hint: _Optional[str] = ...) -> None: ...

class CreateUserToolRequest(_message.Message):
    __slots__ = ("user_tool",)
    USER_TOOL_FIELD_NUMBER: _ClassVar[int]
    user_tool: UserTool
    def __init__(self, user_tool: _Optional[_Union[UserTool, _Mapping]] = ...) -> None: ...

class CreateUserToolResponse(_message.Message):
    __slots__ = ("user_tool",)
    USER_TOOL_FIELD_NUMBER: _ClassVar[int]
    user_tool: UserTool
    def __init__(self, user_tool: _Optional[_Union[UserTool, _Mapping]] = ...) -> None: ...

class GetUserToolRequest(_message.Message):
    __slots__ = ("slug",)
    SLUG_FIELD_NUMBER: _ClassVar[int]
    slug: str
    def __init__(self, slug: _Optional[str] = ...) -> None: ...

class GetUserToolResponse(_message.Message):
    __slots__ = ("user_tool",)
    USER_TOOL_FIELD_NUMBER: _ClassVar[int]
    user_tool: UserTool
    def __init__(self, user_tool: _Optional[_Union[UserTool, _Mapping]] = ...) -> None: ...

class ListUserToolsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListUserToolsResponse(_message.Message):
    __slots__ = ("user_tools", "next_page_token")
    USER_TOOLS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    user_tools: _containers.RepeatedCompositeFieldContainer[UserTool]
    next_page_token: str
    def __init__(self, user_tools: _Optional[_Iterable[_Union[UserTool, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class UpdateUserToolRequest(_message.Message):
    __slots__ = ("user_tool", "update_mask")
    USER_TOOL_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    user_tool: UserTool
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, user_tool: _Optional[_Union[UserTool, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class UpdateUserToolResponse(_message.Message):
    __slots__ = ("user_tool",)
    USER_TOOL_FIELD_NUMBER: _ClassVar[int]
    user_tool: UserTool
    def __init__(self, user_tool: _Optional[_Union[UserTool, _Mapping]] = ...) -> None: ...

class DeleteUserToolRequest(_message.Message):
    __slots__ = ("slug",)
    SLUG_FIELD_NUMBER: _ClassVar[int]
    slug: str
    def __init__(self, slug: _Optional[str] = ...) -> None: ...

class DeleteUserToolResponse(_message.Message):
    __slots__ = ("user_tool",)
    USER_TOOL_FIELD_NUMBER: _ClassVar[int]
    user_tool: UserTool
    def __init__(self, user_tool: _Optional[_Union[UserTool, _Mapping]] = ...) -> None: ...

class ListUserToolVersionsRequest(_message.Message):
    __slots__ = ("slug", "page_size", "page_token")
    SLUG_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    slug: str
    page_size: int
    page_token: str
    def __init__(self, slug: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListUserToolVersionsResponse(_message.Message):
    __slots__ = ("versions", "next_page_token")
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    versions: _containers.RepeatedCompositeFieldContainer[UserToolVersion]
    next_page_token: str
    def __init__(self, versions: _Optional[_Iterable[_Union[UserToolVersion, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RestoreUserToolVersionRequest(_message.Message):
    __slots__ = ("slug", "version")
    SLUG_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    slug: str
    version: int
    def __init__(self, slug: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class RestoreUserToolVersionResponse(_message.Message):
    __slots__ = ("user_tool",)
    USER_TOOL_FIELD_NUMBER: _ClassVar[int]
    user_tool: UserTool
    def __init__(self, user_tool: _Optional[_Union[UserTool, _Mapping]] = ...) -> None: ...

class SetUserToolEnabledRequest(_message.Message):
    __slots__ = ("slug", "enabled")
    SLUG_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    slug: str
    enabled: bool
    def __init__(self, slug: _Optional[str] = ..., enabled: _Optional[bool] = ...) -> None: ...

class SetUserToolEnabledResponse(_message.Message):
    __slots__ = ("user_tool", "conflicts")
    USER_TOOL_FIELD_NUMBER: _ClassVar[int]
    CONFLICTS_FIELD_NUMBER: _ClassVar[int]
    user_tool: UserTool
    conflicts: _containers.RepeatedCompositeFieldContainer[ToolConflict]
    def __init__(self, user_tool: _Optional[_Union[UserTool, _Mapping]] = ..., conflicts: _Optional[_Iterable[_Union[ToolConflict, _Mapping]]] = ...) -> None: ...

class ListToolConflictsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListToolConflictsResponse(_message.Message):
    __slots__ = ("conflicts", "next_page_token")
    CONFLICTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    conflicts: _containers.RepeatedCompositeFieldContainer[ToolConflict]
    next_page_token: str
    def __init__(self, conflicts: _Optional[_Iterable[_Union[ToolConflict, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SetToolConflictRequest(_message.Message):
    __slots__ = ("conflict",)
    CONFLICT_FIELD_NUMBER: _ClassVar[int]
    conflict: ToolConflict
    def __init__(self, conflict: _Optional[_Union[ToolConflict, _Mapping]] = ...) -> None: ...

class SetToolConflictResponse(_message.Message):
    __slots__ = ("conflict",)
    CONFLICT_FIELD_NUMBER: _ClassVar[int]
    conflict: ToolConflict
    def __init__(self, conflict: _Optional[_Union[ToolConflict, _Mapping]] = ...) -> None: ...

class DeleteToolConflictRequest(_message.Message):
    __slots__ = ("tool_a", "tool_b")
    TOOL_A_FIELD_NUMBER: _ClassVar[int]
    TOOL_B_FIELD_NUMBER: _ClassVar[int]
    tool_a: str
    tool_b: str
    def __init__(self, tool_a: _Optional[str] = ..., tool_b: _Optional[str] = ...) -> None: ...

class DeleteToolConflictResponse(_message.Message):
    __slots__ = ("conflict",)
    CONFLICT_FIELD_NUMBER: _ClassVar[int]
    conflict: ToolConflict
    def __init__(self, conflict: _Optional[_Union[ToolConflict, _Mapping]] = ...) -> None: ...
