"""The store's schema versions and the migrations between them, run by the Store when it opens.

The version lives in the database, in the `schema_version` table: one row per version reached (when, by which
toolhost, how), the highest being the database's. Opening brings the database to LATEST_VERSION:

- a database without toolhost's tables gets the latest schema at once (schema.metadata), recorded as such;
- a database with toolhost's tables but no `schema_version` was made before versions existed: it is version 1
  (migration 1 adds any version-1 table an older release had not created yet);
- then each missing migration runs in order, each in its own transaction with its version row, so that a
  failure leaves the database at the last version completed and the next start resumes from there;
- a version newer than LATEST_VERSION stops everything (StoreSchemaError): this toolhost would misread a
  schema it does not know, and never downgrades one.

Replicas starting together take turns. On PostgreSQL every transaction here first takes a transaction-scoped
advisory lock (the key the pre-version releases took to create their tables, so that those are excluded too)
and reads the version under it: the first replica migrates, the others wait, then find the work done. SQLite's
transactions start with BEGIN IMMEDIATE (engine.py), which serialises them in the same way. Both databases run
DDL inside a transaction, so a migration is applied whole or not at all.

To change the schema: change schema.py, and append to MIGRATIONS a Migration that turns the previous version
into it; tests/test_store_migrations.py checks that a migrated database and a new one end up alike.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Connection,
    DateTime,
    Engine,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    SmallInteger,
    String,
    Table,
    Text,
    delete,
    func,
    insert,
    inspect,
    select,
)
from sqlalchemy import text as sql_text
from sqlalchemy.schema import CreateColumn, CreateIndex, CreateTable

from .. import __version__
from . import schema, schema_v1
from .errors import StoreSchemaError

logger = logging.getLogger("toolhost.store")

# Any constant works as long as every replica, of every release, uses the same one (pg_advisory_xact_lock takes a
# bigint); the releases before versions took this one around their CREATE TABLEs.
SCHEMA_LOCK_ID = 0x746F6F6C686F7374  # "toolhost"

# The migrator's own bookkeeping, outside schema.metadata: its shape must never depend on the version it records.
schema_version = Table(
    "schema_version", MetaData(),
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("applied_at", DateTime(timezone=True), nullable=False),
    Column("toolhost_version", String(64), nullable=False),
    Column("description", String(256), nullable=False),
)


@dataclass(frozen=True, slots=True)
class Migration:
    """What turns the schema of version `version - 1` into `version`; `apply` runs in the caller's transaction."""

    version: int
    description: str
    apply: Callable[[Connection], None]


def _create_version_1_tables(connection: Connection) -> None:
    # Before versions, the store created the tables missing at each start, so a database last opened by an older
    # toolhost lacks the tables that came after it: they are created now.
    _create_tables(connection, schema_v1.metadata)


# The column as migration 2 adds it, frozen here: a later change to the column in schema.py must not change
# what this migration did.
_argument_key_count = Column("argument_key_count", Integer, nullable=False, server_default=sql_text("0"))
_audit_records_v2 = Table("audit_records", MetaData(), _argument_key_count)


def _add_argument_key_count(connection: Connection) -> None:
    # Old rows get 0: nothing counted their keys. PostgreSQL (11+) adds a column with a constant default without
    # rewriting the table, and the default lets replicas of the previous release, still running during a rolling
    # update, go on inserting without the column.
    _add_column(connection, _audit_records_v2, _argument_key_count)


# The todos table as migration 3 creates it, frozen here for the same reason, with schema.py's naming convention.
_version_3_tables = MetaData(naming_convention=schema_v1.metadata.naming_convention)
Table(
    "todos", _version_3_tables,
    Column("owner", String(256), nullable=False),
    Column("session", String(128), nullable=False),
    Column("id", Integer, nullable=False, autoincrement=False),
    Column("content", Text, nullable=False),
    Column("status", String(16), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("owner", "session", "id"),
)


def _create_todos(connection: Connection) -> None:
    # A new table: replicas of the previous release, still running during a rolling update, never touch it.
    _create_tables(connection, _version_3_tables)


# The user tools' tables as migration 4 creates them, and the conflicts it starts with, frozen here.
_version_4_tables = MetaData(naming_convention=schema_v1.metadata.naming_convention)
Table(
    "user_tools", _version_4_tables,
    Column("slug", String(64), primary_key=True),
    Column("name", String(256), nullable=False),
    Column("description", Text, nullable=False),
    Column("category", String(100), nullable=False),
    Column("system_prompt", Text, nullable=False),
    Column("input_schema", JSON, nullable=False),
    Column("script", Text, nullable=False),
    Column("enabled", Boolean, nullable=False),
    Column("timeout_seconds", Float, nullable=True),
    Column("tags", JSON, nullable=False),
    Column("credentials", JSON, nullable=False),
    Column("version", Integer, nullable=False),
    Column("created_by", String(256), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)
Table(
    "tool_versions", _version_4_tables,
    Column("slug", String(64), nullable=False),
    Column("version", Integer, nullable=False, autoincrement=False),
    Column("script", Text, nullable=False),
    Column("system_prompt", Text, nullable=False),
    Column("input_schema", JSON, nullable=False),
    Column("changed_by", String(256), nullable=False),
    Column("change", String(64), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("slug", "version"),
)
_tool_conflicts_v4 = Table(
    "tool_conflicts", _version_4_tables,
    Column("tool_a", String(128), nullable=False),
    Column("tool_b", String(128), nullable=False),
    Column("type", String(16), nullable=False),
    Column("resolution_hint", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("tool_a", "tool_b"),
)
# PocketDev's seeded pairs: toolhost's file and shell tools do what the CLI providers' own tools do.
_conflicts_v4 = tuple(
    {"tool_a": tool, "tool_b": f"native:{native}", "type": "equivalent",
     "resolution_hint": f"use the CLI provider's native {native} instead of {tool}"}
    for tool, native in (("bash", "Bash"), ("read", "Read"), ("edit", "Edit"), ("glob", "Glob"), ("grep", "Grep")))


def _create_user_tools(connection: Connection) -> None:
    # New tables only: replicas of the previous release, still running during a rolling update, never touch them.
    _create_tables(connection, _version_4_tables)
    now = datetime.now(UTC)
    connection.execute(insert(_tool_conflicts_v4), [{**row, "created_at": now, "updated_at": now}
                                                     for row in _conflicts_v4])


# The memory tools' tables as migration 5 creates them, frozen here.
_version_5_tables = MetaData(naming_convention=schema_v1.metadata.naming_convention)
Table(
    "memory_structures", _version_5_tables,
    Column("name", String(63), primary_key=True),
    Column("description", Text, nullable=False),
    Column("record_schema", JSON, nullable=False),
    Column("created_by", String(256), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)
Table(
    "memory_records", _version_5_tables,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("structure", String(63), ForeignKey("memory_structures.name"), nullable=False),
    Column("data", JSON, nullable=False),
    Column("created_by", String(256), nullable=False),
    Column("updated_by", String(256), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Index("ix_memory_records_structure", "structure"),
)
Table(
    "memory_query_role", _version_5_tables,
    Column("role", String(63), primary_key=True),
    Column("password", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)


def _create_memory(connection: Connection) -> None:
    # New tables only: replicas of the previous release, still running during a rolling update, never touch them.
    _create_tables(connection, _version_5_tables)

# The todos table as migration 6 empties it, frozen here (only the name matters).
_todos_v6 = Table("todos", MetaData(), Column("owner", String(256), nullable=False))


def _remove_todos_of_bare_names(connection: Connection) -> None:
    # Until now a list was kept under the caller's bare name, which a token, a client certificate and an auth-file
    # entry named "anonymous" could share; from now on under `method:name`. Which method wrote a row is not
    # recorded, so no row can be given to its caller, and one kept under a name such as "token:alice" would reach
    # the token alice: every row goes.
    removed = connection.execute(delete(_todos_v6)).rowcount
    logger.info("migration 6 removed %d todo items kept under a bare caller name", removed)


# The column as migration 7 adds it, frozen here.
_version_details = Column("details", JSON, nullable=True)
_tool_versions_v7 = Table("tool_versions", MetaData(), _version_details)


def _add_version_details(connection: Connection) -> None:
    # NULL for the versions stored so far: they kept only the script, system prompt and schema, and a restore of
    # one brings back only those. Nullable, so that replicas of the previous release, still running during a
    # rolling update, go on inserting versions without it.
    _add_column(connection, _tool_versions_v7, _version_details)


# The asset inventory's tables as migration 8 creates them, frozen here.
def _sorted_key_v8(length: int) -> String:
    return String(length).with_variant(String(length, collation="C"), "postgresql")


_version_8_tables = MetaData(naming_convention=schema_v1.metadata.naming_convention)
Table(
    "assets", _version_8_tables,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(128), nullable=False),
    Column("name_key", _sorted_key_v8(128), nullable=False),
    Column("hostname", String(253), nullable=False),
    Column("hostname_key", _sorted_key_v8(253), nullable=False),
    Column("os", Text, nullable=False),
    Column("os_key", Text, nullable=False),
    Column("platform", Text, nullable=False),
    Column("platform_key", Text, nullable=False),
    Column("site", Text, nullable=False),
    Column("site_key", Text, nullable=False),
    Column("winrm_port", Integer, nullable=False),
    Column("winrm_ssl", Boolean, nullable=False),
    Column("winrm_domain", Text, nullable=False),
    Column("winrm_credential", String(64), nullable=False),
    Column("winrm_authentication", String(16), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Index("ix_assets_name_key", "name_key", unique=True),
    Index("ix_assets_hostname_key", "hostname_key"),
    Index("ix_assets_platform_key", "platform_key"),
    Index("ix_assets_site_key", "site_key"),
)
Table(
    "asset_addresses", _version_8_tables,
    Column("asset_id", Integer, ForeignKey("assets.id"), nullable=False),
    Column("position", SmallInteger, nullable=False, autoincrement=False),
    Column("address", String(64), nullable=False),
    PrimaryKeyConstraint("asset_id", "position"),
)
Table(
    "asset_tags", _version_8_tables,
    Column("asset_id", Integer, ForeignKey("assets.id"), nullable=False),
    Column("position", SmallInteger, nullable=False, autoincrement=False),
    Column("value", Text, nullable=False),
    Column("value_key", Text, nullable=False),
    PrimaryKeyConstraint("asset_id", "position"),
    Index("ix_asset_tags_value_key", "value_key", "asset_id", unique=True),
)


def _create_assets(connection: Connection) -> None:
    # New tables only: replicas of the previous release, still running during a rolling update, never touch them.
    _create_tables(connection, _version_8_tables)


# The column as migration 9 adds it, frozen here.
_client_trace_id = Column("client_trace_id", String(128), nullable=False, server_default=sql_text("''"))
_audit_records_v9 = Table("audit_records", MetaData(), _client_trace_id)


def _add_client_trace_id(connection: Connection) -> None:
    # Old rows get "": no caller sent one. As in migration 2, the constant default adds the column without a
    # rewrite and lets replicas of the previous release, still running during a rolling update, insert without it.
    _add_column(connection, _audit_records_v9, _client_trace_id)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "the credentials, audit_records and logs tables (toolhost before schema versions)",
              _create_version_1_tables),
    Migration(2, "audit_records.argument_key_count (0 for older rows)", _add_argument_key_count),
    Migration(3, "the todos table (the todo tool's lists)", _create_todos),
    Migration(4, "the user_tools, tool_versions and tool_conflicts tables (user tools and tool conflicts)",
              _create_user_tools),
    Migration(5, "the memory_structures, memory_records and memory_query_role tables (the memory tools)",
              _create_memory),
    Migration(6, "todos.owner is the caller's auth method and name (the lists kept under a bare name removed)",
              _remove_todos_of_bare_names),
    Migration(7, "tool_versions.details: the rest of a user tool's record at each version (NULL for older rows)",
              _add_version_details),
    Migration(8, "the assets, asset_addresses and asset_tags tables (the asset inventory)", _create_assets),
    Migration(9, "audit_records.client_trace_id: the caller's own correlation id ('' for older rows)",
              _add_client_trace_id),
)
LATEST_VERSION = MIGRATIONS[-1].version


def migrate(engine: Engine, database: str) -> None:
    """Bring the database of `engine` to LATEST_VERSION, one transaction per step.

    `database` names it in messages. StoreSchemaError when its version is newer than this code knows; the
    engine's own errors (SQLAlchemy's) are left to the caller to translate.
    """
    while True:
        with engine.begin() as connection:
            _take_schema_lock(connection)
            version = current_version(connection)
            if version > LATEST_VERSION:
                raise _newer_schema_error(connection, version, database)
            if version == LATEST_VERSION:
                return
            if version == 0 and not _has_toolhost_tables(connection):
                _create_latest_schema(connection)
                done = f"created at version {LATEST_VERSION}"
            else:
                migration = MIGRATIONS[version]  # the one that leads from `version` to version + 1
                migration.apply(connection)
                _record_version(connection, migration.version, migration.description)
                done = f"migrated to version {migration.version}: {migration.description}"
        # Once committed: a step that failed to commit is not reported done.
        logger.info("the store's schema in %s: %s", database, done)


def _take_schema_lock(connection: Connection) -> None:
    if connection.dialect.name == "postgresql":
        # Held until this transaction ends: another replica's migration waits here, then reads the new version.
        connection.execute(sql_text("SELECT pg_advisory_xact_lock(:id)"), {"id": SCHEMA_LOCK_ID})


def current_version(connection: Connection) -> int:
    """The database's schema version: 0 when it has no schema_version rows (new, or made before versions)."""
    if not inspect(connection).has_table(schema_version.name):
        return 0
    return int(connection.execute(select(func.max(schema_version.c.version))).scalar() or 0)


def _has_toolhost_tables(connection: Connection) -> bool:
    return not schema_v1.TABLE_NAMES.isdisjoint(inspect(connection).get_table_names())


def _create_latest_schema(connection: Connection) -> None:
    _create_tables(connection, schema.metadata)
    now = datetime.now(UTC)
    for table_name, rows in schema.SEED_ROWS.items():
        connection.execute(insert(schema.metadata.tables[table_name]),
                           [{**row, "created_at": now, "updated_at": now} for row in rows])
    _record_version(connection, LATEST_VERSION, "created at this version")


def _record_version(connection: Connection, version: int, description: str) -> None:
    _create_tables(connection, schema_version.metadata)
    connection.execute(schema_version.insert().values(
        version=version, applied_at=datetime.now(UTC), toolhost_version=__version__, description=description))


def _create_tables(connection: Connection, metadata: MetaData) -> None:
    for table in metadata.sorted_tables:
        connection.execute(CreateTable(table, if_not_exists=True))
        for index in table.indexes:
            connection.execute(CreateIndex(index, if_not_exists=True))


def _add_column(connection: Connection, table: Table, column: Column[Any]) -> None:
    # SQLAlchemy Core has no ALTER TABLE construct; the column's definition is compiled by the dialect, as
    # CREATE TABLE would write it, so the statement is the same on SQLite and PostgreSQL but for their types.
    preparer = connection.dialect.identifier_preparer
    definition = CreateColumn(column).compile(dialect=connection.dialect)
    connection.execute(sql_text(f"ALTER TABLE {preparer.format_table(table)} ADD COLUMN {definition}"))


def _newer_schema_error(connection: Connection, version: int, database: str) -> StoreSchemaError:
    migrated_by = connection.execute(
        select(schema_version.c.toolhost_version).where(schema_version.c.version == version)).scalar()
    by = f"toolhost {migrated_by}" if migrated_by else "a newer toolhost"
    return StoreSchemaError(
        f"the database {database} has schema version {version}, newer than this toolhost ({__version__}) knows "
        f"(up to {LATEST_VERSION}): {by} migrated it. Run that release or a later one against it, or set "
        "database_url (TOOLHOST_DATABASE_URL) to another database; toolhost never downgrades a schema")
