from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor

class ErrorReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_REASON_UNSPECIFIED: _ClassVar[ErrorReason]
    ERROR_REASON_TOOL_NOT_FOUND: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_ARGUMENTS: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_REQUEST: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_PAGE_TOKEN: _ClassVar[ErrorReason]
    ERROR_REASON_OVER_CAPACITY: _ClassVar[ErrorReason]
    ERROR_REASON_DEADLINE_EXCEEDED: _ClassVar[ErrorReason]
    ERROR_REASON_HOP_LIMIT_EXCEEDED: _ClassVar[ErrorReason]
    ERROR_REASON_SHUTTING_DOWN: _ClassVar[ErrorReason]
    ERROR_REASON_UNAUTHENTICATED: _ClassVar[ErrorReason]
    ERROR_REASON_PERMISSION_DENIED: _ClassVar[ErrorReason]
    ERROR_REASON_INTERNAL: _ClassVar[ErrorReason]
    ERROR_REASON_ALREADY_EXISTS: _ClassVar[ErrorReason]
    ERROR_REASON_RESOURCE_NOT_FOUND: _ClassVar[ErrorReason]
    ERROR_REASON_FAILED_PRECONDITION: _ClassVar[ErrorReason]
    ERROR_REASON_STORE_UNAVAILABLE: _ClassVar[ErrorReason]
    ERROR_REASON_STORE_OUTCOME_UNKNOWN: _ClassVar[ErrorReason]
ERROR_REASON_UNSPECIFIED: ErrorReason
ERROR_REASON_TOOL_NOT_FOUND: ErrorReason
ERROR_REASON_INVALID_ARGUMENTS: ErrorReason
ERROR_REASON_INVALID_REQUEST: ErrorReason
ERROR_REASON_INVALID_PAGE_TOKEN: ErrorReason
ERROR_REASON_OVER_CAPACITY: ErrorReason
ERROR_REASON_DEADLINE_EXCEEDED: ErrorReason
ERROR_REASON_HOP_LIMIT_EXCEEDED: ErrorReason
ERROR_REASON_SHUTTING_DOWN: ErrorReason
ERROR_REASON_UNAUTHENTICATED: ErrorReason
ERROR_REASON_PERMISSION_DENIED: ErrorReason
ERROR_REASON_INTERNAL: ErrorReason
ERROR_REASON_ALREADY_EXISTS: ErrorReason
ERROR_REASON_RESOURCE_NOT_FOUND: ErrorReason
ERROR_REASON_FAILED_PRECONDITION: ErrorReason
ERROR_REASON_STORE_UNAVAILABLE: ErrorReason
ERROR_REASON_STORE_OUTCOME_UNKNOWN: ErrorReason
