"""The store's tables at the latest schema version, as SQLAlchemy Core.

Every table is defined on `metadata`. A new database is created from it at once; an existing one is brought to
it by the migrations in migrations.py, which the Store runs when it opens. Changing a table here therefore
needs a migration there that makes the same change (tests/test_store_migrations.py compares the two), and a
new table needs one that creates it.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    SmallInteger,
    String,
    Table,
    Text,
    text,
)

# Constraint names fixed by convention, so that a later migration can name them on SQLite and PostgreSQL alike.
metadata = MetaData(naming_convention={
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
})

# One row per key of a credential; `value` is the ValueCipher's output, bound to (name, key).
credentials = Table(
    "credentials", metadata,
    Column("name", String(64), nullable=False),
    Column("key", String(64), nullable=False),
    Column("value", LargeBinary, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("name", "key"),
)

# One row per call (see toolhost_server.audit): who called which tool, how it ended; argument keys, not values.
audit_records = Table(
    "audit_records", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("time", DateTime(timezone=True), nullable=False),
    Column("caller", String(256), nullable=False),
    Column("auth_method", String(32), nullable=False),
    Column("tool", String(256), nullable=False),
    Column("call_id", String(128), nullable=False),
    Column("trace_id", String(32), nullable=False),
    Column("duration_ms", Float, nullable=False),
    Column("outcome", String(64), nullable=False),
    Column("argument_keys", JSON, nullable=False),
    # How many keys the call had: argument_keys holds at most 64 of them. The server-side default (migration 2)
    # gives rows from before the column 0, and lets a replica of the previous release still insert.
    Column("argument_key_count", Integer, nullable=False, server_default=text("0")),
    # The caller's own correlation id (the REST API's non-W3C trace_id), "" for none. Its server-side default
    # (migration 9) gives older rows "", and lets a replica of the previous release still insert.
    Column("client_trace_id", String(128), nullable=False, server_default=text("''")),
    Index("ix_audit_records_time", "time"),
    Index("ix_audit_records_call_id", "call_id"),
)

# Log records (see toolhost_server.logs): the server's own when `log_database` is on, and any other writer's.
# `instance` names the process that wrote a row, so a server can tell its own records (which its memory ring
# also holds) from other replicas'. `level_number` (0 DEBUG .. 4 CRITICAL) lets a minimum level be an index range.
logs = Table(
    "logs", metadata,
    # SQLite only auto-increments an INTEGER primary key; elsewhere a log table outgrows 32 bits.
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("time", DateTime(timezone=True), nullable=False),
    Column("level", String(16), nullable=False),
    Column("level_number", SmallInteger, nullable=False),
    Column("logger", String(256), nullable=False),
    Column("message", Text, nullable=False),
    Column("trace_id", String(32), nullable=False),
    Column("span_id", String(16), nullable=False),
    Column("instance", String(128), nullable=False),
    Column("fields", JSON, nullable=False),
    Index("ix_logs_time", "time"),
    Index("ix_logs_trace_id", "trace_id"),
)

# The todo tool's lists (toolhost_server.tools.agent_tools): one row per item, kept per caller identity (`owner`,
# the authenticated caller's name) and `session` (a name the agent chose). `id` numbers the items of one list.
todos = Table(
    "todos", metadata,
    Column("owner", String(256), nullable=False),
    Column("session", String(128), nullable=False),
    Column("id", Integer, nullable=False, autoincrement=False),
    Column("content", Text, nullable=False),
    Column("status", String(16), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("owner", "session", "id"),
)

# User tools (toolhost_server.user_tools): tools made at run time, PocketDev's `pocket_tools`. `slug` is the
# tool's name in the registry; `version` the latest row of tool_versions; `created_by` the caller who made it.
# `tags` and `credentials` are JSON lists of names.
user_tools = Table(
    "user_tools", metadata,
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

# One row per change of a user tool: its editable record at that version, who made the change and what it was
# ("create", "update", "restore of version N"). `details` holds the fields besides script, system prompt and
# schema (name, description, category, timeout_seconds, tags, credentials) as a JSON object; NULL in rows written
# before migration 7. Only the latest versions of each tool are kept (user_tools.table); removed with the tool.
tool_versions = Table(
    "tool_versions", metadata,
    Column("slug", String(64), nullable=False),
    Column("version", Integer, nullable=False, autoincrement=False),
    Column("script", Text, nullable=False),
    Column("system_prompt", Text, nullable=False),
    Column("input_schema", JSON, nullable=False),
    Column("changed_by", String(256), nullable=False),
    Column("change", String(64), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("details", JSON, nullable=True),
    PrimaryKeyConstraint("slug", "version"),
)

# Conflicts between two tools (PocketDev's tool_conflicts): `type` is "equivalent" or "incompatible". The pair is
# unordered and stored with the smaller name first, so that it has one row; `native:Name` is a CLI provider's own
# tool. A new database starts with SEED_ROWS' pairs.
tool_conflicts = Table(
    "tool_conflicts", metadata,
    Column("tool_a", String(128), nullable=False),
    Column("tool_b", String(128), nullable=False),
    Column("type", String(16), nullable=False),
    Column("resolution_hint", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("tool_a", "tool_b"),
)

# Rows a new database starts with, by table name (migrations.py inserts them after creating the tables; the
# migration that created each table inserted its own frozen copy). The times are set when inserted.
SEED_ROWS: dict[str, tuple[dict[str, str], ...]] = {
    "tool_conflicts": tuple(
        {"tool_a": tool, "tool_b": f"native:{native}", "type": "equivalent",
         "resolution_hint": f"use the CLI provider's native {native} instead of {tool}"}
        for tool, native in (("bash", "Bash"), ("read", "Read"), ("edit", "Edit"), ("glob", "Glob"),
                             ("grep", "Grep"))),
}

# The memory tools' structures (toolhost_server.memory): a name (also its view's, for memory_query), what it is
# for, and the JSON Schema each of its records must satisfy. Memory is shared by every caller allowed the tools.
memory_structures = Table(
    "memory_structures", metadata,
    Column("name", String(63), primary_key=True),
    Column("description", Text, nullable=False),
    Column("record_schema", JSON, nullable=False),
    Column("created_by", String(256), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

# One row per record of a structure; `data` satisfies the structure's record_schema. Relationships between records
# are ids inside `data` (PocketDev's design), so the table has no link but to its structure.
memory_records = Table(
    "memory_records", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("structure", String(63), ForeignKey("memory_structures.name"), nullable=False),
    Column("data", JSON, nullable=False),
    Column("created_by", String(256), nullable=False),
    Column("updated_by", String(256), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Index("ix_memory_records_structure", "structure"),
)

# PostgreSQL only: the login role memory_query runs as, made by `toolhost db init-memory-role`, and its password.
# Only the server's own user reads this table; the role itself may read nothing but the memory views.
memory_query_role = Table(
    "memory_query_role", metadata,
    Column("role", String(63), primary_key=True),
    Column("password", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)


def _sorted_key(length: int) -> String:
    # PostgreSQL sorts these bytewise ("C"), as SQLite does, so that pages of assets come in one order on both.
    return String(length).with_variant(String(length, collation="C"), "postgresql")


# The asset inventory (toolhost_server.assets): one row per machine. Each `*_key` column holds its text
# lower-cased by Python, which every filter compares with a lower-cased value, so that "regardless of case" means
# the same on SQLite (whose lower() knows only ASCII) and PostgreSQL; the other columns keep the case for display.
# `hostname` "" means the name. No secret: `winrm_credential` names a credential of the server's credential sources.
assets = Table(
    "assets", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(128), nullable=False),
    Column("name_key", _sorted_key(128), nullable=False),
    Column("hostname", String(253), nullable=False),
    Column("hostname_key", _sorted_key(253), nullable=False),
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

# An asset's IP addresses, in the order they are tried (`position`).
asset_addresses = Table(
    "asset_addresses", metadata,
    Column("asset_id", Integer, ForeignKey("assets.id"), nullable=False),
    Column("position", SmallInteger, nullable=False, autoincrement=False),
    Column("address", String(64), nullable=False),
    PrimaryKeyConstraint("asset_id", "position"),
)

# An asset's tags, in the order given; unique per asset regardless of case. The index on (value_key, asset_id)
# makes the `tag` filter an indexed join on both databases.
asset_tags = Table(
    "asset_tags", metadata,
    Column("asset_id", Integer, ForeignKey("assets.id"), nullable=False),
    Column("position", SmallInteger, nullable=False, autoincrement=False),
    Column("value", Text, nullable=False),
    Column("value_key", Text, nullable=False),
    PrimaryKeyConstraint("asset_id", "position"),
    Index("ix_asset_tags_value_key", "value_key", "asset_id", unique=True),
)
