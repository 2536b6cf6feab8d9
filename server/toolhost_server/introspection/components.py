"""What component_inspector answers: each part of the running server, its state, and a line about it.

Each part is read from the live object that does the work (the registry, the log readers, the credential
sources...), never from a list kept beside them. A part that cannot be read is shown in state "error" with a
note; the reason goes to the server log.
"""

from __future__ import annotations

import asyncio
import logging
import pwd
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..model import ToolSource
from ..runners import runner_kinds
from .parts import ServerParts
from .redaction import redacted_url

logger = logging.getLogger("toolhost.introspection")

# ok: working; off: not configured; unavailable: configured but cannot work now; degraded: working, with less
# than it should; starting: not yet working; error: the inspector could not read it.
STATES = ("ok", "off", "unavailable", "degraded", "starting", "error")
# Reading the store's schema version connects to its database: a database that does not answer is a note.
STORE_READ_SECONDS = 5.0


@dataclass(frozen=True)
class Component:
    """One part of the server. `detail` is one line; `properties` what the named inspection adds."""

    name: str
    kind: str
    state: str
    detail: str
    properties: dict[str, Any] = field(default_factory=dict)

    def listed(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "state": self.state, "detail": self.detail}

    def inspected(self) -> dict[str, Any]:
        return {**self.listed(), "properties": self.properties}


async def server_components(parts: ServerParts, notes: list[str]) -> list[Component]:
    """Every component, in a fixed order; a part that fails to be read is an "error" entry and a note."""
    found: list[Component] = []
    readers: list[tuple[str, str, Callable[[ServerParts], Awaitable[list[Component]]]]] = [
        ("registry", "registry", _registry), ("runner", "runner", _runners), ("log_reader", "log reader", _log_readers),
        ("credentials", "credential source", _credential_sources), ("store", "store", _store),
        ("tracing", "tracing", _tracing), ("auth", "authentication", _auth), ("watcher", "catalog watcher", _watcher),
        ("http", "HTTP app", _http), ("search_index", "search index", _search_index),
        ("workspaces", "workspaces", _workspaces), ("user_tools", "user tools", _user_tools),
        ("databases", "databases", _databases),
        ("pipeline", "call pipeline", _pipeline), ("audit", "audit trail", _audit),
    ]
    for name, kind, read in readers:
        try:
            found += await read(parts)
        except Exception:
            logger.warning("component_inspector could not read the %s", kind, exc_info=True)
            notes.append(f"{name}: could not be read; the server log says why")
            found.append(Component(name, kind, "error", "could not be read; the server log says why"))
    return found


async def _registry(parts: ServerParts) -> list[Component]:
    snapshot = parts.registry.snapshot
    sources = Counter(tool.spec.source.value for tool in snapshot.tools().values())
    state = "ok" if snapshot.generation else "starting"
    detail = (f"generation {snapshot.generation}: {len(snapshot)} tools"
              if snapshot.generation else "no catalog loaded yet")
    return [Component("registry", "registry", state, detail, {
        "generation": snapshot.generation, "tools": len(snapshot), "by_source": dict(sorted(sources.items())),
        "catalog_dirs": [str(path) for path in parts.catalog_dirs]})]


async def _runners(parts: ServerParts) -> list[Component]:
    served = Counter(getattr(tool.runner, "kind", "") for tool in parts.registry.snapshot.tools().values())
    settings = parts.runner_settings
    properties: dict[str, dict[str, Any]] = {
        "python": {"sync_tool_threads": parts.config.sync_tool_threads},
        "process": {"runs_as": _identity(settings.process_identity),
                    "cgroup_parent": settings.process_cgroup_parent or "(the server's own cgroup, when delegated; "
                                                                       "decided at the first process call)",
                    "kill_grace_seconds": settings.kill_grace_seconds, "max_output_bytes": settings.max_output_bytes},
        "remote": {"pipeline_target": settings.pipeline_target or None, "max_hops": parts.config.max_hops,
                   "transport": "gRPC" if settings.remote_caller is not None else None},
    }
    properties["script"] = dict(properties["process"])
    found = []
    for kind in sorted(runner_kinds()):
        count = served[kind]
        state, detail = "ok", f"serves {count} tool{'' if count == 1 else 's'}"
        if kind == "remote" and settings.remote_caller is None:
            state, detail = "unavailable", "this server has no transport for remote calls"
        found.append(Component(f"runner.{kind}", "runner", state, detail,
                               {"tools": count, **properties.get(kind, {})}))
    return found


async def _log_readers(parts: ServerParts) -> list[Component]:
    config = parts.config
    found = []
    configured = {reader.source: reader for reader in parts.log_readers}
    for source, off_because in (("memory", ""), ("file", "log_files is not set"),
                                ("database", "log_database is off")):
        reader = configured.get(source)
        if reader is None:
            found.append(Component(f"log_reader.{source}", "log reader", "off", off_because))
            continue
        why_not = await asyncio.to_thread(reader.unavailable_reason)
        properties: dict[str, Any] = {"available": why_not is None}
        if source == "memory":
            properties |= {"max_records": config.log_memory_records, "max_bytes": config.log_memory_bytes}
        elif source == "file":
            properties |= {"patterns": list(config.log_files),
                           "line_pattern": config.log_file_pattern or "(the server's text format)"}
        found.append(Component(f"log_reader.{source}", "log reader", "ok" if why_not is None else "unavailable",
                               why_not or "readable", properties))
    return found


async def _credential_sources(parts: ServerParts) -> list[Component]:
    found = []
    for source in parts.credential_sources:
        availability = source.is_available()
        found.append(Component(
            f"credentials.{source.source}", "credential source", "ok" if availability else "unavailable",
            availability.reason, {"where": source.describe(), "available": bool(availability),
                                  "asked_in_order": [s.source for s in parts.credential_sources]}))
    return found


async def _store(parts: ServerParts) -> list[Component]:
    # Imported here: SQLAlchemy takes a while to import, and the store is read only when asked.
    from ..store.migrations import LATEST_VERSION

    store = parts.store
    properties: dict[str, Any] = {
        "engine": store.dialect, "database": redacted_url(store.description)
        if "://" in store.description else store.description,
        "latest_schema_version": LATEST_VERSION, "audit_database": parts.config.audit_database,
        "log_database": parts.config.log_database}
    try:
        version = await asyncio.wait_for(asyncio.to_thread(_schema_version, store), STORE_READ_SECONDS)
    except Exception as exc:  # StoreError, TimeoutError: the database is down or slow
        logger.warning("component_inspector could not read the store's schema version", exc_info=True)
        properties["schema_version"] = None
        reason = "did not answer in time" if isinstance(exc, TimeoutError) else "cannot be read"
        return [Component("store", "store", "unavailable",
                          f"{store.dialect}: {reason}; the server log says why", properties)]
    properties["schema_version"] = version
    state = "ok" if version == LATEST_VERSION else "degraded"
    return [Component("store", "store", state, f"{store.dialect}, schema version {version}", properties)]


def _schema_version(store: Any) -> int:
    from ..store.migrations import current_version

    with store.begin() as connection:
        return current_version(connection)


async def _tracing(parts: ServerParts) -> list[Component]:
    tracing = parts.tracing
    sampler = getattr(tracing.tracer, "sampler", None)
    properties: dict[str, Any] = {
        "exporter": tracing.exporter_name,
        "sampler": sampler.get_description() if sampler is not None else None}
    if tracing.export_queue is not None:
        properties["export_queue"] = asdict(tracing.export_queue.stats())
    detail = _hide_urls(tracing.describe())
    return [Component("tracing", "tracing", "ok" if tracing.enabled else "off", detail, properties)]


async def _auth(parts: ServerParts) -> list[Component]:
    config = parts.config
    table = parts.authenticator.rights_table()
    modes = [mode for mode, on in (("auth file", table is not None), ("mTLS", bool(config.tls_client_ca_file)),
                                   ("trusted unix socket", config.trusted_unix_socket)) if on]
    # Counts only: never a token, nor the hash a token is checked against.
    properties: dict[str, Any] = {"modes": modes, "required": parts.authenticator.required}
    if table is not None:
        properties |= {"roles": len(table.roles), "token_entries": len(table.token_callers),
                       "certificate_entries": len(table.common_name_callers) + len(table.san_callers),
                       "auth_file": config.auth_file}
    if not parts.authenticator.required:
        detail = "none: every caller is anonymous with every right" + (
            " (the unix socket's callers are admin)" if config.trusted_unix_socket else "")
        return [Component("auth", "authentication", "off", detail, properties)]
    roles = f", {len(table.roles)} roles" if table is not None else ""
    return [Component("auth", "authentication", "ok", f"{' + '.join(modes)}{roles}", properties)]


async def _watcher(parts: ServerParts) -> list[Component]:
    properties: dict[str, Any] = {"directories": [str(path) for path in parts.catalog_dirs],
                                  "debounce_ms": parts.config.watch_debounce_ms}
    if not parts.config.watch_catalog:
        return [Component("watcher", "catalog watcher", "off", "watch_catalog is off: reload to see changes",
                          properties)]
    task = parts.watch_task
    if task is None:
        return [Component("watcher", "catalog watcher", "starting", "starts once the first catalog is loaded",
                          properties)]
    if task.done():
        return [Component("watcher", "catalog watcher", "unavailable",
                          "stopped: changes are no longer reloaded (the server log says why)", properties)]
    return [Component("watcher", "catalog watcher", "ok",
                      f"watching {len(parts.catalog_dirs)} catalog directories", properties)]


async def _http(parts: ServerParts) -> list[Component]:
    config = parts.config
    if not config.http_address:
        return [Component("http", "HTTP app", "off", "http_address is empty: no HTTP listener")]
    surface = parts.surface
    addresses = [a.address for a in surface.addresses() if a.kind == "http"] if surface is not None else []
    properties: dict[str, Any] = {
        "configured_address": config.http_address, "addresses": addresses, "tls": bool(config.tls_cert_file),
        "metrics_protected_by": [how for how, on in (("metrics_token_file", bool(config.metrics_token_file)),
                                                     ("client certificates", bool(config.tls_client_ca_file)))
                                 if on],
        "routes": [route.path for route in surface.http_routes()] if surface is not None else []}
    if not addresses:
        return [Component("http", "HTTP app", "starting", "not listening yet", properties)]
    return [Component("http", "HTTP app", "ok", f"serving on {', '.join(addresses)}", properties)]


async def _search_index(parts: ServerParts) -> list[Component]:
    if parts.search is None:
        return [Component("search_index", "search index", "off", "search_roots is not set: no file search tools")]
    roots = parts.search.status()
    states = Counter(root.state for root in roots)
    state = "degraded" if states["degraded"] else "starting" if states["building"] else "ok"
    detail = ", ".join(f"{count} {name}" for name, count in sorted(states.items())) + f" of {len(roots)} roots"
    return [Component("search_index", "search index", state, detail, {"roots": [
        {"path": root.path, "state": root.state, "files": root.files, "watching": root.watching,
         "indexed_at": root.indexed_at.isoformat() if root.indexed_at else None,
         "degraded_reason": root.degraded_reason or None} for root in roots]})]


async def _workspaces(parts: ServerParts) -> list[Component]:
    workspaces = parts.workspaces
    if workspaces is None or not len(workspaces):
        return [Component("workspaces", "workspaces", "off", "no workspace is configured: no file tools")]
    entries = [{"name": served.name, "path": served.workspace.path, "read_only": served.workspace.read_only,
                "allow_bash": served.workspace.allow_bash, "bash_refused_because": workspaces.bash_refusal(served)
                or None} for served in workspaces]
    return [Component("workspaces", "workspaces", "ok",
                      f"{len(entries)} workspaces ({entries[0]['name']} is the default)", {"workspaces": entries})]


async def _user_tools(parts: ServerParts) -> list[Component]:
    services = parts.runner_settings.tool_services
    refusal = services.user_tools_refusal if services is not None else ""
    count = sum(1 for tool in parts.registry.snapshot.tools().values() if tool.spec.source is ToolSource.USER)
    notify = parts.store.dialect == "postgresql"
    properties = {"served": count, "store_engine": parts.store.dialect,
                  "propagation": "PostgreSQL LISTEN/NOTIFY, with polling as a fallback" if notify
                  else "polling the store (SQLite has no notifications)"}
    if refusal:
        return [Component("user_tools", "user tools", "off", refusal, properties)]
    return [Component("user_tools", "user tools", "ok", f"{count} served; changes from other servers by "
                      f"{'notification' if notify else 'polling'}", properties)]


async def _databases(parts: ServerParts) -> list[Component]:
    """The databases setting as database_schema finds it; nothing is connected to here."""
    databases = parts.config.databases
    if not databases:
        return [Component("databases", "databases", "off", "the databases setting names none (database_schema "
                          "reads the store alone)")]
    return [Component("databases", "databases", "ok",
                      f"{len(databases)} named: {', '.join(name for name, _ in databases)}",
                      {"urls": {name: redacted_url(url) for name, url in databases}})]


async def _pipeline(parts: ServerParts) -> list[Component]:
    pipeline = parts.pipeline
    properties = {"in_flight": pipeline.in_flight, "max_in_flight_calls": parts.config.max_in_flight_calls,
                  "max_call_seconds": parts.config.max_call_seconds, "accepting": pipeline.accepting}
    if not pipeline.accepting:
        return [Component("pipeline", "call pipeline", "unavailable", "shutting down: new calls are refused",
                          properties)]
    return [Component("pipeline", "call pipeline", "ok",
                      f"{pipeline.in_flight} of at most {parts.config.max_in_flight_calls} calls in flight",
                      properties)]


async def _audit(parts: ServerParts) -> list[Component]:
    writer = parts.audit.writer
    if writer is None:
        return [Component("audit", "audit trail", "ok", "to the toolhost.audit log only (audit_database is off)",
                          {"database": False})]
    stats = writer.stats()
    state = "degraded" if stats.dropped or stats.rejected else "ok"
    return [Component("audit", "audit trail", state,
                      f"to the log and the store; {stats.waiting_items} records waiting, {stats.dropped} dropped",
                      {"database": True, **asdict(stats)})]


def _identity(identity: tuple[int, int] | None) -> str:
    if identity is None:
        return "the server's own user"
    try:
        return f"{pwd.getpwuid(identity[0]).pw_name} (uid {identity[0]})"
    except KeyError:
        return f"uid {identity[0]}"


def _hide_urls(text: str) -> str:
    """Passwords of URLs in a line of text (an OTLP endpoint may carry one)."""
    return " ".join(redacted_url(word) if "://" in word and "@" in word else word for word in text.split(" "))
