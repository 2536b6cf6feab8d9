"""`toolhost mcp`: serve a running toolhost's tools over MCP on stdin and stdout, for a host that starts a process.

The connection options are the other client commands' (--target, --timeout, --token-file, --tls-*), so the host
sees exactly the tools that token sees. A server that cannot be reached does not stop the bridge: each request
then answers with an error saying so, which the host shows its user.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from typing import Any

from ._connection_options import client_security
from ._errors import EXIT_OK, EXIT_USAGE, UsageError
from ._terminal_text import TerminalText

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def add_mcp_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                   connection: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "mcp", parents=[connection], help="serve the server's tools over MCP on stdin and stdout",
        description="Serve the tools of the toolhost at --target to an MCP host that starts this command, over "
                    "stdin and stdout (JSON-RPC only on stdout; logs go to stderr). The host sees the tools the "
                    "token of --token-file sees.")
    parser.add_argument("--log-level", type=str.upper, choices=LOG_LEVELS,
                        default=(os.environ.get("TOOLHOST_LOG_LEVEL") or "WARNING").upper(),
                        help="what the bridge logs to stderr [TOOLHOST_LOG_LEVEL; default WARNING]")
    parser.set_defaults(offline_command=run_mcp)


def run_mcp(args: argparse.Namespace) -> int:
    # Before the SDK serves: from then on fd 1 is the wire's only until the bridge stops.
    _log_to_stderr(args.log_level)
    try:
        security = client_security(args)
    except UsageError as exc:
        print(TerminalText.for_stderr()(f"toolhost: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    try:
        return asyncio.run(_serve(args, security))
    except UsageError as exc:
        print(TerminalText.for_stderr()(f"toolhost: {exc}"), file=sys.stderr)
        return EXIT_USAGE


async def _serve(args: argparse.Namespace, security: dict[str, Any]) -> int:
    # Imported here: the SDK is large, and the other commands do not need it.
    from toolhost import AsyncClient

    from .. import __version__
    from ..mcp.remote_backend import RemoteBackend
    from ..mcp.stdio import serve_stdio

    target: str = args.target
    try:
        client = AsyncClient(target, timeout=args.timeout, **security)
    except ValueError as exc:  # TLS and token options that do not fit together, or a token in plaintext
        raise UsageError(str(exc)) from None
    async with client:
        logging.getLogger("toolhost.mcp.bridge").info("serving MCP on stdio for the toolhost server at %s", target)
        await serve_stdio(RemoteBackend(client, target), version=__version__)
    return EXIT_OK


def _log_to_stderr(level: str) -> None:
    from ..logs.formatting import make_formatter

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(make_formatter(""))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
