"""The toolhost core, assembled from a Config: registry, loader, reloader, call pipeline, catalog watcher.

Plain Python: the gRPC surface (api/), the CLI and tests all drive the same object.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING

from .audit import AuditRecord, AuditTrail
from .auth import Authenticator, Caller, require_admin, shell_refusal
from .catalog.builtins import unserved_builtins
from .catalog.entrypoints import EntrypointPolicy
from .catalog.loader import ToolLoader
from .config import Config, ConfigSources
from .credentials import CredentialResolver, ResolvedCredentials
from .instructions import Instructions, instructions_budget, write_instructions
from .introspection.database_schemas import DatabaseSchemas
from .introspection.database_sources import configured_database_secrets
from .introspection.parts import ServerParts
from .introspection.service import ServerIntrospection
from .introspection.surface import ServingSurface
from .listing import ToolFilter, matching_tools
from .logs.inspector import LogPage
from .logs.query import LogFilter
from .logs.record import LogRecord
from .logs.server_logs import ServerLogs
from .pipeline import CallPipeline, PipelineSettings
from .providers import provider_named
from .registry import Registry
from .reloading import Reloader, ReloadReport
from .runners import RunnerSettings
from .runners.process_launch import run_command
from .runners.remote import RemoteCaller
from .sanitize import LearningRedactor, Redactor
from .search.metrics import SearchIndexCollector
from .search.service import SearchService
from .telemetry import Tracing
from .telemetry.metrics import ToolhostMetrics
from .tool_search import ToolSearch
from .tools.base import ToolServices
from .user_tools.identity import user_tools_refusal
from .watcher import CatalogWatcher
from .windows.credential_hosts import CredentialHosts
from .workspaces.workspace_set import WorkspaceSet

if TYPE_CHECKING:
    from .assets.service import AssetInventory
    from .assets.table import AssetTable
    from .memory.table import MemoryTable
    from .store.todo_table import TodoTable
    from .user_tools.conflicts import ToolConflicts
    from .user_tools.propagation import UserToolSync
    from .user_tools.service import UserTools

logger = logging.getLogger("toolhost")


class Toolhost:
    """Everything behind the API. `start()` loads the catalog and starts watching; `close()` stops.

    What a caller asks of it goes through methods that take the caller and check its rights here, in the core,
    so that every surface (gRPC, and any added later) gets the same checks: `pipeline.call` and `stream` for
    tools, `reload`, `query_logs` and `follow_logs` for the admin's requests.
    """

    def __init__(self, config: Config, remote_caller: RemoteCaller | None = None,
                 config_sources: ConfigSources | None = None) -> None:
        self.config = config
        # Where each setting came from (load_config_with_sources); a Config built in code says "program".
        self.config_sources = config_sources or ConfigSources.of_program(config)
        self.registry = Registry()
        # SearchTools' intents and ranked index, prepared for each generation as the registry builds it.
        self.tool_search = ToolSearch(self.registry)
        # One redactor for outputs and logs; it learns the credential values calls resolve.
        self.redactor = LearningRedactor(Redactor(extra_secret_keys=config.redact_keys))
        # From the OTEL_* variables; this server's own provider, its exported spans redacted by that redactor.
        self.tracing = Tracing.from_environment(self.redactor)
        # The memory ring, the database log writer when configured, and the inspector over every log reader.
        self.logs = ServerLogs(config, self.redactor)
        # The todo tool's lists; a database_url that cannot work stops the start (StoreUnavailableError).
        self.todos = _todo_table(config)
        # The asset inventory, in the same store (opened at its first use): the asset tools' and AssetService's.
        self.asset_table = _asset_table(self.todos)
        # The index of the search roots, built in the background from start(); None without roots.
        self.search = SearchService.from_config(config, self.redactor)
        # What the server serves, filled by the gRPC and HTTP listeners as they bind (api/, web/).
        self.surface = ServingSurface()
        # The store and the configured databases, for database_schema (connections opened per call, read-only).
        self.databases = DatabaseSchemas.from_config(config)
        # The read-only view of this server the introspection tools get. Its parts are gathered at each
        # question: most are built below, the watcher only at start().
        self.introspection = ServerIntrospection(lambda: _introspection_parts(self), self.redactor)
        self.runner_settings = RunnerSettings(
            kill_grace_seconds=config.kill_grace_seconds,
            max_output_bytes=config.max_output_bytes,
            pipeline_target=config.pipeline_target,
            remote_caller=remote_caller,
            sync_tool_slots=threading.BoundedSemaphore(config.sync_tool_threads),
            process_identity=config.process_identity(),
            process_cgroup_parent=config.process_cgroup_parent,
            tracer=self.tracing.tracer,
            tool_services=ToolServices(
                logs=self.logs.inspector,
                workspaces=WorkspaceSet(config.workspaces, config.process_identity(), shell_refusal(config)),
                todos=self.todos,
                memory=_memory_table(self.todos),
                # How bash starts its commands: as process tools start theirs.
                run_process=lambda command, events: run_command(command, self.runner_settings, events),
                process_identity=config.process_identity(),
                max_output_bytes=config.max_output_bytes,
                search=self.search,
                tool_search=self.tool_search,
                surface=self.surface,
                introspection=self.introspection,
                databases=self.databases,
                assets=self.asset_table,
                # For the tool-management tools; both are built below, and called only once the server serves.
                user_tools=lambda: self.user_tools,
                user_tools_refusal=user_tools_refusal(config),
                call_tool=lambda request: self.pipeline.call(request),
                resolve_credentials=self._resolve_credentials,
                winrm_credential_hosts=CredentialHosts.from_setting(config.winrm_credential_hosts),
                winrm_ca_file=config.winrm_ca_file),
        )
        # The sources of the credentials tools declare; a store key that is set but unusable stops the start.
        self.credentials = CredentialResolver.from_config(config)
        self.audit = AuditTrail(_audit_store(config), redactor=self.redactor,
                                max_waiting_bytes=config.store_buffer_bytes)
        # The tool conflicts table, and the map of the tools equivalent to CLI providers' own (read at start).
        self.conflicts = _tool_conflicts(config, self.audit)
        # What AssetService (and any later surface) asks of the inventory: rights, values, audit.
        self.assets = _asset_inventory(self.asset_table, self.audit, config.max_call_seconds)
        # EntrypointSettingError when python_entrypoint_modules lists the standard library: no start.
        self.loader = ToolLoader(config.effective_catalog_dirs(), config.required_tools, self.runner_settings,
                                 EntrypointPolicy.from_setting(config.python_entrypoint_modules))
        # Prometheus metrics of this server only (its own collector registry), served at /metrics.
        self.metrics = ToolhostMetrics()
        self._observe_buffers()
        self.reloader = Reloader(self.loader, self.registry, self.metrics.observe_reload)
        # User tools, kept in the todos' store and merged into every generation by the reloader.
        self.user_tools, self._user_tool_sync = _user_tools(self)
        # Each new generation may follow another replica's change of the conflicts: read them again.
        self.registry.add_listener(self.conflicts.on_snapshot)
        self.pipeline = CallPipeline(
            self.registry, PipelineSettings(
                max_call_seconds=config.max_call_seconds, max_hops=config.max_hops,
                max_in_flight_calls=config.max_in_flight_calls, max_output_bytes=config.max_output_bytes),
            self.redactor, self.audit, self.credentials, self.tracing.tracer, self.metrics)
        # Reads the auth file now: a server whose rights table is unusable must not start (AuthFileError).
        self.authenticator = Authenticator.from_config(config)
        self._watcher: CatalogWatcher | None = None
        self._watch_task: asyncio.Task[None] | None = None

    def _observe_buffers(self) -> None:
        """What waits for the store and for the OTLP collector, what they lost, and what the log ring holds, in
        the metrics."""
        if self.audit.writer is not None:
            self.metrics.observe_store_writer("audit_records", self.audit.writer.stats)
        if self.logs.database_handler is not None:
            self.metrics.observe_store_writer("logs", self.logs.database_handler.writer.stats)
        if self.tracing.export_queue is not None:
            self.metrics.observe_export_queue(self.tracing.export_queue.stats)
        ring = self.logs.ring
        self.metrics.observe_log_ring(lambda: ring.held_bytes)
        if self.search is not None:
            self.metrics.registry.register(SearchIndexCollector(self.search.status))

    async def start(self) -> ReloadReport:
        if self.config.audit_database or self.config.log_database:
            # Now, not at the first write: a database whose schema is newer than this toolhost stops the start
            # (StoreSchemaError). Imported here, as in _audit_store.
            from .store.database import migrate_at_start

            await asyncio.to_thread(migrate_at_start, self.config)
        self.audit.start()
        self.logs.start()
        logger.info("%s", self.tracing.describe())
        for line in self.credentials.describe():
            logger.info("credentials: %s", line)
        # Every configured value is hidden from the start, not only once a call resolves it: a log file, or another
        # replica's log rows, may hold one before any tool here has used it.
        self.redactor.learn(await self.credentials.configured_values())
        self.redactor.learn(configured_database_secrets(self.config))
        if self.search is not None:  # after learning them: the index holds text redacted with every value
            await self.search.start()
        for reason, names in unserved_builtins(self.runner_settings.tool_services or ToolServices()).items():
            logger.info("not serving %s: %s", ", ".join(names), reason)
        await self.conflicts.start()
        await self._load_user_tools()
        report = await self.reloader.reload("start")
        self._user_tool_sync.start()
        if self.config.watch_catalog:
            self._watcher = CatalogWatcher(
                self.loader.catalog_dirs, self.config.watch_debounce_ms, self._on_catalog_change)
            self._watch_task = asyncio.create_task(self._watcher.run(), name="catalog-watcher")
        return report

    async def _resolve_credentials(self, names: Sequence[str]) -> ResolvedCredentials:
        """Credentials a tool asks for during its call (ToolServices.resolve_credentials): resolved as declared
        ones are, and learned by the redactor before the tool sees them."""
        credentials = await self.credentials.resolve(names)
        self.redactor.learn(credentials.values())
        return credentials

    async def reload(self, caller: Caller, reason: str) -> ReloadReport:
        """Read the catalog directories again and swap in the result: the admin role only (anyone, without
        auth), since it changes what every caller sees."""
        require_admin(caller, "Reload")
        return await self.reloader.reload(reason)

    async def query_logs(self, caller: Caller, log_filter: LogFilter, page_size: int = 0,
                         page_token: str = "") -> LogPage:
        """One page of the server's log records, newest first. Logs show what every caller did: the admin role
        only (anyone, without auth)."""
        require_admin(caller, "QueryLogs")
        return await self.logs.inspector.query(log_filter, page_size, page_token)

    def follow_logs(self, caller: Caller, log_filter: LogFilter, backlog: int = 0) -> AsyncGenerator[LogRecord, None]:
        """The newest `backlog` matching records, then each new one (LogInspector.follow); the admin role only.
        Checked now, not at the first iteration, so that a refused caller is told before anything streams."""
        require_admin(caller, "TailLogs")
        return self.logs.inspector.follow(log_filter, backlog)

    def tool_filter(self, platform: str = "", category: str = "", tags: Sequence[str] = (),
                    provider: str = "") -> ToolFilter:
        """ListTools' filter, with the provider's rules as the conflicts table now says; InvalidRequestError for
        an unknown provider."""
        return ToolFilter(platform, category, tuple(tags), provider, self.conflicts.natives_equivalent())

    def instructions(self, caller: Caller, provider: str) -> Instructions:
        """The instructions block for an agent of `provider` about the tools ListTools with that provider shows
        `caller`; InvalidRequestError for a missing or unknown provider."""
        rules = provider_named(provider)
        tools = matching_tools(self.registry.snapshot, self.tool_filter(provider=provider), caller)
        return write_instructions(rules, (tool.spec for tool in tools),
                                  instructions_budget(self.config.max_message_bytes))

    async def _load_user_tools(self) -> None:
        """Read the user tools before the first load serves them. A store that cannot be read now does not stop
        the start: the sync reads them once it can."""
        from .store.errors import StoreError

        try:
            await self.user_tools.serving.refresh()
        except StoreError as exc:
            logger.warning("user tools: cannot read them from the store yet, serving none for now: %s", exc)

    async def _on_catalog_change(self) -> None:
        await self.reloader.reload("catalog files changed")

    async def close(self) -> None:
        self.registry.close()
        await self._user_tool_sync.close()
        if self.search is not None:
            await self.search.close()
        await self.audit.close()
        self.credentials.close()
        self.todos.store.close()
        self.conflicts.store.close()
        self.databases.close()
        await self.logs.close()
        if self._watch_task is not None:
            self._watch_task.cancel()
            with suppress(asyncio.CancelledError):
                await self._watch_task
        # Last: the spans of the calls that just ended are exported before the process goes.
        await asyncio.to_thread(self.tracing.close)


def _audit_store(config: Config) -> Callable[[Sequence[AuditRecord]], None] | None:
    """Where audit records go besides the log: the store's audit_records table, unless turned off."""
    if not config.audit_database:
        return None
    # Imported here: SQLAlchemy takes a while to import, and a server with the audit table off never needs it.
    from .store.audit_table import AuditTable
    from .store.database import Store

    return AuditTable(Store.from_config(config)).append


def _tool_conflicts(config: Config, audit: AuditTrail) -> ToolConflicts:
    """The tool conflicts, in the store (read first at start)."""
    from .store.database import Store
    from .user_tools.conflicts import ToolConflicts

    return ToolConflicts(Store.from_config(config), audit)


def _todo_table(config: Config) -> TodoTable:
    """The todo tool's lists, in the store (opened at their first use)."""
    from .store.database import Store
    from .store.todo_table import TodoTable

    return TodoTable(Store.from_config(config))


def _user_tools(toolhost: Toolhost) -> tuple[UserTools, UserToolSync]:
    """The user tools' service and the sync that brings other servers' changes, on the todos' store."""
    from .user_tools.propagation import UserToolSync
    from .user_tools.service import UserTools
    from .user_tools.serving import UserToolServing
    from .user_tools.table import UserToolTable

    table = UserToolTable(toolhost.todos.store)
    serving = UserToolServing(table, toolhost.loader, toolhost.reloader, toolhost.runner_settings.tool_services)
    service = UserTools(table, serving, toolhost.loader, toolhost.registry, toolhost.audit)
    return service, UserToolSync(table, serving)


def _introspection_parts(toolhost: Toolhost) -> ServerParts:
    return ServerParts(
        config=toolhost.config, sources=toolhost.config_sources, registry=toolhost.registry,
        catalog_dirs=tuple(toolhost.loader.catalog_dirs), runner_settings=toolhost.runner_settings,
        log_readers=toolhost.logs.inspector.readers, credential_sources=toolhost.credentials.sources,
        store=toolhost.todos.store, tracing=toolhost.tracing, authenticator=toolhost.authenticator,
        audit=toolhost.audit, pipeline=toolhost.pipeline, watch_task=toolhost._watch_task, search=toolhost.search,
        workspaces=toolhost.runner_settings.tool_services.workspaces if toolhost.runner_settings.tool_services
        else None, surface=toolhost.surface)


def _asset_table(todos: TodoTable) -> AssetTable:
    """The asset inventory, in the todos' store (opened at its first use)."""
    from .assets.table import AssetTable

    return AssetTable(todos.store)


def _asset_inventory(table: AssetTable, audit: AuditTrail, read_seconds: float) -> AssetInventory:
    from .assets.service import AssetInventory

    return AssetInventory(table, audit, read_seconds)


def _memory_table(todos: TodoTable) -> MemoryTable:
    """The memory tools' structures and records, in the todos' store (opened at their first use)."""
    from .memory.table import MemoryTable

    return MemoryTable(todos.store)
