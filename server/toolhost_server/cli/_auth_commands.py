"""`toolhost auth`: helpers for the server's auth file (hashing a token for its `tokens:` list)."""

from __future__ import annotations

import argparse
import getpass
import sys

from ..auth.tokens import hash_token, token_problem
from ._errors import EXIT_OK, EXIT_USAGE


def add_auth_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    auth = sub.add_parser("auth", help="helpers for the server's auth file")
    auth_sub = auth.add_subparsers(dest="auth_command", required=True, metavar="COMMAND")
    hash_parser = auth_sub.add_parser(
        "hash-token", help="print the sha256 of a token read from stdin, for the auth file",
        description="Read a token from stdin (prompting without echo on a terminal) and print the hash the auth "
                    "file's `sha256:` takes. The token must be at least 32 random characters; make one with "
                    "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'.")
    hash_parser.set_defaults(offline_command=hash_token_command)


def hash_token_command(args: argparse.Namespace) -> int:
    # Read from stdin, never from the command line, where the token would land in shell history and `ps`.
    token = getpass.getpass("token: ") if sys.stdin.isatty() else sys.stdin.read()
    token = token.strip()
    problem = token_problem(token)
    if problem is not None:
        print(f"toolhost: {problem}", file=sys.stderr)
        return EXIT_USAGE
    print(hash_token(token))
    return EXIT_OK
