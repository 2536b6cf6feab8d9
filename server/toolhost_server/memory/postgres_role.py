"""The memory role and schema on PostgreSQL, made once by `toolhost db init-memory-role` as a user who may create
roles: a LOGIN role that may use the memory schema and read the views granted to it (nothing else of toolhost's),
whose connections are read-only and time-limited by default; the schema, owned by the server's user so that it
creates and drops the views; and the role's password in the memory_query_role table, which only the server's user
reads. Run again, it changes the password and repairs the grants."""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime

from sqlalchemy import URL, Connection, delete, insert
from sqlalchemy import text as sql_text

from ..store.database import Store
from ..store.engine import create_store_engine, database_errors
from ..store.schema import memory_query_role
from .table import MemoryTable
from .views import POSTGRES_SCHEMA

CONNECTION_LIMIT = 20
DEFAULT_STATEMENT_TIMEOUT = "60s"


class MemoryRoleError(Exception):
    """The role cannot be made as asked; the message says what to change."""


def default_role_name(url: URL) -> str:
    """toolhost_memory_<database>: a role per database, since roles belong to the whole cluster."""
    database = re.sub(r"[^a-z0-9_]", "_", (url.database or "toolhost").lower())
    return f"toolhost_memory_{database}"[:63]


def init_memory_role(store: Store, admin_url: URL, role: str) -> str:
    """Make (or repair) the memory role and schema for the store's database; what was done, for a person."""
    if store.dialect != "postgresql":
        raise MemoryRoleError("the store is SQLite: memory_query there needs no role, nothing to do")
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", role):
        raise MemoryRoleError(f"{role!r} cannot name the role: use 1 to 63 lower-case letters, digits and _")
    with store.begin() as connection:  # also creates and migrates the store's tables, owned by the server's user
        server_user = str(connection.execute(sql_text("SELECT current_user")).scalar_one())
    if server_user == role:
        raise MemoryRoleError("the memory role must not be the server's own user: choose another --role")
    password = secrets.token_urlsafe(32)
    engine = create_store_engine(admin_url)
    try:
        with database_errors(admin_url), engine.begin() as admin:
            created = _create_or_reset_role(admin, role, password)
            preparer = admin.dialect.identifier_preparer
            quoted_role, quoted_owner = preparer.quote(role), preparer.quote(server_user)
            admin.execute(sql_text(f"CREATE SCHEMA IF NOT EXISTS {POSTGRES_SCHEMA} AUTHORIZATION {quoted_owner}"))
            admin.execute(sql_text(f"ALTER SCHEMA {POSTGRES_SCHEMA} OWNER TO {quoted_owner}"))
            admin.execute(sql_text(f"REVOKE ALL ON SCHEMA {POSTGRES_SCHEMA} FROM PUBLIC"))
            admin.execute(sql_text(f"GRANT USAGE ON SCHEMA {POSTGRES_SCHEMA} TO {quoted_role}"))
            for setting, value in (("search_path", POSTGRES_SCHEMA), ("default_transaction_read_only", "on"),
                                   ("statement_timeout", DEFAULT_STATEMENT_TIMEOUT)):
                admin.execute(sql_text(f"ALTER ROLE {quoted_role} SET {setting} = '{value}'"))
    finally:
        engine.dispose()
    with store.begin() as connection:
        connection.execute(delete(memory_query_role))
        connection.execute(insert(memory_query_role).values(role=role, password=password,
                                                            created_at=datetime.now(UTC)))
    MemoryTable(store).sync_postgres_views()
    how = "created" if created else "already existed; its password was changed and its grants repaired"
    return (f"the memory role {role} {how}; the schema {POSTGRES_SCHEMA} belongs to {server_user}, and memory_query "
            "runs as the role from now on")


def _create_or_reset_role(admin: Connection, role: str, password: str) -> bool:
    quoted = admin.dialect.identifier_preparer.quote(role)
    existing = admin.execute(sql_text(
        "SELECT rolsuper OR rolcreaterole OR rolcreatedb OR rolreplication OR rolbypassrls AS powerful, "
        "EXISTS (SELECT 1 FROM pg_auth_members WHERE member = pg_roles.oid) AS member "
        "FROM pg_roles WHERE rolname = :role"), {"role": role}).first()
    if existing is not None and (existing.powerful or existing.member):
        raise MemoryRoleError(f"the role {role} exists and may do more than read (an attribute, or membership in "
                              "another role): choose another --role, or drop that role first")
    # The password is ours (URL-safe base64), so it is quoted as it stands: DDL takes no bound parameters.
    attributes = f"LOGIN NOINHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS " \
                 f"CONNECTION LIMIT {CONNECTION_LIMIT} PASSWORD '{password}'"
    admin.execute(sql_text(f"{'ALTER' if existing is not None else 'CREATE'} ROLE {quoted} {attributes}"))
    return existing is None
