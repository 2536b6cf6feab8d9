"""The store's tables, as SQLAlchemy Core.

Every table is defined on `metadata`; the Store creates the missing ones when it opens, so a later feature
(logs, audit, user tools, memory, assets) adds its table here and existing databases gain it on the next start.
Creating is idempotent and additive only: a change to an existing table needs a migration, which this module
does not do yet.
"""

from __future__ import annotations

from sqlalchemy import Column, DateTime, LargeBinary, MetaData, PrimaryKeyConstraint, String, Table

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
