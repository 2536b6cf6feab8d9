"""The live parts of one server that the introspection reads, gathered by app.py from its Toolhost."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..audit import AuditTrail
    from ..auth import Authenticator
    from ..config import Config, ConfigSources
    from ..credentials.base import CredentialSource
    from ..logs.reader import LogReader
    from ..pipeline import CallPipeline
    from ..registry import Registry
    from ..runners import RunnerSettings
    from ..search.service import SearchService
    from ..store.database import Store
    from ..telemetry import Tracing
    from ..workspaces.workspace_set import WorkspaceSet
    from .surface import ServingSurface


@dataclass(frozen=True)
class ServerParts:
    """What the introspection reads, as it is when asked: gathered anew for each question, since some parts
    start after the Toolhost is built (the catalog watcher). Read only: nothing here is called to change."""

    config: Config
    sources: ConfigSources
    registry: Registry
    catalog_dirs: tuple[Path, ...]
    runner_settings: RunnerSettings
    log_readers: Sequence[LogReader]
    credential_sources: Sequence[CredentialSource]
    # The store of todos, memory, user tools and conflicts (the audit and log tables use the same database).
    store: Store
    tracing: Tracing
    authenticator: Authenticator
    audit: AuditTrail
    pipeline: CallPipeline
    # The catalog watcher's task; None when watch_catalog is off or the server has not started.
    watch_task: asyncio.Task[None] | None
    search: SearchService | None
    workspaces: WorkspaceSet | None
    surface: ServingSurface | None
