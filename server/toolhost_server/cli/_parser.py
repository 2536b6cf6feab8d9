"""The `toolhost` command line: every command's arguments, and the function that runs each one."""

from __future__ import annotations

import argparse
import math
import os

from toolhost import DEFAULT_TARGET

from ._assets_command import add_assets_parser
from ._auth_commands import add_auth_parser
from ._catalog_validate import catalog_validate
from ._check_command import add_check_parser
from ._client_commands import call, reload, tools_get, tools_list
from ._connection_options import add_security_options
from ._credentials import add_credentials_parser
from ._db_commands import add_db_parser
from ._instructions_command import add_instructions_parser
from ._logs_command import add_logs_arguments, logs
from ._mcp_command import add_mcp_parser
from ._search_command import add_tools_search_parser
from ._serve import add_serve_parser
from ._user_tools_command import add_user_tools_parser


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError("must be a positive number of seconds")
    return value


def _add_connection_options(parser: argparse.ArgumentParser, suppress: bool) -> None:
    # The options are accepted before and after the command. After it they default to SUPPRESS, so that
    # they only override what was given before it.
    target_default = argparse.SUPPRESS if suppress else os.environ.get("TOOLHOST_TARGET") or DEFAULT_TARGET
    parser.add_argument("--target", default=target_default,
                        help=f"server address host:port [TOOLHOST_TARGET; default {DEFAULT_TARGET}]")
    parser.add_argument("--timeout", type=_positive_seconds, default=argparse.SUPPRESS if suppress else None,
                        help="deadline of each request in seconds (default: none)")
    add_security_options(parser, suppress)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolhost", description="Host tools for AI agents over gRPC, and talk to a running toolhost.",
        epilog="exit status: 0 ok, 1 failed, 2 bad usage, 3 server unreachable")
    _add_connection_options(parser, suppress=False)
    connection = argparse.ArgumentParser(add_help=False)
    _add_connection_options(connection, suppress=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_serve_parser(sub)
    add_auth_parser(sub)

    tools = sub.add_parser("tools", help="list and describe the server's tools")
    tools_sub = tools.add_subparsers(dest="tools_command", required=True, metavar="COMMAND")
    listing = tools_sub.add_parser("list", parents=[connection], help="list tools as a table or JSON")
    listing.add_argument("--platform", help="only tools for this platform, e.g. linux")
    listing.add_argument("--category", help="only tools in this category, e.g. network")
    listing.add_argument("--tag", action="append", help="only tools with this tag (repeatable: every tag)")
    listing.add_argument("--provider", help="the AI provider the list is for, e.g. claude_code")
    form = listing.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="print a JSON array of full tools (with schemas)")
    form.add_argument("--jsonl", action="store_true", help="print one full tool per line as JSON")
    listing.set_defaults(client_command=tools_list)

    get = tools_sub.add_parser("get", parents=[connection], help="describe one tool")
    get.add_argument("name", help="the tool's name")
    get.add_argument("--json", action="store_true", help="print the tool as JSON")
    get.set_defaults(client_command=tools_get)
    add_tools_search_parser(tools_sub, connection)

    call_parser = sub.add_parser(
        "call", parents=[connection], help="run a tool",
        description="Run a tool. Each KEY=VALUE is typed by the tool's parameter: integer, number and boolean "
                    "are parsed, array and object are JSON, strings are taken as they are.")
    call_parser.add_argument("name", help="the tool's name")
    call_parser.add_argument("arguments", nargs="*", metavar="KEY=VALUE", help="an argument of the tool")
    call_parser.add_argument("--json", dest="json_arguments", metavar="OBJECT",
                             help="the arguments as a JSON object (KEY=VALUE pairs are added to it)")
    call_parser.add_argument("--call-id", help="an id for the call, echoed in logs and traces")
    call_parser.add_argument("--stream", action="store_true",
                             help="print output and progress as the tool produces them (StreamCallTool)")
    call_parser.add_argument("--format", dest="output_format", choices=("json", "pretty", "text"),
                             help="print the structured output as compact or indented JSON, or the tool's own "
                                  "text (default: the tool's choice)")
    call_parser.add_argument("--filter-empty", action="store_true",
                             help="leave out null and empty fields of the structured output")
    call_parser.set_defaults(client_command=call)

    reload_parser = sub.add_parser("reload", parents=[connection], help="make the server read its catalogs again")
    reload_parser.set_defaults(client_command=reload)

    logs_parser = sub.add_parser(
        "logs", parents=[connection], help="show the server's logs, or follow them with -f",
        description="Show the newest log records the server can read (its own, its log files, its logs table), "
                    "oldest first; -f keeps printing new ones. Needs the admin role when the server authenticates.")
    add_logs_arguments(logs_parser)
    logs_parser.set_defaults(client_command=logs)

    catalog = sub.add_parser("catalog", help="work with catalog files")
    catalog_sub = catalog.add_subparsers(dest="catalog_command", required=True, metavar="COMMAND")
    validate = catalog_sub.add_parser(
        "validate", help="check catalog directories offline, with the server's own loader")
    validate.add_argument("directories", nargs="+", metavar="DIR", help="a catalog directory")
    validate.add_argument("--pipeline-target", default=os.environ.get("TOOLHOST_PIPELINE_TARGET", ""),
                          help="the pipeline toolhost, so `source: pipeline` tools validate as on the server "
                               "[TOOLHOST_PIPELINE_TARGET]")
    validate.add_argument("--python-entrypoint-modules",
                          default=os.environ.get("TOOLHOST_PYTHON_ENTRYPOINT_MODULES", ""),
                          help="module prefixes catalog files may name Python entrypoints in, comma-separated, as "
                               "on the server [TOOLHOST_PYTHON_ENTRYPOINT_MODULES]")
    validate.set_defaults(offline_command=catalog_validate)
    add_credentials_parser(sub)
    add_db_parser(sub)
    add_instructions_parser(sub, connection)
    add_user_tools_parser(sub, connection)
    add_assets_parser(sub, connection)
    add_mcp_parser(sub, connection)
    add_check_parser(sub, connection)
    return parser
