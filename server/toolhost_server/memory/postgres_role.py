"""The memory role and schema on PostgreSQL, made once by `toolhost db init-memory-role` as a user who may create
roles: a LOGIN role that may use the memory schema and read the views granted to it (nothing else of toolhost's),
whose connections are read-only, time-limited and bounded in memory (work_mem) and temporary files
(temp_file_limit, which only a superuser may set); the schema, owned by the server's user so that it
creates and drops the views; and the role's password in the memory_query_role table, which only the server's user
reads. Run again, it changes the password and repairs the grants.

The SQL gate lets a query name any schema (public.credentials), so the role's privileges are what keeps it in the
memory views: the role's own grants on tables outside the memory schema are revoked, and a reach that remains
(PUBLIC grants, tables the role owns) is refused with what to revoke. memory_query checks the same on each
connection (reach_outside_memory), so a grant made later turns it off instead of opening a table."""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime
from typing import Any

import psycopg
from sqlalchemy import URL, Connection, delete, insert
from sqlalchemy import text as sql_text

from ..store.database import Store
from ..store.engine import create_store_engine, database_errors
from ..store.schema import memory_query_role
from .table import MemoryTable
from .views import POSTGRES_SCHEMA

CONNECTION_LIMIT = 20
DEFAULT_STATEMENT_TIMEOUT = "60s"
# A query's temporary files on the database server (a DISTINCT, sort or CTE that outgrows WORK_MEM spills to
# them), in all; past it PostgreSQL ends the query. Only a superuser, or a user granted SET on the parameter, may
# set it for the role, and the role cannot change it.
TEMP_FILE_LIMIT_KB = 64 * 1024
# What a sort or hash table may hold in memory before it spills to temporary files (memory_query also sets it on
# each connection, where the role may).
WORK_MEM = "4MB"
# Relations outside the memory schema (and the catalogs, which every role reads and the SQL gate keeps queries
# out of) that the role may use in any way, directly, through PUBLIC or as their owner; at most 10 named.
_REACH = f"""
SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname)
FROM pg_catalog.pg_class AS c JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
  AND n.nspname NOT IN ('{POSTGRES_SCHEMA}', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%%'
  AND (has_table_privilege(%(role)s, c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
       OR has_any_column_privilege(%(role)s, c.oid, 'SELECT, INSERT, UPDATE, REFERENCES')
       -- An owner whose privileges were revoked may grant them back to itself.
       OR c.relowner = (SELECT r.oid FROM pg_catalog.pg_roles AS r WHERE r.rolname = %(role)s))
ORDER BY 1 LIMIT 10"""


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
            may_set_temp_file_limit = _may_set_temp_file_limit(admin, role)
            created = _create_or_reset_role(admin, role, password)
            _revoke_reach(admin, role)
            preparer = admin.dialect.identifier_preparer
            quoted_role, quoted_owner = preparer.quote(role), preparer.quote(server_user)
            admin.execute(sql_text(f"CREATE SCHEMA IF NOT EXISTS {POSTGRES_SCHEMA} AUTHORIZATION {quoted_owner}"))
            admin.execute(sql_text(f"ALTER SCHEMA {POSTGRES_SCHEMA} OWNER TO {quoted_owner}"))
            admin.execute(sql_text(f"REVOKE ALL ON SCHEMA {POSTGRES_SCHEMA} FROM PUBLIC"))
            admin.execute(sql_text(f"GRANT USAGE ON SCHEMA {POSTGRES_SCHEMA} TO {quoted_role}"))
            for setting, value in (("search_path", POSTGRES_SCHEMA), ("default_transaction_read_only", "on"),
                                   ("statement_timeout", DEFAULT_STATEMENT_TIMEOUT), ("work_mem", WORK_MEM)):
                admin.execute(sql_text(f"ALTER ROLE {quoted_role} SET {setting} = '{value}'"))
            if may_set_temp_file_limit:
                admin.execute(sql_text(f"ALTER ROLE {quoted_role} SET temp_file_limit = '{TEMP_FILE_LIMIT_KB}kB'"))
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


def temp_file_limit_kb(connection: psycopg.Connection[Any]) -> int:
    """The connection's temp_file_limit in kB (-1: none), as the role's settings made it at login."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT setting::bigint FROM pg_catalog.pg_settings WHERE name = 'temp_file_limit'")
        row = cursor.fetchone()
    return -1 if row is None else int(row[0])


def reach_outside_memory(connection: psycopg.Connection[Any], role: str) -> list[str]:
    """The relations (schema.name) outside the memory schema that `role` may use in any way; at most 10."""
    with connection.cursor() as cursor:
        cursor.execute(_REACH, {"role": role})
        return [str(name) for (name,) in cursor.fetchall()]


def _revoke_reach(admin: Connection, role: str) -> None:
    """Revoke the role's own privileges outside the memory schema; MemoryRoleError naming what it may still use."""
    quoted = admin.dialect.identifier_preparer.quote(role)
    schemas = admin.execute(sql_text(
        "SELECT nspname FROM pg_namespace WHERE nspname NOT IN (:memory, 'information_schema') "
        "AND nspname NOT LIKE 'pg\\_%'"), {"memory": POSTGRES_SCHEMA}).scalars().all()
    for schema in schemas:
        quoted_schema = admin.dialect.identifier_preparer.quote(schema)
        # Column privileges go with the table's (REVOKE on a table revokes them on each of its columns).
        admin.execute(sql_text(f"REVOKE ALL ON ALL TABLES IN SCHEMA {quoted_schema} FROM {quoted}"))
        admin.execute(sql_text(f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA {quoted_schema} FROM {quoted}"))
    driver = admin.connection.driver_connection
    assert isinstance(driver, psycopg.Connection), "the store's PostgreSQL driver is psycopg"
    reached = reach_outside_memory(driver, role)
    if reached:
        names = ", ".join(reached)
        raise MemoryRoleError(
            f"the role {role} may still use {names} outside the memory schema, through grants to PUBLIC or as their "
            f"owner, and memory_query would let a query read them: revoke those (e.g. REVOKE ALL ON TABLE "
            f"{reached[0]} FROM PUBLIC), or choose another --role if it owns them, then run this again")


def _may_set_temp_file_limit(admin: Connection, role: str) -> bool:
    """Whether this user may give the role its temp_file_limit: a superuser, or (PostgreSQL 15 and later) a user
    granted SET on the parameter. False when it may not but the role has a limit already (set by someone who
    could); MemoryRoleError, saying who may set it, when neither."""
    if admin.execute(sql_text("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")).scalar_one():
        return True
    # has_parameter_privilege is new in PostgreSQL 15: before it, only a superuser may.
    version = int(admin.execute(sql_text("SHOW server_version_num")).scalar_one())
    if version >= 150000 and admin.execute(sql_text(
            "SELECT has_parameter_privilege('temp_file_limit', 'SET')")).scalar_one():
        return True
    settings = admin.execute(sql_text(
        "SELECT s.setconfig FROM pg_db_role_setting AS s JOIN pg_roles AS r ON r.oid = s.setrole "
        "WHERE r.rolname = :role AND s.setdatabase = 0"), {"role": role}).scalar()
    limit = next((_kilobytes(item.partition("=")[2]) for item in settings or ()
                  if item.startswith("temp_file_limit=")), None)
    if limit is not None and 0 <= limit <= TEMP_FILE_LIMIT_KB:
        return False
    raise MemoryRoleError(
        f"the memory role needs a temp_file_limit (at most {TEMP_FILE_LIMIT_KB // 1024}MB), so that one query "
        f"cannot fill the database server's disk with temporary files, and only a superuser may set it: run this "
        f"as a superuser (--admin-url), or have one run GRANT SET ON PARAMETER temp_file_limit TO <this user> "
        f"(PostgreSQL 15 and later) or ALTER ROLE {role} SET temp_file_limit = '{TEMP_FILE_LIMIT_KB // 1024}MB', "
        f"then run this again")


def _kilobytes(value: str) -> int | None:
    """A temp_file_limit as ALTER ROLE stored it ('65536kB', '64MB', '1GB', '-1') in kB; None if unreadable."""
    match = re.fullmatch(r"\s*(-?\d+)\s*(kB|MB|GB|TB)?\s*", value)
    if match is None:
        return None
    return int(match[1]) * {"kB": 1, "MB": 1024, "GB": 1024 ** 2, "TB": 1024 ** 3}[match[2] or "kB"]


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
