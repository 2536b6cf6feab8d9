"""`toolhost credentials`: set, list and delete credentials in the store's database, and make a store key.

These work on the database directly (no server needed), configured like the server: TOOLHOST_* variables and
--config. A value is read from stdin or a hidden prompt, never from the command line, which every user of
the machine can see (`ps`); nothing ever prints a value.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import ConfigError, load_config
from ..credentials.names import InvalidCredentialError, check_credential_key, check_credential_name
from ..store.errors import StoreError
from ..store.keys import generate_store_key_text, require_store_key, write_store_key_file
from ._errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from ._output import format_table, plural, terminal_width

if TYPE_CHECKING:
    from ..store.credential_table import CredentialTable


def add_credentials_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "credentials", help="manage credentials in the store's database (offline, no server needed)",
        description="Manage the credentials kept encrypted in the store's database, configured like the server "
                    "(TOOLHOST_DATABASE_URL, TOOLHOST_STORE_KEY or TOOLHOST_STORE_KEY_FILE, --config).")
    store = argparse.ArgumentParser(add_help=False)
    store.add_argument("--config", help="YAML file of server settings (or TOOLHOST_CONFIG)")
    store.add_argument("--data-dir", help="the server's data directory, which holds the default SQLite database "
                                          "[TOOLHOST_DATA_DIR]")
    store.add_argument("--store-key-file", help="file holding the store key [TOOLHOST_STORE_KEY_FILE]")
    commands = parser.add_subparsers(dest="credentials_command", required=True, metavar="COMMAND")

    set_parser = commands.add_parser(
        "set", parents=[store], help="store one key of a credential (the value comes from stdin or a prompt)",
        description="Store one key of a credential. The value is read from stdin (one trailing newline is "
                    "dropped), or asked for without echo on a terminal; never give it on the command line.")
    set_parser.add_argument("name", help="the credential's name, e.g. winrm")
    set_parser.add_argument("key", help="the key, e.g. password")
    set_parser.set_defaults(offline_command=credentials_set)

    list_parser = commands.add_parser("list", parents=[store], help="list stored names and keys (never values)")
    list_parser.add_argument("--check", action="store_true",
                             help="also decrypt each credential with the configured key and report failures")
    list_parser.set_defaults(offline_command=credentials_list)

    delete_parser = commands.add_parser("delete", parents=[store], help="delete a credential, or one of its keys")
    delete_parser.add_argument("name", help="the credential's name")
    delete_parser.add_argument("key", nargs="?", help="only this key (default: every key of the credential)")
    delete_parser.set_defaults(offline_command=credentials_delete)

    generate = commands.add_parser(
        "generate-key", help="make a new random store key",
        description="Print a new random store key, or write it to a new file readable by its owner only.")
    generate.add_argument("--output", metavar="FILE", help="write the key to FILE (never replaces a file)")
    generate.set_defaults(offline_command=credentials_generate_key)


def credentials_set(args: argparse.Namespace) -> int:
    try:
        check_credential_name(args.name)
        check_credential_key(args.key)
    except InvalidCredentialError as exc:
        return _fail(str(exc), EXIT_USAGE)
    try:
        value = _read_value(args.name, args.key)
    except ValueError as exc:
        return _fail(str(exc), EXIT_USAGE)
    if not value:
        return _fail(f"no value for {args.name}.{args.key} (give it on stdin, or at the prompt)", EXIT_USAGE)

    def store_value(table: CredentialTable) -> int:
        table.put(args.name, args.key, value)
        print(f"set {args.name}.{args.key} in {table.store.description}")
        return EXIT_OK

    return _with_table(args, store_value, need_key=True)


def credentials_list(args: argparse.Namespace) -> int:
    def show(table: CredentialTable) -> int:
        stored = table.list_keys()
        if not stored:
            print(f"no credentials in {table.store.description}")
            return EXIT_OK
        status = {}
        if args.check:
            for name in dict.fromkeys(entry.name for entry in stored):
                try:
                    table.get(name)
                    status[name] = "ok"
                except (StoreError, InvalidCredentialError) as exc:
                    status[name] = f"FAILED: {exc}"
        headers = ["NAME", "KEY", "UPDATED", *(["CHECK"] if args.check else [])]
        rows = [[entry.name, entry.key, entry.updated_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                 *([status[entry.name]] if args.check else [])] for entry in stored]
        for line in format_table(headers, rows, terminal_width()):
            print(line)
        failed = any(text != "ok" for text in status.values())
        return EXIT_FAILED if failed else EXIT_OK

    return _with_table(args, show, need_key=args.check)


def credentials_delete(args: argparse.Namespace) -> int:
    what = f"{args.name}.{args.key}" if args.key else args.name

    def remove(table: CredentialTable) -> int:
        deleted = table.delete(args.name, args.key)
        if not deleted:
            return _fail(f"nothing stored under {what} in {table.store.description}", EXIT_FAILED)
        print(f"deleted {plural(deleted, 'key')} of {args.name} from {table.store.description}")
        return EXIT_OK

    return _with_table(args, remove, need_key=False)


def credentials_generate_key(args: argparse.Namespace) -> int:
    text = generate_store_key_text()
    if not args.output:
        print(text)
        return EXIT_OK
    path = Path(args.output)
    try:
        write_store_key_file(path, text)
    except FileExistsError:
        return _fail(f"{path} exists; a key file is never replaced (its key may be the only one that decrypts a "
                     "database): choose another path", EXIT_FAILED)
    except OSError as exc:
        return _fail(f"cannot write {path}: {exc.strerror or exc}", EXIT_FAILED)
    print(f"wrote a new store key to {path} (readable by its owner only); point store_key_file "
          "(TOOLHOST_STORE_KEY_FILE) at it, and keep a copy: without it the stored values are lost")
    return EXIT_OK


def _read_value(name: str, key: str) -> str:
    if sys.stdin.isatty():
        value = getpass.getpass(f"value of {name}.{key} (not shown): ")
        if value and getpass.getpass("again, to confirm: ") != value:
            raise ValueError("the two values differ; nothing was stored")
        return value
    text = sys.stdin.read()
    # `echo secret |` and here-documents end with a newline that is not part of the value.
    return text[:-2] if text.endswith("\r\n") else text.removesuffix("\n")


def _with_table(args: argparse.Namespace, command: Callable[[CredentialTable], int], need_key: bool) -> int:
    # Imported here: SQLAlchemy is slow to import, and only these commands need it.
    from ..store.cipher import ValueCipher
    from ..store.credential_table import CredentialTable
    from ..store.database import Store

    flags = {name: value for name, value in (("data_dir", args.data_dir), ("store_key_file", args.store_key_file))
             if value is not None}
    try:
        config = load_config(flags, config_file=args.config)
    except ConfigError as exc:
        return _fail(str(exc), EXIT_USAGE)
    try:
        cipher = ValueCipher(require_store_key(config.store_key_file)) if need_key else None
        store = Store.from_config(config)
    except StoreError as exc:
        return _fail(str(exc), EXIT_FAILED)
    try:
        return command(CredentialTable(store, cipher))
    except InvalidCredentialError as exc:
        return _fail(str(exc), EXIT_USAGE)
    except StoreError as exc:
        return _fail(str(exc), EXIT_FAILED)
    finally:
        store.close()


def _fail(message: str, status: int) -> int:
    print(f"toolhost: {message}", file=sys.stderr)
    return status
