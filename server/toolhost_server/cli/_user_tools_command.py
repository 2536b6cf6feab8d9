"""`toolhost user-tools`: create, list, show, update, delete, version and enable the server's user tools
(UserToolService). A script comes from a file or stdin, a schema from a JSON file: never from a shell word that
would need quoting twice. What the tools hold was written by others: on a terminal it is shown with its control
characters escaped (_terminal_text)."""

from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap
from typing import Any

from toolhost import Client, UserTool

from ._errors import EXIT_OK, UsageError
from ._output import format_table, json_text, one_line, summary_width
from ._terminal_text import TerminalText

# What a user tool takes when its creator gives no schema: an object of any arguments.
DEFAULT_SCHEMA: dict[str, Any] = {"type": "object"}


def _tool_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError("must be 0 (the server's default) or a positive number of seconds")
    return value


def _version(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a version number (1, 2, ...; `versions` lists them)")
    return int(text)


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _add_tool_fields(parser: argparse.ArgumentParser, creating: bool) -> None:
    parser.add_argument("--script", metavar="FILE", required=creating,
                        help="the bash script, from FILE or from stdin with `-`")
    parser.add_argument("--schema", metavar="FILE",
                        help="the JSON Schema of the arguments, a JSON file" +
                             (" (default: an object of any arguments)" if creating else ""))
    parser.add_argument("--description", required=creating, help="what the tool does, for a person or a model")
    parser.add_argument("--name", help="the name a person reads (default: the slug)")
    parser.add_argument("--category", help="the tool's category" + (" (default: custom)" if creating else ""))
    prompt = parser.add_mutually_exclusive_group()
    prompt.add_argument("--system-prompt", metavar="TEXT", help="the instructions a model gets for the tool")
    prompt.add_argument("--system-prompt-file", metavar="FILE", help="the same, from FILE (or stdin with `-`)")
    parser.add_argument("--tool-timeout", type=_tool_seconds, metavar="SECONDS",
                        help="the longest a call may run (0: the server's default)")
    parser.add_argument("--tags", type=_names, metavar="TAG,...", help="labels, comma-separated ('' for none)")
    parser.add_argument("--credentials", type=_names, metavar="NAME,...",
                        help="credentials the script gets as TOOL_CRED_<NAME>_<KEY> (only those your role may "
                             "grant; '' for none)")


def add_user_tools_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], connection: argparse.ArgumentParser
) -> None:
    parser = sub.add_parser(
        "user-tools", help="create and manage user tools (scripts served as tools)",
        description="Create and manage user tools: bash scripts the server keeps with every version and serves as "
                    "tools. Each argument reaches the script as the environment variable TOOL_ARG_<NAME>. Needs "
                    "the admin role or the manage_tools right when the server authenticates.")
    commands = parser.add_subparsers(dest="user_tools_command", required=True, metavar="COMMAND")

    create = commands.add_parser("create", parents=[connection], help="create a user tool (version 1)")
    create.add_argument("slug", help="the tool's name: a lowercase letter, then lowercase letters, digits or _")
    _add_tool_fields(create, creating=True)
    create.set_defaults(client_command=user_tools_create)

    listing = commands.add_parser("list", parents=[connection], help="list the user tools")
    listing.add_argument("--json", action="store_true", help="print a JSON array of the tools, scripts included")
    listing.set_defaults(client_command=user_tools_list)

    show = commands.add_parser("show", parents=[connection], help="show one user tool and its script")
    show.add_argument("slug")
    show.add_argument("--json", action="store_true", help="print the tool as JSON")
    show.set_defaults(client_command=user_tools_show)

    update = commands.add_parser("update", parents=[connection],
                                 help="change a user tool's fields (only those given) as a new version")
    update.add_argument("slug")
    _add_tool_fields(update, creating=False)
    update.set_defaults(client_command=user_tools_update)

    delete = commands.add_parser("delete", parents=[connection], help="delete a user tool and its versions")
    delete.add_argument("slug")
    delete.set_defaults(client_command=user_tools_delete)

    versions = commands.add_parser("versions", parents=[connection], help="list a user tool's versions")
    versions.add_argument("slug")
    versions.add_argument("--json", action="store_true", help="print the versions as JSON, scripts included")
    versions.set_defaults(client_command=user_tools_versions)

    restore = commands.add_parser("restore", parents=[connection],
                                  help="make a new version equal to an old one, and serve it")
    restore.add_argument("slug")
    restore.add_argument("version", type=_version)
    restore.set_defaults(client_command=user_tools_restore)

    for verb, enabled in (("enable", True), ("disable", False)):
        toggle = commands.add_parser(verb, parents=[connection],
                                     help=f"{'serve' if enabled else 'stop serving'} a user tool (it is kept)")
        toggle.add_argument("slug")
        toggle.set_defaults(client_command=user_tools_enable if enabled else user_tools_disable)


# --- reading files ----------------------------------------------------------------------------------------


def _read_text(path: str, what: str) -> str:
    """A file's text (stdin's for `-`), as UTF-8."""
    try:
        if path == "-":
            return sys.stdin.buffer.read().decode("utf-8")
        with open(path, "rb") as file:
            return file.read().decode("utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read the {what} from {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"the {what} in {path} is not UTF-8 text (byte {exc.start}): save it as UTF-8") from None


def _read_schema(path: str) -> dict[str, Any]:
    text = _read_text(path, "schema")
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"the schema in {path} is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") \
            from None
    if not isinstance(schema, dict):
        raise UsageError(f"the schema in {path} must be a JSON object (a JSON Schema such as "
                         '{"type": "object", "properties": {...}}), not a JSON ' + type(schema).__name__)
    return schema


def _fields(args: argparse.Namespace) -> dict[str, Any]:
    """The tool fields the command line gives, read from their files; None for each one it leaves out."""
    if args.script == "-" and args.system_prompt_file == "-":
        raise UsageError("only one of --script and --system-prompt-file can come from stdin")
    system_prompt = args.system_prompt
    if args.system_prompt_file is not None:
        system_prompt = _read_text(args.system_prompt_file, "system prompt")
    return {
        "script": _read_text(args.script, "script") if args.script is not None else None,
        "input_schema": _read_schema(args.schema) if args.schema is not None else None,
        "description": args.description, "name": args.name, "category": args.category,
        "system_prompt": system_prompt, "timeout_seconds": args.tool_timeout, "tags": args.tags,
        "credentials": args.credentials,
    }


# --- the commands -----------------------------------------------------------------------------------------


def _changed(verb: str, tool: UserTool) -> None:
    shown = TerminalText.for_stdout()
    state = "" if tool.enabled else " (disabled)"
    shadow = f"; not served: {tool.shadowed_by} has the name" if tool.shadowed_by else ""
    print(shown(f"{verb} user tool {tool.slug}, version {tool.version}{state}{shadow}"))


def user_tools_create(client: Client, args: argparse.Namespace) -> int:
    fields = _fields(args)
    fields["input_schema"] = fields["input_schema"] or DEFAULT_SCHEMA
    given = {key: value for key, value in fields.items() if value is not None}
    _changed("created", client.create_user_tool(args.slug, **given))
    return EXIT_OK


def user_tools_update(client: Client, args: argparse.Namespace) -> int:
    changes = {key: value for key, value in _fields(args).items() if value is not None}
    if not changes:
        raise UsageError("nothing to change: give --script, --schema, --description or another field "
                         "(`toolhost user-tools update -h` lists them)")
    _changed("updated", client.update_user_tool(args.slug, **changes))
    return EXIT_OK


def user_tools_list(client: Client, args: argparse.Namespace) -> int:
    tools = list(client.list_user_tools())
    shown = TerminalText.for_stdout()
    if args.json:
        print(shown.json(json_text([tool.to_dict() for tool in tools])))
        return EXIT_OK
    if not tools:
        print("no user tools (`toolhost user-tools create` makes one)", file=sys.stderr)
        return EXIT_OK
    rows = [[shown(t.slug), str(t.version), shown(_state(t)), shown(one_line(t.category)),
             shown(one_line(t.description))] for t in tools]
    print("\n".join(format_table(["SLUG", "VERSION", "STATE", "CATEGORY", "DESCRIPTION"], rows, summary_width())))
    return EXIT_OK


def _state(tool: UserTool) -> str:
    if tool.shadowed_by:
        return f"shadowed by {tool.shadowed_by}"
    return "enabled" if tool.enabled else "disabled"


def user_tools_show(client: Client, args: argparse.Namespace) -> int:
    tool = client.get_user_tool(args.slug)
    shown = TerminalText.for_stdout()
    if args.json:
        print(shown.json(json_text(tool.to_dict())))
        return EXIT_OK
    width = summary_width()
    lines = [shown(f"{tool.slug} ({tool.name or tool.slug}), version {tool.version}")]
    lines += textwrap.wrap(shown(tool.description), width=max(width - 2, 40), initial_indent="  ",
                           subsequent_indent="  ")
    facts = [
        ("state", _state(tool)),
        ("category", tool.category),
        ("tags", ", ".join(tool.tags) or "-"),
        ("credentials", ", ".join(tool.credentials) or "-"),
        ("timeout", f"{tool.timeout_seconds:g}s" if tool.timeout_seconds else "server default"),
        ("created", tool.created_at.isoformat(timespec="seconds")),
        ("updated", tool.updated_at.isoformat(timespec="seconds")),
    ]
    lines.append("")
    lines += [f"  {label + ':':<13}{shown(value)}" for label, value in facts]
    if tool.system_prompt:
        lines += ["", "System prompt:", textwrap.indent(shown(tool.system_prompt.rstrip("\n")), "  ")]
    lines += ["", "Input schema:", textwrap.indent(shown.json(json_text(tool.input_schema)), "  ")]
    lines += ["", "Script:", textwrap.indent(shown(tool.script.rstrip("\n")), "  ")]
    print("\n".join(lines))
    return EXIT_OK


def user_tools_delete(client: Client, args: argparse.Namespace) -> int:
    tool = client.delete_user_tool(args.slug)
    print(TerminalText.for_stdout()(f"deleted user tool {tool.slug} (it was at version {tool.version})"))
    return EXIT_OK


def user_tools_versions(client: Client, args: argparse.Namespace) -> int:
    versions = list(client.list_user_tool_versions(args.slug))
    shown = TerminalText.for_stdout()
    if args.json:
        print(shown.json(json_text([version.to_dict() for version in versions])))
        return EXIT_OK
    rows = [[str(v.version), v.created_at.isoformat(timespec="seconds"), shown(v.changed_by), shown(one_line(v.change))]
            for v in versions]
    print("\n".join(format_table(["VERSION", "TIME", "BY", "CHANGE"], rows, summary_width())))
    return EXIT_OK


def user_tools_restore(client: Client, args: argparse.Namespace) -> int:
    tool = client.restore_user_tool_version(args.slug, args.version)
    _changed(f"restored version {args.version} of", tool)
    return EXIT_OK


def _set_enabled(client: Client, slug: str, enabled: bool) -> int:
    result = client.set_user_tool_enabled(slug, enabled)
    shown = TerminalText.for_stdout()
    print(shown(f"{'enabled' if enabled else 'disabled'} user tool {result.user_tool.slug}"))
    for conflict in result.conflicts:
        other = conflict.tool_b if conflict.tool_a == slug else conflict.tool_a
        hint = f": {conflict.resolution_hint}" if conflict.resolution_hint else ""
        print(shown(f"  note: equivalent to {other}, which is served too{hint}"))
    return EXIT_OK


def user_tools_enable(client: Client, args: argparse.Namespace) -> int:
    return _set_enabled(client, args.slug, True)


def user_tools_disable(client: Client, args: argparse.Namespace) -> int:
    return _set_enabled(client, args.slug, False)
