"""Python client for toolhost, the gRPC server that hosts tools for AI agents.

    import toolhost

    with toolhost.Client("127.0.0.1:50051", timeout=30) as client:
        result = client.call_tool("echo", text="hello")

`Client` blocks, `AsyncClient` is the same over asyncio. Errors are toolhost.ToolhostError subclasses (see
toolhost._errors for the tree). The generated messages and stubs are in toolhost.v1.
"""

from ._async_client import AsyncCallStream, AsyncClient, AsyncLogTail, AsyncToolWatch
from ._client import (
    DEFAULT_MAX_RECEIVE_MESSAGE_BYTES,
    DEFAULT_TARGET,
    CallStream,
    Client,
    LogTail,
    Metadata,
    OutputFormat,
    ToolView,
    ToolWatch,
)
from ._connection import is_local_target
from ._errors import (
    DeadlineExceededError,
    ErrorReason,
    FailedPreconditionError,
    FieldViolation,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    ToolhostError,
    UnauthenticatedError,
    UnavailableError,
    error_from_rpc,
)
from ._logs import LogEntry, LogLevel, LogPage, LogSummary
from ._results import (
    CallProgress,
    CatalogError,
    GenerationEvent,
    OutputChunk,
    ReloadResult,
    StreamEvent,
    ToolAnnotations,
    ToolError,
    ToolExample,
    ToolInfo,
    ToolPage,
    ToolParameter,
    ToolResult,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MAX_RECEIVE_MESSAGE_BYTES",
    "DEFAULT_TARGET",
    "AsyncCallStream",
    "AsyncClient",
    "AsyncLogTail",
    "AsyncToolWatch",
    "CallProgress",
    "CallStream",
    "CatalogError",
    "Client",
    "DeadlineExceededError",
    "ErrorReason",
    "FailedPreconditionError",
    "FieldViolation",
    "GenerationEvent",
    "InternalError",
    "InvalidArgumentError",
    "LogEntry",
    "LogLevel",
    "LogPage",
    "LogSummary",
    "LogTail",
    "Metadata",
    "NotFoundError",
    "OutputChunk",
    "OutputFormat",
    "PermissionDeniedError",
    "ReloadResult",
    "ResourceExhaustedError",
    "StreamEvent",
    "ToolAnnotations",
    "ToolError",
    "ToolExample",
    "ToolInfo",
    "ToolPage",
    "ToolParameter",
    "ToolResult",
    "ToolView",
    "ToolWatch",
    "ToolhostError",
    "UnauthenticatedError",
    "UnavailableError",
    "__version__",
    "error_from_rpc",
    "is_local_target",
]
