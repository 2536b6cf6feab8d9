"""Attacks on the PostgreSQL memory role's privileges, which are what keeps memory_query in the memory views (the
SQL gate lets a query name public.credentials): `toolhost db init-memory-role` revokes an existing role's own grants
on toolhost's tables (column grants too), and refuses, naming what to revoke, a role that could still use a table
through PUBLIC or as its owner; a PUBLIC grant made after the role was set up turns memory_query off
(FAILED_PRECONDITION, without the table's name) until it is revoked. The role's temporary files and sort memory are
bounded (temp_file_limit, work_mem): a role without the bound turns memory_query off until the command is run again,
and a user who may not set temp_file_limit (not a superuser) is refused, told who may."""

from __future__ import annotations

import secrets
from pathlib import Path

import grpc
import psycopg
import pytest
from sqlalchemy import URL

from toolhost_server.memory.postgres_role import TEMP_FILE_LIMIT_KB, WORK_MEM, default_role_name
from toolhost_server.store.database import Store

from helpers.cli import Run, cli_env, toolhost
from helpers.lock_races import libpq_dsn
from helpers.memory import PEOPLE_SCHEMA, init_memory_role, memory, memory_refused
from helpers.todos import store_settings

pytestmark = pytest.mark.slow


def _as_admin(url: URL, *statements: str) -> list[tuple[object, ...]]:
    """Run statements as the cluster's superuser (the tests' server user too); the last one's rows."""
    rows: list[tuple[object, ...]] = []
    with psycopg.connect(libpq_dsn(url), autocommit=True) as admin:
        for statement in statements:
            cursor = admin.execute(statement)
            rows = cursor.fetchall() if cursor.description else []
    return rows


def _store_tables(url: URL) -> None:
    store = Store(url)
    try:
        store.open()  # creates and migrates toolhost's tables
    finally:
        store.close()


async def _init_role(url: URL, role: str) -> Run:
    return await toolhost("db", "init-memory-role", "--role", role, env=cli_env(
        TOOLHOST_DATABASE_URL=url.render_as_string(hide_password=False)))


def _role() -> str:
    return f"memory_attack_{secrets.token_hex(4)}"


async def test_an_existing_roles_grants_on_toolhosts_tables_are_revoked(postgres_url: URL):
    _store_tables(postgres_url)
    role = _role()
    _as_admin(postgres_url, f"CREATE ROLE {role} LOGIN", f"GRANT SELECT, INSERT ON credentials TO {role}",
              f"GRANT SELECT (caller) ON audit_records TO {role}", "CREATE TABLE public.elsewhere (x integer)",
              f"GRANT ALL ON public.elsewhere TO {role}")
    run = await _init_role(postgres_url, role)
    assert run.code == 0, run.err
    assert "grants repaired" in run.out
    assert _as_admin(postgres_url, f"""
        SELECT has_table_privilege('{role}', 'credentials', 'SELECT, INSERT'),
               has_any_column_privilege('{role}', 'audit_records', 'SELECT'),
               has_table_privilege('{role}', 'public.elsewhere', 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE')""") \
        == [(False, False, False)]


@pytest.mark.parametrize("grant", [
    "GRANT SELECT ON credentials TO PUBLIC",
    "GRANT SELECT (caller) ON audit_records TO PUBLIC",
    "GRANT SELECT ON memory_query_role TO PUBLIC",
])
async def test_a_role_that_public_grants_reach_is_refused_naming_what_to_revoke(postgres_url: URL, grant: str):
    _store_tables(postgres_url)
    _as_admin(postgres_url, grant)
    role = _role()
    run = await _init_role(postgres_url, role)
    assert run.code != 0, run.out
    table = grant.split(" ON ")[1].split(" TO ")[0]
    assert f"public.{table}" in run.err and "FROM PUBLIC" in run.err, run.err
    # Nothing was made: the role, its schema and its password came in one transaction.
    assert _as_admin(postgres_url, f"SELECT count(*) FROM pg_roles WHERE rolname = '{role}'") == [(0,)]
    assert _as_admin(postgres_url, "SELECT count(*) FROM memory_query_role") == [(0,)]


async def test_a_role_that_owns_a_table_outside_the_memory_is_refused(postgres_url: URL):
    _store_tables(postgres_url)
    role = _role()
    _as_admin(postgres_url, f"CREATE ROLE {role} LOGIN", "CREATE TABLE public.owned (x integer)",
              f"ALTER TABLE public.owned OWNER TO {role}")
    run = await _init_role(postgres_url, role)
    assert run.code != 0 and "public.owned" in run.err and "owner" in run.err, run.err


async def test_a_public_grant_made_later_turns_memory_query_off_until_revoked(start_server, postgres_url: URL,
                                                                              tmp_path: Path):
    server = await start_server(**store_settings(postgres_url, tmp_path))
    await memory(server.stub, "memory_structure_create", name="people", schema=PEOPLE_SCHEMA)
    await memory(server.stub, "memory_create", structure="people", data={"name": "Ada"})
    await init_memory_role(postgres_url)
    assert (await memory(server.stub, "memory_query", sql="SELECT name FROM people"))["rows"] == [["Ada"]]

    _as_admin(postgres_url, "GRANT SELECT ON credentials TO PUBLIC")
    for sql in ("SELECT name FROM people", "SELECT * FROM public.credentials"):
        refused = await memory_refused(server.stub, "memory_query", sql=sql)
        assert refused.code() == grpc.StatusCode.FAILED_PRECONDITION, refused.details()
        assert "memory_query is off" in refused.details() and "credentials" not in refused.details()

    _as_admin(postgres_url, "REVOKE SELECT ON credentials FROM PUBLIC")
    assert (await memory(server.stub, "memory_query", sql="SELECT name FROM people"))["rows"] == [["Ada"]]


def _role_settings(url: URL, role: str) -> dict[str, str]:
    rows = _as_admin(url, f"""
        SELECT s.setconfig FROM pg_db_role_setting AS s JOIN pg_roles AS r ON r.oid = s.setrole
        WHERE r.rolname = '{role}' AND s.setdatabase = 0""")
    settings = rows[0][0] if rows else []
    assert isinstance(settings, list)
    return dict(str(item).split("=", 1) for item in settings)


async def test_a_role_without_a_temp_file_limit_turns_memory_query_off_until_the_command_runs_again(
        start_server, postgres_url: URL, tmp_path: Path):
    server = await start_server(**store_settings(postgres_url, tmp_path))
    await memory(server.stub, "memory_structure_create", name="people", schema=PEOPLE_SCHEMA)
    await memory(server.stub, "memory_create", structure="people", data={"name": "Ada"})
    await init_memory_role(postgres_url)
    role = default_role_name(postgres_url)
    settings = _role_settings(postgres_url, role)
    assert settings["temp_file_limit"] == f"{TEMP_FILE_LIMIT_KB}kB" and settings["work_mem"] == WORK_MEM, settings
    assert (await memory(server.stub, "memory_query", sql="SELECT name FROM people"))["rows"] == [["Ada"]]

    # A role made before the bound existed, or one a superuser relaxed since.
    for change in (f"ALTER ROLE {role} RESET temp_file_limit", f"ALTER ROLE {role} SET temp_file_limit = '1GB'"):
        _as_admin(postgres_url, change)
        refused = await memory_refused(server.stub, "memory_query", sql="SELECT name FROM people")
        assert refused.code() == grpc.StatusCode.FAILED_PRECONDITION, refused.details()
        assert "memory_query is off" in refused.details() and "temp_file_limit" in refused.details()

    await init_memory_role(postgres_url)
    assert (await memory(server.stub, "memory_query", sql="SELECT name FROM people"))["rows"] == [["Ada"]]


async def test_a_user_who_may_not_set_temp_file_limit_is_refused_saying_who_may(postgres_url: URL):
    _store_tables(postgres_url)
    admin, password, role = f"roles_{secrets.token_hex(4)}", secrets.token_urlsafe(16), _role()
    _as_admin(postgres_url, f"CREATE ROLE {admin} LOGIN CREATEROLE PASSWORD '{password}'")
    admin_url = postgres_url.set(username=admin, password=password).render_as_string(hide_password=False)
    run = await toolhost("db", "init-memory-role", "--role", role, env=cli_env(
        TOOLHOST_DATABASE_URL=postgres_url.render_as_string(hide_password=False), TOOLHOST_DB_ADMIN_URL=admin_url))
    assert run.code != 0, run.out
    assert "temp_file_limit" in run.err and "superuser" in run.err and "GRANT SET ON PARAMETER" in run.err, run.err
    assert _as_admin(postgres_url, f"SELECT count(*) FROM pg_roles WHERE rolname = '{role}'") == [(0,)]
    assert _as_admin(postgres_url, "SELECT count(*) FROM memory_query_role") == [(0,)]
