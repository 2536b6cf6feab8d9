"""The contract of a tool written in Python, and what its `run` receives and returns."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..call_events import CallEvents
from ..credentials.resolved import NO_CREDENTIALS, ResolvedCredentials
from ..model import Annotations, Example, Intent, Parameter

if TYPE_CHECKING:
    from ..assets.table import AssetTable
    from ..auth.caller import Caller
    from ..introspection.database_schemas import DatabaseSchemas
    from ..introspection.service import ServerIntrospection
    from ..introspection.surface import ServingSurface
    from ..logs.inspector import LogInspector
    from ..memory.table import MemoryTable
    from ..pipeline import CallRequest, CallResult
    from ..runners.base import RunOutcome
    from ..runners.process_launch import ChildCommand
    from ..search.service import SearchService
    from ..store.todo_table import TodoTable
    from ..tool_search import ToolSearch
    from ..user_tools.service import UserTools
    from ..windows.credential_hosts import CredentialHosts
    from ..workspaces.workspace_set import WorkspaceSet


@dataclass(frozen=True, slots=True)
class ToolServices:
    """The parts of the server its Python tools may use, handed to every call in its ToolContext (as the MCP
    SDK injects its Context), never reached through a process global: a process can run several servers, and
    a tool must use the one that serves its call. A pack that needs another part adds a field here, which the
    server (app.py) fills; a field is None where the server runs without that part (offline validation)."""

    # The server's log readers (memory ring, files, database), merged: the log_inspector tool's data.
    logs: LogInspector | None = None
    # The configured workspaces, each with its PathSanitizer: the file tools' only way to a file.
    workspaces: WorkspaceSet | None = None
    # The store's todos table: the todo tool's lists, kept per caller identity.
    todos: TodoTable | None = None
    # Runs a command as process tools run theirs: runners.process_launch.run_command with the server's settings
    # (minimal environment, group kill, output caps, cgroups), as `process_identity` when the command says so.
    run_process: Callable[[ChildCommand, CallEvents | None], Awaitable[RunOutcome]] | None = None
    # The (uid, gid) process tools run as (Config.process_user); None: the server's own user.
    process_identity: tuple[int, int] | None = None
    # The index of the search roots (Config.search_roots): the file search tools' data; None without roots.
    search: SearchService | None = None
    # The search over the served tools (SearchTools' own): the search_tools tool's data.
    tool_search: ToolSearch | None = None
    # The memory tools' structures and records, in the store: shared by every caller allowed those tools.
    memory: MemoryTable | None = None
    # The user tools (UserTools checks the rights) and the call pipeline: the tool-management tools' (tool_create
    # ... tool_run) way to the same core as UserToolService and CallTool. Functions, since both are built after
    # these services (the user tools' runners get them too).
    user_tools: Callable[[], UserTools] | None = None
    call_tool: Callable[[CallRequest], Awaitable[CallResult]] | None = None
    # Why this server serves no user tools (nor tool_create, tool_update, tool_run), or "": they would run as
    # the server's own user (user_tools/identity.py).
    user_tools_refusal: str = ""
    # What the server serves (addresses, gRPC methods, HTTP routes), recorded as it binds: route_inspector's data.
    surface: ServingSurface | None = None
    # The server's read-only view of itself (application, components, settings): application_info's,
    # component_inspector's and config_access's data.
    introspection: ServerIntrospection | None = None
    # The store and the configured databases (Config.databases), each read on request: database_schema's data.
    databases: DatabaseSchemas | None = None
    # The asset inventory: asset_count's, asset_search's and windows_list_directory's data.
    assets: AssetTable | None = None
    # Resolves credentials by name during a call, for a tool whose credential its arguments decide
    # (windows_list_directory: the asset's profile names it). The values are learned by the server's redactor
    # before they are returned, so the call's outcome, logs and spans hide them as a declared credential's.
    # MissingCredentialsError names each one no source holds.
    resolve_credentials: Callable[[Sequence[str]], Awaitable[ResolvedCredentials]] | None = None
    # Where windows_list_directory may send each credential (Config.winrm_credential_hosts; None: nowhere), and
    # the CA file WinRM over HTTPS trusts (Config.winrm_ca_file; "": the system's).
    winrm_credential_hosts: CredentialHosts | None = None
    winrm_ca_file: str = ""
    # The server's max_output_bytes: a tool that bounds its own output (read, bash) keeps under the smaller.
    max_output_bytes: int = 1024 * 1024


NO_SERVICES = ToolServices()


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a Python tool knows about the call it serves, besides its arguments, and the server parts it may
    use (`services`). The rights of the caller are checked before `run`: a tool with `requires_admin` runs
    only for admins."""

    call_id: str
    tool_name: str
    timeout_seconds: float
    logger: logging.Logger
    events: CallEvents | None = None
    # The credentials the tool declares (`credentials = ("winrm",)`), resolved for this call:
    # context.credentials["winrm"]["password"]. Never log or return them; the server redacts them anyway.
    credentials: ResolvedCredentials = NO_CREDENTIALS
    services: ToolServices = NO_SERVICES
    # The caller itself, with its rights: for a tool that asks the core to act for it (tool_create); None
    # outside a call. `caller` and `caller_method` read its name and method.
    authenticated_caller: Caller | None = None

    @property
    def caller(self) -> str:
        """The authenticated caller's name ("" outside a call). Two callers may share a name through different
        methods (a token and a certificate both named alice): data kept per caller is keyed by both."""
        return self.authenticated_caller.name if self.authenticated_caller is not None else ""

    @property
    def caller_method(self) -> str:
        """How the caller authenticated: "token", "mtls", "anonymous" or "trusted_unix_socket" ("" outside a
        call)."""
        return self.authenticated_caller.method.value if self.authenticated_caller is not None else ""

    def report_progress(self, progress: float, total: float | None = None, message: str = "") -> None:
        """Tell a streaming caller how far the tool got (in its own unit; `total` when known). Callable from
        a sync tool's thread too; does nothing when the caller does not stream. `message` is redacted."""
        if self.events is not None:
            self.events.progress(progress, total, message)


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """A tool's result: text for a person or a model, and optionally a structured JSON value."""

    text: str = ""
    structured: Any = None


class ToolRaisedFailure(Exception):
    """Raised by a tool to report a failure with a code of its own choosing (TOOL_EXCEPTION by default).

    Other exceptions are reported as TOOL_EXCEPTION with a generic message naming the call id; their text
    (which may hold anything) goes to the server log only, redacted.

    `output` is what the failed work produced, returned with the failure (a shell command's output next to its
    NON_ZERO_EXIT), and `exit_code` a program's exit status, as a process tool reports them.
    """

    def __init__(self, message: str, code: str = "TOOL_EXCEPTION", *, output: ToolOutput | None = None,
                 exit_code: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.output = output
        self.exit_code = exit_code


class Tool(ABC):
    """A tool implemented in Python. Subclasses in `toolhost_server.tools` (or in a package that registers
    itself in the `toolhost.tools` entry-point group) are found and served without further registration::

        class Echo(Tool):
            name = "echo"
            description = "Returns its text argument unchanged."
            parameters = (Parameter("text", "string", "What to echo back.", required=True),)
            annotations = Annotations(read_only=True, idempotent=True)

            async def run(self, arguments, context):
                return arguments["text"]

    `run` may return a str (the text output), a ToolOutput, or any other JSON value (returned as
    structured output and as its JSON text). It may be a plain `def` as well: it then runs in a worker thread.
    The arguments it receives are already validated against the parameters, with defaults filled in.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    display_name: ClassVar[str] = ""
    category: ClassVar[str] = "general"
    platform: ClassVar[str] = "cross-platform"
    version: ClassVar[str] = "1.0.0"
    parameters: ClassVar[tuple[Parameter, ...]] = ()
    output_schema: ClassVar[Mapping[str, Any] | None] = None
    timeout_seconds: ClassVar[float | None] = None
    requires_admin: ClassVar[bool] = False
    max_concurrency: ClassVar[int | None] = None
    max_output_bytes: ClassVar[int | None] = None
    tags: ClassVar[tuple[str, ...]] = ()
    examples: ClassVar[tuple[Example, ...]] = ()
    annotations: ClassVar[Annotations] = Annotations()
    credentials: ClassVar[tuple[str, ...]] = ()
    # Chat requests this tool answers (SearchTools): regular expressions the whole query must match, ignoring
    # case, with named groups for its arguments, or Intents that add constant arguments.
    intents: ClassVar[tuple[Intent | str, ...]] = ()
    # Set by an alias (a subclass serving the same code under another name): the target's name.
    alias_of: ClassVar[str] = ""
    # Only a grant that names the tool exactly allows calling it (see auth.permissions.ToolSet).
    grant_by_name_only: ClassVar[bool] = False

    @classmethod
    def unserved_because(cls, services: ToolServices) -> str:
        """Why this server does not serve the tool (say, no workspace is configured), or "" when it does. The
        server logs each distinct reason once at start."""
        return ""

    @abstractmethod
    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        """Carry out one call."""
