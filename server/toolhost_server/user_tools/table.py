"""The user_tools and tool_versions tables: user tools and their versions, each change one transaction.

Every change also writes the tool's next tool_versions row (only the last MAX_VERSIONS_PER_TOOL are kept), and
on PostgreSQL sends a NOTIFY on CHANGES_CHANNEL in the same transaction (delivered at commit), which the other
replicas listen to (propagation.py). A transaction that adds a tool or enables one runs its admission check
(the tool conflicts, admission.py) under one lock that every such transaction takes, so that two of them never
both pass on what the other is about to change. A row that cannot be decoded (edited in the database, written
by another release) is skipped by the reads of many rows and logged once; the tool itself can still be deleted.
Blocking: the service calls it in a thread.

    table = UserToolTable(store)
    table.create(record, "alice")                   # version 1, "create"
    table.change("disk_usage", lambda tool: dataclasses.replace(tool, script="du -sh ."), "alice", "update")
    table.versions("disk_usage", before=0, limit=100)
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Callable, Hashable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Text, cast, delete, func, insert, select, update
from sqlalchemy import text as sql_text

from ..errors import AlreadyExistsError, FailedPreconditionError, ResourceNotFoundError
from ..store.database import Store
from ..store.schema import tool_versions, user_tools
from .records import UserToolRecord, UserToolVersionRecord, VersionDetails

logger = logging.getLogger("toolhost.user_tools")

# The PostgreSQL channel every change is announced on; the payload is the tool's slug.
CHANGES_CHANNEL = "toolhost_user_tools"
# Bounds that keep the store, and every replica's memory of the served tools, finite.
MAX_USER_TOOLS = 1000
MAX_VERSIONS_PER_TOOL = 100
# The PostgreSQL advisory lock (transaction-scoped) every transaction that adds a tool or enables one takes
# before it counts the tools and reads the enabled flags its checks depend on. A bigint beyond hashtext's 32-bit
# range, so that no slug's lock (_lock_slug) is the same. SQLite needs none: its write transactions start with
# BEGIN IMMEDIATE (store/engine.py) and so take turns already.
ADMISSION_LOCK_ID = 0x746F6F6C61646D74  # "tooladmt"
# Rows whose whole record a refresh reads per query: the changed tools only, a few at a time.
_READ_CHUNK = 100

# Run inside the transaction that stores an enabled tool, under the admission lock, with the tool as it is about
# to be stored: it may read the database through the connection, and raises to refuse.
Admission = Callable[[Connection, UserToolRecord], None]


def taken_name_error(slug: str) -> AlreadyExistsError:
    """The one refusal of a name in use, whichever tool holds it (built-in, catalog or user tool, seen by the
    caller or not): a different message would tell which tools exist."""
    return AlreadyExistsError(f"the slug {slug!r} is already the name of a tool; choose another slug")


def not_found_error(slug: str) -> ResourceNotFoundError:
    return ResourceNotFoundError(f"there is no user tool {slug!r}; ListUserTools shows the user tools")


class DamagedRowError(ValueError):
    """A stored row that is not a user tool or version this release can read."""


class UserToolTable:
    """Reads and changes user tools; every method is one transaction."""

    def __init__(self, store: Store) -> None:
        self.store = store
        # The damaged rows already logged, by (table, slug, version, update time): each is logged once.
        self._reported: set[tuple[str, str, Any, Any]] = set()

    def create(self, tool: UserToolRecord, changed_by: str, admit: Admission | None = None) -> UserToolRecord:
        """Store `tool` as version 1 (its version and times are set here). AlreadyExistsError for a taken slug,
        FailedPreconditionError past MAX_USER_TOOLS; `admit` (when the tool is enabled) may refuse it too."""
        now = datetime.now(UTC)
        created = dataclasses.replace(tool, version=1, created_at=now, updated_at=now, shadowed_by="")
        with self.store.begin() as connection:
            # Two replicas creating one slug: SQLite's BEGIN IMMEDIATE and PostgreSQL's lock take turns here,
            # so the second sees the first's row instead of failing on the primary key.
            _lock_slug(connection, tool.slug)
            _lock_admissions(connection)
            if _row(connection, tool.slug) is not None:
                raise taken_name_error(tool.slug)
            count = connection.execute(select(func.count()).select_from(user_tools)).scalar_one()
            if count >= MAX_USER_TOOLS:
                raise FailedPreconditionError(
                    f"this server keeps at most {MAX_USER_TOOLS} user tools and has {count}; delete the ones no "
                    "longer needed (DeleteUserTool, `toolhost user-tools delete SLUG`) first")
            if admit is not None and created.enabled:
                admit(connection, created)
            connection.execute(insert(user_tools).values(**_columns(created), created_by=changed_by))
            _add_version(connection, created, changed_by, "create")
        return created

    def get(self, slug: str) -> UserToolRecord:
        """The tool; ResourceNotFoundError for an unknown slug, FailedPreconditionError for a damaged row."""
        with self.store.begin() as connection:
            row = _row(connection, slug)
        if row is None:
            raise not_found_error(slug)
        return self._readable(row)

    def page(self, after: str, limit: int) -> tuple[list[UserToolRecord], str]:
        """Up to `limit` tools with slugs after `after`, sorted by slug, and the slug the next page starts
        after ("" on the last page). A damaged row is left out (and logged), so a page may hold fewer."""
        with self.store.begin() as connection:
            rows = connection.execute(select(*_TOOL_COLUMNS).where(user_tools.c.slug > after)
                                      .order_by(user_tools.c.slug).limit(limit + 1)).mappings().all()
        more = len(rows) > limit
        rows = rows[:limit]
        records = [record for record in map(self._decoded, rows) if record is not None]
        return records, rows[-1]["slug"] if more else ""

    def all(self) -> list[UserToolRecord]:
        """Every readable user tool, sorted by slug (damaged rows are left out and logged)."""
        return self.read_changed({})

    def read_changed(self, held: Mapping[str, UserToolRecord]) -> list[UserToolRecord]:
        """Every readable user tool, sorted by slug, reusing each of `held` whose version, enabled flag and
        update time are still the stored ones: only the tools that changed are read whole, so that the refresh
        after one change reads one script, not every tool's."""
        with self.store.begin() as connection:
            stamps = connection.execute(select(
                user_tools.c.slug, user_tools.c.version, user_tools.c.enabled, user_tools.c.updated_at,
            ).order_by(user_tools.c.slug)).all()
            stale = [slug for slug, version, enabled, updated_at in stamps
                     if not _unchanged(held.get(slug), version, enabled, updated_at)]
            fresh: dict[str, UserToolRecord] = {}
            for start in range(0, len(stale), _READ_CHUNK):
                rows = connection.execute(select(*_TOOL_COLUMNS).where(
                    user_tools.c.slug.in_(stale[start:start + _READ_CHUNK]))).mappings().all()
                for row in rows:
                    record = self._decoded(row)
                    if record is not None:
                        fresh[record.slug] = record
        stale_slugs = frozenset(stale)
        records = []
        for slug, *_ in stamps:
            record = fresh.get(slug) if slug in stale_slugs else held[slug]
            if record is not None:
                records.append(record)
        return records

    def state(self) -> Hashable:
        """What changes whenever any tool does (slug, version, enabled, update time of each): cheap to poll."""
        with self.store.begin() as connection:
            rows = connection.execute(select(user_tools.c.slug, user_tools.c.version, user_tools.c.enabled,
                                             user_tools.c.updated_at).order_by(user_tools.c.slug)).all()
        return tuple(tuple(row) for row in rows)

    def change(self, slug: str, transform: Callable[[UserToolRecord], UserToolRecord], changed_by: str,
               change: str, *, new_version: bool = True,
               admit: Admission | None = None) -> tuple[UserToolRecord, UserToolRecord]:
        """Apply `transform` to the stored tool and store the result, as the next version unless `new_version`
        is false (enabling keeps the version). Returns (before, after). `transform` runs inside the transaction,
        with the tool locked, and may raise to refuse the change; so may `admit`, run when the result is
        enabled. ResourceNotFoundError for an unknown slug."""
        with self.store.begin() as connection:
            _lock_slug(connection, slug)
            if admit is not None:
                _lock_admissions(connection)
            row = _row(connection, slug)
            if row is None:
                raise not_found_error(slug)
            before = self._readable(row)
            after = dataclasses.replace(
                transform(before), slug=slug, version=before.version + (1 if new_version else 0),
                created_at=before.created_at, updated_at=_later(before.updated_at), shadowed_by="")
            if admit is not None and after.enabled:
                admit(connection, after)
            connection.execute(update(user_tools).where(user_tools.c.slug == slug).values(**_columns(after)))
            if new_version:
                _add_version(connection, after, changed_by, change)
            else:
                _notify(connection, slug)
        return before, after

    def delete(self, slug: str) -> UserToolRecord:
        """Remove the tool and its versions; the tool as it was (as much of it as can be read, for a damaged
        row). ResourceNotFoundError for an unknown slug."""
        with self.store.begin() as connection:
            _lock_slug(connection, slug)
            row = _row(connection, slug)
            if row is None:
                raise not_found_error(slug)
            connection.execute(delete(tool_versions).where(tool_versions.c.slug == slug))
            connection.execute(delete(user_tools).where(user_tools.c.slug == slug))
            _notify(connection, slug)
        return self._decoded(row) or _remains_of(row)

    def versions(self, slug: str, before: int, limit: int) -> list[UserToolVersionRecord]:
        """Up to `limit` versions older than `before` (0: from the newest), newest first. A damaged row is left
        out (and logged)."""
        with self.store.begin() as connection:
            if _row(connection, slug) is None:
                raise not_found_error(slug)
            query = select(*_VERSION_COLUMNS).where(tool_versions.c.slug == slug)
            if before:
                query = query.where(tool_versions.c.version < before)
            rows = connection.execute(query.order_by(tool_versions.c.version.desc()).limit(limit)).mappings().all()
        return [record for record in map(self._decoded_version, rows) if record is not None]

    def version(self, slug: str, version: int) -> UserToolVersionRecord:
        """One version; ResourceNotFoundError for an unknown slug, a version never made, or one so old it was
        pruned."""
        with self.store.begin() as connection:
            tool = _row(connection, slug)
            row = connection.execute(select(*_VERSION_COLUMNS).where(
                tool_versions.c.slug == slug, tool_versions.c.version == version)).mappings().first()
        if tool is None:
            raise not_found_error(slug)
        if row is None:
            latest = tool["version"]
            if isinstance(latest, int) and 1 <= version <= latest - MAX_VERSIONS_PER_TOOL:
                raise ResourceNotFoundError(
                    f"version {version} of the user tool {slug!r} is no longer kept: versions older than the last "
                    f"{MAX_VERSIONS_PER_TOOL} are not kept (it has versions {latest - MAX_VERSIONS_PER_TOOL + 1} "
                    f"to {latest}); ListUserToolVersions shows them")
            raise ResourceNotFoundError(f"the user tool {slug!r} has no version {version}; ListUserToolVersions "
                                        "shows its versions")
        record = self._decoded_version(row)
        if record is None:
            raise FailedPreconditionError(f"version {version} of the user tool {slug!r} is stored in a form this "
                                          "server cannot read (the server log says why); restore another version")
        return record

    # --- decoding -------------------------------------------------------------------------------------------

    def _readable(self, row: Any) -> UserToolRecord:
        record = self._decoded(row)
        if record is None:
            raise FailedPreconditionError(
                f"the user tool {row['slug']!r} is stored in a form this server cannot read (the server log says "
                "why); delete it (DeleteUserTool) and create it again")
        return record

    def _decoded(self, row: Any) -> UserToolRecord | None:
        try:
            return _record(row)
        except DamagedRowError as exc:
            self._report("user_tools", row, exc)
            return None

    def _decoded_version(self, row: Any) -> UserToolVersionRecord | None:
        try:
            return _version_record(row)
        except DamagedRowError as exc:
            self._report("tool_versions", row, exc)
            return None

    def _report(self, table: str, row: Any, exc: DamagedRowError) -> None:
        key = (table, str(row["slug"]), row["version"], row.get("updated_at", row.get("created_at")))
        if key not in self._reported:
            self._reported.add(key)
            logger.error("%s row of user tool %r (version %s) cannot be read, and is left out: %s", table,
                         row["slug"], row["version"], exc)


# What the reads select: the JSON columns as their text, decoded here, so that one row of bad JSON (SQLite keeps
# any text) is that row's problem, not the whole query's.
_TOOL_JSON = frozenset({"input_schema", "tags", "credentials"})
_TOOL_COLUMNS = tuple(cast(c, Text).label(c.name) if c.name in _TOOL_JSON else c for c in user_tools.c)
_VERSION_JSON = frozenset({"input_schema", "details"})
_VERSION_COLUMNS = tuple(cast(c, Text).label(c.name) if c.name in _VERSION_JSON else c for c in tool_versions.c)


def _row(connection: Connection, slug: str) -> Any:
    return connection.execute(select(*_TOOL_COLUMNS).where(user_tools.c.slug == slug)).mappings().first()


def _lock_slug(connection: Connection, slug: str) -> None:
    if connection.dialect.name == "postgresql":
        # Held to the end of the transaction: changes of one slug on several replicas take turns.
        connection.execute(sql_text("SELECT pg_advisory_xact_lock(hashtext(:key))"),
                           {"key": f"{CHANGES_CHANNEL}:{slug}"})


def _lock_admissions(connection: Connection) -> None:
    # Always after _lock_slug: one order of taking the two, so that no two transactions wait on each other.
    if connection.dialect.name == "postgresql":
        connection.execute(sql_text("SELECT pg_advisory_xact_lock(:id)"), {"id": ADMISSION_LOCK_ID})


def _notify(connection: Connection, slug: str) -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(sql_text("SELECT pg_notify(:channel, :slug)"), {"channel": CHANGES_CHANNEL, "slug": slug})


def _add_version(connection: Connection, tool: UserToolRecord, changed_by: str, change: str) -> None:
    details = {"name": tool.name, "description": tool.description, "category": tool.category,
               "timeout_seconds": tool.timeout_seconds, "tags": list(tool.tags), "credentials": list(tool.credentials)}
    connection.execute(insert(tool_versions).values(
        slug=tool.slug, version=tool.version, script=tool.script, system_prompt=tool.system_prompt,
        input_schema=tool.input_schema, changed_by=changed_by, change=change, created_at=tool.updated_at,
        details=details))
    # An agent looping on updates must not fill the store: the oldest versions go in the same transaction.
    connection.execute(delete(tool_versions).where(
        tool_versions.c.slug == tool.slug, tool_versions.c.version <= tool.version - MAX_VERSIONS_PER_TOOL))
    _notify(connection, tool.slug)


def _later(previous: datetime) -> datetime:
    """Now, or just after `previous` when the clock has not moved past it (a coarse clock, or another replica's
    clock ahead of this one's): a change must change the update time that refreshes compare."""
    now = datetime.now(UTC)
    return now if now > previous else previous + timedelta(microseconds=1)


def _unchanged(held: UserToolRecord | None, version: Any, enabled: Any, updated_at: Any) -> bool:
    return (held is not None and held.version == version and held.enabled == bool(enabled)
            and isinstance(updated_at, datetime) and held.updated_at == _aware(updated_at))


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
        slug=_text(row, "slug"), name=_text(row, "name"), description=_text(row, "description"),
        category=_text(row, "category"), system_prompt=_text(row, "system_prompt"),
        input_schema=_json_object(row, "input_schema"), script=_text(row, "script"), enabled=bool(row["enabled"]),
        timeout_seconds=_timeout(row["timeout_seconds"]), tags=_names(_json(row, "tags"), "tags"),
        credentials=_names(_json(row, "credentials"), "credentials"), version=_version(row),
        created_at=_time(row, "created_at"), updated_at=_time(row, "updated_at"))


def _version_record(row: Any) -> UserToolVersionRecord:
    return UserToolVersionRecord(
        slug=_text(row, "slug"), version=_version(row), script=_text(row, "script"),
        system_prompt=_text(row, "system_prompt"), input_schema=_json_object(row, "input_schema"),
        changed_by=_text(row, "changed_by"), created_at=_time(row, "created_at"), change=_text(row, "change"),
        details=_details(_json(row, "details")))


def _details(value: Any) -> VersionDetails | None:
    if value is None:  # a version stored before migration 7
        return None
    if not isinstance(value, dict):
        raise DamagedRowError("details is not a JSON object")
    try:
        fields = {name: value[name] for name in ("name", "description", "category")}
        timeout, tags, credentials = value["timeout_seconds"], value["tags"], value["credentials"]
    except KeyError as exc:
        raise DamagedRowError(f"details has no {exc}") from None
    if not all(isinstance(text, str) for text in fields.values()):
        raise DamagedRowError("details holds a name, description or category that is not text")
    return VersionDetails(timeout_seconds=_timeout(timeout), tags=_names(tags, "tags"),
                          credentials=_names(credentials, "credentials"), **fields)


def _remains_of(row: Any) -> UserToolRecord:
    """What a damaged row still says (its slug, and its version when readable): what a delete returns for it."""
    version = row["version"] if isinstance(row["version"], int) else 0
    epoch = datetime.fromtimestamp(0, UTC)
    return UserToolRecord(slug=str(row["slug"]), name="", description="", category="", system_prompt="",
                          input_schema={}, script="", enabled=False, timeout_seconds=None, tags=(), credentials=(),
                          version=version, created_at=epoch, updated_at=epoch)


def _text(row: Any, column: str) -> str:
    value = row[column]
    if not isinstance(value, str):
        raise DamagedRowError(f"{column} is not text")
    return value


def _json(row: Any, column: str) -> Any:
    text = row[column]
    if text is None:
        return None
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError):
        raise DamagedRowError(f"{column} is not JSON") from None


def _json_object(row: Any, column: str) -> dict[str, Any]:
    value = _json(row, column)
    if not isinstance(value, dict):
        raise DamagedRowError(f"{column} is not a JSON object")
    return value


def _names(value: Any, column: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise DamagedRowError(f"{column} is not a JSON list of text")
    return tuple(value)


def _timeout(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise DamagedRowError("timeout_seconds is not a positive number")
    return float(value)


def _version(row: Any) -> int:
    value = row["version"]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DamagedRowError("version is not a positive integer")
    return value


def _time(row: Any, column: str) -> datetime:
    value = row[column]
    if not isinstance(value, datetime):
        raise DamagedRowError(f"{column} is not a time")
    return _aware(value)


def _aware(moment: datetime) -> datetime:
    # SQLite keeps no time zone: the times written were UTC.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
