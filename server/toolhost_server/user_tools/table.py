"""The user_tools and tool_versions tables: user tools and their versions, each change one transaction.

Every change also writes the tool's next tool_versions row, and on PostgreSQL sends a NOTIFY on CHANGES_CHANNEL
in the same transaction (delivered at commit), which the other replicas listen to (propagation.py).
Blocking: the service calls it in a thread.

    table = UserToolTable(store)
    table.create(record, "alice")                   # version 1, "create"
    table.change("disk_usage", lambda tool: dataclasses.replace(tool, script="du -sh ."), "alice", "update")
    table.versions("disk_usage", before=0, limit=100)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update
from sqlalchemy import text as sql_text

from ..errors import AlreadyExistsError, ResourceNotFoundError
from ..store.database import Store
from ..store.schema import tool_versions, user_tools
from .records import UserToolRecord, UserToolVersionRecord

# The PostgreSQL channel every change is announced on; the payload is the tool's slug.
CHANGES_CHANNEL = "toolhost_user_tools"


def taken_name_error(slug: str) -> AlreadyExistsError:
    """The one refusal of a name in use, whichever tool holds it (built-in, catalog or user tool, seen by the
    caller or not): a different message would tell which tools exist."""
    return AlreadyExistsError(f"the slug {slug!r} is already the name of a tool; choose another slug")


def not_found_error(slug: str) -> ResourceNotFoundError:
    return ResourceNotFoundError(f"there is no user tool {slug!r}; ListUserTools shows the user tools")


class UserToolTable:
    """Reads and changes user tools; every method is one transaction."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def create(self, tool: UserToolRecord, changed_by: str) -> UserToolRecord:
        """Store `tool` as version 1 (its version and times are set here); AlreadyExistsError for a taken slug."""
        now = datetime.now(UTC)
        created = dataclasses.replace(tool, version=1, created_at=now, updated_at=now, shadowed_by="")
        with self.store.begin() as connection:
            # Two replicas creating one slug: SQLite's BEGIN IMMEDIATE and PostgreSQL's lock take turns here,
            # so the second sees the first's row instead of failing on the primary key.
            _lock_slug(connection, tool.slug)
            if _row(connection, tool.slug) is not None:
                raise taken_name_error(tool.slug)
            connection.execute(insert(user_tools).values(**_columns(created), created_by=changed_by))
            _add_version(connection, created, changed_by, "create")
        return created

    def get(self, slug: str) -> UserToolRecord:
        with self.store.begin() as connection:
            row = _row(connection, slug)
        if row is None:
            raise not_found_error(slug)
        return _record(row)

    def page(self, after: str, limit: int) -> list[UserToolRecord]:
        """Up to `limit` tools with slugs after `after`, sorted by slug."""
        with self.store.begin() as connection:
            rows = connection.execute(select(user_tools).where(user_tools.c.slug > after)
                                      .order_by(user_tools.c.slug).limit(limit)).mappings().all()
        return [_record(row) for row in rows]

    def all(self) -> list[UserToolRecord]:
        """Every user tool, sorted by slug: what the registry serves (the enabled ones) is built from it."""
        with self.store.begin() as connection:
            rows = connection.execute(select(user_tools).order_by(user_tools.c.slug)).mappings().all()
        return [_record(row) for row in rows]

    def state(self) -> Hashable:
        """What changes whenever any tool does (slug, version, enabled, update time of each): cheap to poll."""
        with self.store.begin() as connection:
            rows = connection.execute(select(user_tools.c.slug, user_tools.c.version, user_tools.c.enabled,
                                             user_tools.c.updated_at).order_by(user_tools.c.slug)).all()
        return tuple(tuple(row) for row in rows)

    def change(self, slug: str, transform: Callable[[UserToolRecord], UserToolRecord], changed_by: str,
               change: str, *, new_version: bool = True) -> tuple[UserToolRecord, UserToolRecord]:
        """Apply `transform` to the stored tool and store the result, as the next version unless `new_version`
        is false (enabling keeps the version). Returns (before, after). `transform` runs inside the transaction,
        with the tool locked, and may raise to refuse the change; ResourceNotFoundError for an unknown slug."""
        with self.store.begin() as connection:
            _lock_slug(connection, slug)
            row = _row(connection, slug)
            if row is None:
                raise not_found_error(slug)
            before = _record(row)
            after = dataclasses.replace(
                transform(before), slug=slug, version=before.version + (1 if new_version else 0),
                created_at=before.created_at, updated_at=datetime.now(UTC), shadowed_by="")
            connection.execute(update(user_tools).where(user_tools.c.slug == slug).values(**_columns(after)))
            if new_version:
                _add_version(connection, after, changed_by, change)
            else:
                _notify(connection, slug)
        return before, after

    def delete(self, slug: str) -> UserToolRecord:
        """Remove the tool and its versions; the tool as it was. ResourceNotFoundError for an unknown slug."""
        with self.store.begin() as connection:
            _lock_slug(connection, slug)
            row = _row(connection, slug)
            if row is None:
                raise not_found_error(slug)
            connection.execute(delete(tool_versions).where(tool_versions.c.slug == slug))
            connection.execute(delete(user_tools).where(user_tools.c.slug == slug))
            _notify(connection, slug)
        return _record(row)

    def versions(self, slug: str, before: int, limit: int) -> list[UserToolVersionRecord]:
        """Up to `limit` versions older than `before` (0: from the newest), newest first."""
        with self.store.begin() as connection:
            if _row(connection, slug) is None:
                raise not_found_error(slug)
            query = select(tool_versions).where(tool_versions.c.slug == slug)
            if before:
                query = query.where(tool_versions.c.version < before)
            rows = connection.execute(query.order_by(tool_versions.c.version.desc()).limit(limit)).mappings().all()
        return [_version_record(row) for row in rows]

    def version(self, slug: str, version: int) -> UserToolVersionRecord:
        with self.store.begin() as connection:
            row = connection.execute(select(tool_versions).where(
                tool_versions.c.slug == slug, tool_versions.c.version == version)).mappings().first()
        if row is None:
            raise ResourceNotFoundError(f"the user tool {slug!r} has no version {version}; ListUserToolVersions "
                                        "shows its versions")
        return _version_record(row)


def _row(connection: Connection, slug: str) -> Any:
    return connection.execute(select(user_tools).where(user_tools.c.slug == slug)).mappings().first()


def _lock_slug(connection: Connection, slug: str) -> None:
    if connection.dialect.name == "postgresql":
        # Held to the end of the transaction: changes of one slug on several replicas take turns.
        connection.execute(sql_text("SELECT pg_advisory_xact_lock(hashtext(:key))"),
                           {"key": f"{CHANGES_CHANNEL}:{slug}"})


def _notify(connection: Connection, slug: str) -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(sql_text("SELECT pg_notify(:channel, :slug)"), {"channel": CHANGES_CHANNEL, "slug": slug})


def _add_version(connection: Connection, tool: UserToolRecord, changed_by: str, change: str) -> None:
    connection.execute(insert(tool_versions).values(
        slug=tool.slug, version=tool.version, script=tool.script, system_prompt=tool.system_prompt,
        input_schema=tool.input_schema, changed_by=changed_by, change=change, created_at=tool.updated_at))
    _notify(connection, tool.slug)


def _columns(tool: UserToolRecord) -> dict[str, Any]:
    return {
        "slug": tool.slug, "name": tool.name, "description": tool.description, "category": tool.category,
        "system_prompt": tool.system_prompt, "input_schema": tool.input_schema, "script": tool.script,
        "enabled": tool.enabled, "timeout_seconds": tool.timeout_seconds, "tags": list(tool.tags),
        "credentials": list(tool.credentials), "version": tool.version, "created_at": tool.created_at,
        "updated_at": tool.updated_at,
    }


def _record(row: Any) -> UserToolRecord:
    return UserToolRecord(
        slug=row["slug"], name=row["name"], description=row["description"], category=row["category"],
        system_prompt=row["system_prompt"], input_schema=dict(row["input_schema"]), script=row["script"],
        enabled=bool(row["enabled"]), timeout_seconds=row["timeout_seconds"], tags=tuple(row["tags"]),
        credentials=tuple(row["credentials"]), version=row["version"], created_at=_aware(row["created_at"]),
        updated_at=_aware(row["updated_at"]))


def _version_record(row: Any) -> UserToolVersionRecord:
    return UserToolVersionRecord(
        slug=row["slug"], version=row["version"], script=row["script"], system_prompt=row["system_prompt"],
        input_schema=dict(row["input_schema"]), changed_by=row["changed_by"], created_at=_aware(row["created_at"]),
        change=row["change"])


def _aware(moment: datetime) -> datetime:
    # SQLite keeps no time zone: the times written were UTC.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
