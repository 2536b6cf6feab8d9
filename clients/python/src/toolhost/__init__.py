"""Python client for toolhost, the gRPC server that hosts tools for AI agents.

    import toolhost

    with toolhost.Client("127.0.0.1:50051", timeout=30) as client:
        result = client.call_tool("echo", text="hello")

`Client` blocks, `AsyncClient` is the same over asyncio. Errors are toolhost.ToolhostError subclasses (see
toolhost._errors for the tree). The generated messages and stubs are in toolhost.v1.
"""

from ._asset_results import (
    Asset,
    AssetImportFormat,
    AssetImportSummary,
    AssetPage,
    WinrmAuthentication,
    WinrmProfile,
)
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
    AlreadyExistsError,
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
from ._instructions import Instructions
from ._logs import LogEntry, LogLevel, LogPage, LogSummary
from ._results import (
    CallProgress,
    CatalogError,
    ExampleExpectation,
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
from ._search import SearchResult, SearchResults
from ._user_tool_results import (
    ConflictType,
    ToolConflict,
    ToolConflictPage,
    UserTool,
    UserToolEnabled,
    UserToolPage,
    UserToolVersion,
    UserToolVersionPage,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MAX_RECEIVE_MESSAGE_BYTES",
    "DEFAULT_TARGET",
    "AlreadyExistsError",
    "Asset",
    "AssetImportFormat",
    "AssetImportSummary",
    "AssetPage",
    "AsyncCallStream",
    "AsyncClient",
    "AsyncLogTail",
    "AsyncToolWatch",
    "CallProgress",
    "CallStream",
    "CatalogError",
    "Client",
    "ConflictType",
    "DeadlineExceededError",
    "ErrorReason",
    "ExampleExpectation",
    "FailedPreconditionError",
    "FieldViolation",
    "GenerationEvent",
    "Instructions",
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
    "SearchResult",
    "SearchResults",
    "StreamEvent",
    "ToolAnnotations",
    "ToolConflict",
    "ToolConflictPage",
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
    "UserTool",
    "UserToolEnabled",
    "UserToolPage",
    "UserToolVersion",
    "UserToolVersionPage",
    "WinrmAuthentication",
    "WinrmProfile",
    "__version__",
    "error_from_rpc",
    "is_local_target",
]
