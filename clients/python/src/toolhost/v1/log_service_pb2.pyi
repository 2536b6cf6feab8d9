import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LogLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LOG_LEVEL_UNSPECIFIED: _ClassVar[LogLevel]
    LOG_LEVEL_DEBUG: _ClassVar[LogLevel]
    LOG_LEVEL_INFO: _ClassVar[LogLevel]
    LOG_LEVEL_WARNING: _ClassVar[LogLevel]
    LOG_LEVEL_ERROR: _ClassVar[LogLevel]
    LOG_LEVEL_CRITICAL: _ClassVar[LogLevel]
LOG_LEVEL_UNSPECIFIED: LogLevel
LOG_LEVEL_DEBUG: LogLevel
LOG_LEVEL_INFO: LogLevel
LOG_LEVEL_WARNING: LogLevel
LOG_LEVEL_ERROR: LogLevel
LOG_LEVEL_CRITICAL: LogLevel

class LogFilter(_message.Message):
    __slots__ = ("min_level", "since", "until", "text", "trace_id", "source")
    MIN_LEVEL_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    min_level: LogLevel
    since: _timestamp_pb2.Timestamp
    until: _timestamp_pb2.Timestamp
    text: str
    trace_id: str
    source: str
    def __init__(self, min_level: _Optional[_Union[LogLevel, str]] = ..., since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., text: _Optional[str] = ..., trace_id: _Optional[str] = ..., source: _Optional[str] = ...) -> None: ...

class QueryLogsRequest(_message.Message):
    __slots__ = ("filter", "page_size", "page_token")
    FILTER_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    filter: LogFilter
    page_size: int
    page_token: str
    def __init__(self, filter: _Optional[_Union[LogFilter, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class QueryLogsResponse(_message.Message):
    __slots__ = ("records", "next_page_token", "summary")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[LogRecord]
    next_page_token: str
    summary: LogSummary
    def __init__(self, records: _Optional[_Iterable[_Union[LogRecord, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., summary: _Optional[_Union[LogSummary, _Mapping]] = ...) -> None: ...

class TailLogsRequest(_message.Message):
    __slots__ = ("filter", "backlog")
    FILTER_FIELD_NUMBER: _ClassVar[int]
    BACKLOG_FIELD_NUMBER: _ClassVar[int]
    filter: LogFilter
    backlog: int
    def __init__(self, filter: _Optional[_Union[LogFilter, _Mapping]] = ..., backlog: _Optional[int] = ...) -> None: ...

class TailLogsResponse(_message.Message):
    __slots__ = ("record",)
    RECORD_FIELD_NUMBER: _ClassVar[int]
    record: LogRecord
    def __init__(self, record: _Optional[_Union[LogRecord, _Mapping]] = ...) -> None: ...

class LogRecord(_message.Message):
    __slots__ = ("time", "level", "logger", "message", "trace_id", "span_id", "source", "fields")
    TIME_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    LOGGER_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    time: _timestamp_pb2.Timestamp
    level: LogLevel
    logger: str
    message: str
    trace_id: str
    span_id: str
    source: str
    fields: _struct_pb2.Struct
    def __init__(self, time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., level: _Optional[_Union[LogLevel, str]] = ..., logger: _Optional[str] = ..., message: _Optional[str] = ..., trace_id: _Optional[str] = ..., span_id: _Optional[str] = ..., source: _Optional[str] = ..., fields: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class LogSummary(_message.Message):
    __slots__ = ("level_counts", "source_counts", "sources", "unavailable_readers", "notes")
    class LevelCountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class SourceCountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    LEVEL_COUNTS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_COUNTS_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    UNAVAILABLE_READERS_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    level_counts: _containers.ScalarMap[str, int]
    source_counts: _containers.ScalarMap[str, int]
    sources: _containers.RepeatedScalarFieldContainer[str]
    unavailable_readers: _containers.RepeatedCompositeFieldContainer[UnavailableLogReader]
    notes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, level_counts: _Optional[_Mapping[str, int]] = ..., source_counts: _Optional[_Mapping[str, int]] = ..., sources: _Optional[_Iterable[str]] = ..., unavailable_readers: _Optional[_Iterable[_Union[UnavailableLogReader, _Mapping]]] = ..., notes: _Optional[_Iterable[str]] = ...) -> None: ...

class UnavailableLogReader(_message.Message):
    __slots__ = ("source", "reason")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    source: str
    reason: str
    def __init__(self, source: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...
