"""The store's schema at version 1, frozen: the tables toolhost created before its schema had versions.

Never edit these definitions: migration 1 creates them in a database made by an older toolhost (which may lack
a table that came later), and every later migration starts from them. Changes go to schema.py, with a migration
in migrations.py.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    SmallInteger,
    String,
    Table,
    Text,
)

metadata = MetaData(naming_convention={
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
})

Table(
    "credentials", metadata,
    Column("name", String(64), nullable=False),
    Column("key", String(64), nullable=False),
    Column("value", LargeBinary, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("name", "key"),
)

Table(
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
    Index("ix_audit_records_time", "time"),
    Index("ix_audit_records_call_id", "call_id"),
)

Table(
    "logs", metadata,
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

TABLE_NAMES = frozenset(metadata.tables)
