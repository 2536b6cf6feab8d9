"""`toolhost db`: one-time database set-up that needs more rights than the server has. `init-memory-role` makes the
PostgreSQL role memory_query runs as (see memory/postgres_role.py), connected as a user who may create roles."""

from __future__ import annotations

import argparse
import os
import sys

from ..config import ConfigError, load_config
from ..store.errors import StoreError
from ._errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE

ADMIN_URL_VARIABLE = "TOOLHOST_DB_ADMIN_URL"


def add_db_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("db", help="one-time database set-up (offline, no server needed)")
    commands = parser.add_subparsers(dest="db_command", required=True, metavar="COMMAND")
    init = commands.add_parser(
        "init-memory-role", help="make the PostgreSQL role that memory_query runs as",
        description="Make (or repair, with a new password) the PostgreSQL login role that memory_query runs as: it "
                    "may read the memory views and nothing else of toolhost's, read-only, with a statement timeout, "
                    "work_mem 4MB and temp_file_limit 64MB (which only a superuser, or a user granted SET ON "
                    "PARAMETER temp_file_limit, may set: memory_query stays off for a role without it). "
                    "An existing role's grants on tables outside the memory schema are revoked; a role that could "
                    "still use one (a grant to PUBLIC, a table it owns) is refused, naming what to revoke. "
                    "Run it once per database, as a user who may create roles; the server's own database_url "
                    "(TOOLHOST_DATABASE_URL, --config) names the database and the user that will own the views. "
                    "Nothing to do on SQLite.")
    init.add_argument("--config", help="YAML file of server settings (or TOOLHOST_CONFIG)")
    init.add_argument("--admin-url", default=os.environ.get(ADMIN_URL_VARIABLE, ""),
                      help=f"the same database as a user who may create roles, e.g. postgresql://postgres@db/toolhost "
                           f"[{ADMIN_URL_VARIABLE}; default: the server's database_url]. Keep its password out of "
                           "the command line: set it in the variable, PGPASSWORD or ~/.pgpass")
    init.add_argument("--role", help="the role's name (default toolhost_memory_<database>)")
    init.set_defaults(offline_command=db_init_memory_role)


def db_init_memory_role(args: argparse.Namespace) -> int:
    # Imported here: SQLAlchemy is slow to import, and only this command needs it.
    from ..memory.postgres_role import MemoryRoleError, default_role_name, init_memory_role
    from ..store.database import Store
    from ..store.engine import parse_database_url

    try:
        config = load_config({}, config_file=args.config)
    except ConfigError as exc:
        return _fail(str(exc), EXIT_USAGE)
    if not config.database_url:
        print("the store is SQLite (no database_url): memory_query there needs no role, nothing to do")
        return EXIT_OK
    try:
        store_url = parse_database_url(config.database_url)
        admin_url = parse_database_url(args.admin_url) if args.admin_url else store_url
    except StoreError as exc:
        return _fail(str(exc), EXIT_USAGE)
    store = Store(store_url)
    try:
        print(init_memory_role(store, admin_url, args.role or default_role_name(store_url)))
        return EXIT_OK
    except MemoryRoleError as exc:
        return _fail(str(exc), EXIT_USAGE)
    except StoreError as exc:
        return _fail(str(exc), EXIT_FAILED)
    finally:
        store.close()


def _fail(message: str, status: int) -> int:
    print(f"toolhost: {message}", file=sys.stderr)
    return status
