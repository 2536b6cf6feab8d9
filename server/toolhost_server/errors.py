"""The domain errors of toolhost, raised by the core and turned into gRPC status in one place (api/status.py).

    ToolhostError                  base; never raised itself
     ├── ToolNotFoundError         no tool by that name            -> NOT_FOUND
     ├── InvalidArgumentsError     arguments fail the schema        -> INVALID_ARGUMENT + BadRequest
     │    └── UnsafePathError      a path leaves its workspace      -> INVALID_ARGUMENT + BadRequest
     ├── InvalidRequestError       malformed request                -> INVALID_ARGUMENT
     │    └── InvalidFieldsError   a record's fields are refused    -> INVALID_ARGUMENT + BadRequest
     ├── InvalidPageTokenError     token not ours / other filter    -> INVALID_ARGUMENT
     ├── HopLimitExceededError     remote forwarding loop           -> FAILED_PRECONDITION
     ├── OverCapacityError         no room for another call         -> RESOURCE_EXHAUSTED + RetryInfo
     ├── CallerDeadlineExceeded    the caller's deadline passed     -> DEADLINE_EXCEEDED
     ├── UnauthenticatedError      no or bad credentials            -> UNAUTHENTICATED
     ├── PermissionDeniedError     a visible tool it may not call   -> PERMISSION_DENIED
     └── ShuttingDownError         the server is draining           -> UNAVAILABLE

A tool that ran and failed is not an exception: it is a CallResult with success=False and a ToolFailure.
MissingCredentialsError (credentials a tool declares cannot be resolved) is raised before the tool runs, and the
call pipeline reports it the same way, as a ToolFailure with code MISSING_CREDENTIALS, so it is no ToolhostError.
Problems with catalog files are not exceptions either once loading is done: they are CatalogProblem records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


class ToolhostError(Exception):
    """Base of every error the core raises for a request it refuses.

    `reason` is an ErrorReason name without its prefix (see proto/toolhost/v1/error_reason.proto).
    """

    reason: str = "INTERNAL"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ToolNotFoundError(ToolhostError):
    """No tool has the requested name, or none the caller may see (to the caller they are the same).

    `suggestions` are close names, drawn only from the tools the caller sees: a suggestion must never reveal a
    hidden tool.
    """

    reason = "TOOL_NOT_FOUND"

    def __init__(self, name: str, suggestions: Sequence[str]) -> None:
        super().__init__(f"{unknown_tool_sentence(name, suggestions)} ListTools lists every tool available to you.")
        self.name = name
        self.suggestions = list(suggestions)


def unknown_tool_sentence(name: str, suggestions: Sequence[str]) -> str:
    """What an unknown name gets told first: `no tool named 'ecoh'; did you mean 'echo'?`, or `no tool named
    'x'.` when nothing is close. The CLI says the same, then points at its own command rather than the RPC."""
    if not suggestions:
        return f"no tool named {name!r}."
    quoted = [repr(s) for s in suggestions]
    options = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    return f"no tool named {name!r}; did you mean {options}?"


@dataclass(frozen=True, slots=True)
class FieldViolation:
    """One problem with the arguments: where (a JSON pointer into the arguments object) and why."""

    pointer: str
    reason: str


class InvalidArgumentsError(ToolhostError):
    """The arguments do not satisfy the tool's input schema."""

    reason = "INVALID_ARGUMENTS"

    def __init__(self, tool: str, violations: list[FieldViolation]) -> None:
        listed = "; ".join(f"{v.pointer or '/'}: {v.reason}" for v in violations)
        super().__init__(
            f"invalid arguments for tool {tool!r}: {listed}. GetTool({tool!r}) shows the input schema"
        )
        self.tool = tool
        self.violations = violations

    def naming(self, tool: str) -> InvalidArgumentsError:
        """The same refusal with the tool's name in it: raised by code that does not know which tool it serves
        (a workspace's path sanitizer), named by the runner that does."""
        return InvalidArgumentsError(tool, self.violations)


class UnsafePathError(InvalidArgumentsError):
    """A path argument that leaves its workspace, or names what no file tool opens (a device, FIFO, socket),
    or is no path at all (empty, NUL, too long). Raised by workspaces.PathSanitizer, which knows the argument but
    not the tool: `tool` is empty then, and the message says what to change either way.

    A file that is missing or of the wrong kind is not this: see workspaces.FileStateError.
    """

    def __init__(self, argument: str, problem: str, tool: str = "") -> None:
        violation = FieldViolation(f"/{argument}", problem)
        super().__init__(tool, [violation])
        where = f" for tool {tool!r}" if tool else ""
        self.message = f"invalid argument {argument!r}{where}: {problem}"
        self.args = (self.message,)
        self.argument = argument
        self.problem = problem

    def naming(self, tool: str) -> UnsafePathError:
        return UnsafePathError(self.argument, self.problem, tool)


class InvalidRequestError(ToolhostError):
    """The request is malformed in a way that is not about a tool's arguments."""

    reason = "INVALID_REQUEST"


class InvalidFieldsError(InvalidRequestError):
    """A record the request carries (an asset, an import document) has fields that cannot be kept: one
    FieldViolation per problem, `pointer` naming the field (`asset.winrm.port`) and `reason` how to fix it."""

    def __init__(self, message: str, violations: Sequence[FieldViolation]) -> None:
        super().__init__(message)
        self.violations = list(violations)


class InvalidPageTokenError(ToolhostError):
    """The page token was not issued by this server for the same filter."""

    reason = "INVALID_PAGE_TOKEN"


class HopLimitExceededError(ToolhostError):
    """A call forwarded between toolhosts has passed through too many of them."""

    reason = "HOP_LIMIT_EXCEEDED"


class OverCapacityError(ToolhostError):
    """The server has no room for this call now; retrying a little later may succeed."""

    reason = "OVER_CAPACITY"
    retry_after_seconds = 1.0


class CallerDeadlineExceeded(ToolhostError):
    """The caller's own deadline passed before the tool finished."""

    reason = "DEADLINE_EXCEEDED"


class ShuttingDownError(ToolhostError):
    """The server is draining and takes no new calls."""

    reason = "SHUTTING_DOWN"


class UnauthenticatedError(ToolhostError):
    """The server requires authentication and the request brought none, or none that is valid."""

    reason = "UNAUTHENTICATED"


class PermissionDeniedError(ToolhostError):
    """The caller is known but may not do this (a tool it sees but may not call, or an admin action).

    A tool the caller may not even see is a ToolNotFoundError instead, exactly as if it did not exist.
    """

    reason = "PERMISSION_DENIED"


class AlreadyExistsError(ToolhostError):
    """What the request would create exists already (a user tool's slug taken by another tool)."""

    reason = "ALREADY_EXISTS"


class ResourceNotFoundError(ToolhostError):
    """What the request names (a user tool, a version, a conflict) does not exist; a tool to call is
    ToolNotFoundError instead."""

    reason = "RESOURCE_NOT_FOUND"


class FailedPreconditionError(ToolhostError):
    """The request is valid but the server's state refuses it now; the message says what to change first."""

    reason = "FAILED_PRECONDITION"


class MissingCredentialsError(Exception):
    """Credentials a tool declares cannot be resolved. `problems` maps each such name to why (not found in
    any source, or a source that failed or holds an unusable value); no message ever holds a value."""

    code = "MISSING_CREDENTIALS"

    def __init__(self, problems: Mapping[str, str]) -> None:
        self.problems = dict(problems)
        self.names = tuple(self.problems)
        listed = "; ".join(f"{name} ({why})" for name, why in self.problems.items())
        self.message = f"missing credentials: {listed}"
        super().__init__(self.message)
