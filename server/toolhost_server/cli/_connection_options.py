"""The client commands' TLS and token options, and the Client arguments they make."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from toolhost import is_local_target

from ._errors import UsageError

# (flag, environment variable, help)
_OPTIONS = (
    ("--token-file", "TOOLHOST_TOKEN_FILE", "file holding the bearer token to send"),
    ("--tls-ca", "TOOLHOST_TLS_CA", "PEM file of the CA that signed the server's certificate (implies TLS)"),
    ("--tls-cert", "TOOLHOST_TLS_CERT", "PEM client certificate, for a server that requires one (mTLS)"),
    ("--tls-key", "TOOLHOST_TLS_KEY", "PEM private key of --tls-cert"),
    ("--tls-server-name", "TOOLHOST_TLS_SERVER_NAME", "the name the server's certificate must carry, when it "
     "differs from the --target host"),
)


def add_security_options(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """Like the other connection options: accepted before and after the command (see _parser.py)."""
    for flag, env_var, help_text in _OPTIONS:
        default = argparse.SUPPRESS if suppress else os.environ.get(env_var) or None
        parser.add_argument(flag, default=default, metavar="FILE" if "server-name" not in flag else "NAME",
                            help=f"{help_text} [{env_var}]")
    parser.add_argument("--tls", action="store_true", default=argparse.SUPPRESS if suppress else False,
                        help="connect with TLS, verifying the server with the system's CA certificates")


def client_security(args: argparse.Namespace) -> dict[str, Any]:
    """The Client keyword arguments for the options given; UsageError for ones that cannot work."""
    security: dict[str, Any] = {}
    if args.tls_ca:
        security["root_certificates"] = args.tls_ca
    if args.tls_cert or args.tls_key:
        if not (args.tls_cert and args.tls_key):
            raise UsageError("--tls-cert and --tls-key go together")
        security["client_certificate"], security["client_key"] = args.tls_cert, args.tls_key
    if args.tls or security:
        security["tls"] = True
    if args.tls_server_name:
        security["server_name_override"] = args.tls_server_name
    if args.token_file:
        try:
            token = Path(args.token_file).read_text("utf-8").strip()
        except OSError as exc:
            raise UsageError(f"cannot read --token-file {args.token_file}: {exc.strerror or exc}") from None
        security["token"] = token
        # Typing --token-file for a server on this machine is consent enough to send it there in plaintext;
        # the client still refuses plaintext to any other host.
        security["insecure_token_ok"] = is_local_target(args.target)
    return security
