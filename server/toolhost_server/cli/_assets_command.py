"""`toolhost assets`: list, show, create, change, delete and import the server's asset inventory (AssetService).
An import document comes from a file or stdin, never from a shell word. What the assets hold was written by
others: on a terminal it is shown with its control characters escaped (_terminal_text)."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path
from typing import Any

from toolhost import Asset, Client, InvalidArgumentError, WinrmProfile

from ..assets.problems import UNLISTED_PROBLEMS
from ._errors import EXIT_OK, EXIT_USAGE, UsageError
from ._output import format_table, json_text, plural, summary_width
from ._terminal_text import TerminalText

# The import formats by file extension; another extension (or stdin) needs --format.
_FORMATS_BY_SUFFIX = {".yaml": "yaml", ".yml": "yaml", ".csv": "csv"}
_ASSET_FIELDS = ("hostname", "addresses", "os", "platform", "site", "tags")
_WINRM_FIELDS = ("winrm_port", "winrm_ssl", "winrm_domain", "winrm_credential", "winrm_authentication")


def _port(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: 1-65535, or 0 for the default (5985, 5986 "
                                         "with --winrm-ssl)")
    return int(text)


def _add_asset_fields(parser: argparse.ArgumentParser, creating: bool) -> None:
    clear = "" if creating else " ('' clears it)"
    parser.add_argument("--hostname", help=f"the machine's DNS name (default: the asset's name){clear}")
    parser.add_argument("--address", dest="addresses", action="append", metavar="IP",
                        help="an IP address WinRM connects to instead of resolving the hostname (repeatable" +
                             ("" if creating else "; the addresses given replace all of them") + ")")
    parser.add_argument("--os", help=f"the operating system, e.g. 'Microsoft Windows 10 Pro'{clear}")
    parser.add_argument("--platform", help=f"the platform, e.g. windows{clear}")
    parser.add_argument("--site", help=f"where the machine is, e.g. berlin-dc1{clear}")
    parser.add_argument("--tag", dest="tags", action="append", metavar="TAG",
                        help="a label (repeatable" + ("" if creating else "; the tags given replace all of them")
                             + ")")
    if not creating:
        parser.add_argument("--no-addresses", action="store_true", help="remove every address")
        parser.add_argument("--no-tags", action="store_true", help="remove every tag")
    parser.add_argument("--winrm-port", type=_port, metavar="PORT",
                        help="the WinRM port (0: 5985, or 5986 with --winrm-ssl)")
    parser.add_argument("--winrm-ssl", action=argparse.BooleanOptionalAction, default=None,
                        help="connect over HTTPS, verifying the server's certificate")
    parser.add_argument("--winrm-domain", metavar="DOMAIN",
                        help=f"the Windows domain of the account, e.g. CORP (default: the credential's){clear}")
    parser.add_argument("--winrm-credential", metavar="NAME",
                        help=f"the name of the credential the server holds for it (default: winrm){clear}")
    parser.add_argument("--winrm-authentication", choices=("ntlm", "basic"),
                        help="ntlm (the default), or basic (only with --winrm-ssl)")


def add_assets_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], connection: argparse.ArgumentParser
) -> None:
    parser = sub.add_parser(
        "assets", help="list and manage the asset inventory (the machines the asset tools know)",
        description="List and manage the asset inventory: the machines asset_count and asset_search answer about "
                    "and windows_list_directory connects to, with their WinRM profiles (never a password: a "
                    "profile names a credential the server holds). Needs the admin role or the manage_assets "
                    "right when the server authenticates.")
    commands = parser.add_subparsers(dest="assets_command", required=True, metavar="COMMAND")

    listing = commands.add_parser("list", parents=[connection], help="list the assets, filtered",
                                  description="List the assets matching every filter given, regardless of case.")
    listing.add_argument("--os", help="a part of the operating system ('windows 10' matches "
                                      "'Microsoft Windows 10 Pro')")
    listing.add_argument("--platform", help="the platform, e.g. windows")
    listing.add_argument("--site", help="the site, e.g. berlin-dc1")
    listing.add_argument("--tag", help="a tag the asset has")
    listing.add_argument("--name", metavar="GLOB", help="a glob over the name: * any characters, ? one")
    listing.add_argument("--json", action="store_true", help="print a JSON array of the assets")
    listing.set_defaults(client_command=assets_list)

    get = commands.add_parser("get", parents=[connection], help="show one asset and its WinRM profile")
    get.add_argument("name", help="the asset's name, regardless of case")
    get.add_argument("--json", action="store_true", help="print the asset as JSON")
    get.set_defaults(client_command=assets_get)

    create = commands.add_parser("create", parents=[connection], help="add an asset")
    create.add_argument("name", help="the asset's name: a letter or digit, then letters, digits, '.', '_' or '-'")
    _add_asset_fields(create, creating=True)
    create.set_defaults(client_command=assets_create)

    update = commands.add_parser("update", parents=[connection], help="change an asset's fields (only those given)")
    update.add_argument("name")
    _add_asset_fields(update, creating=False)
    update.set_defaults(client_command=assets_update)

    delete = commands.add_parser("delete", parents=[connection], help="remove an asset")
    delete.add_argument("name")
    delete.set_defaults(client_command=assets_delete)

    importing = commands.add_parser(
        "import", parents=[connection], help="create or replace assets from a YAML or CSV file, all or nothing",
        description="Create or replace (by name) every asset of a YAML or CSV document, all or nothing: one bad "
                    "record stores none, and every problem is listed with its line.")
    importing.add_argument("file", metavar="FILE", help="the document (`-` reads stdin, with --format)")
    importing.add_argument("--format", choices=("yaml", "csv"),
                           help="the document's format (default: from FILE's extension, .yaml, .yml or .csv)")
    importing.add_argument("--dry-run", action="store_true", help="check the document and store nothing")
    importing.set_defaults(client_command=assets_import)


# --- reading the command line -------------------------------------------------------------------------------


def _given_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The asset fields the command line gives (a flag not given: not there)."""
    fields = {name: getattr(args, name) for name in (*_ASSET_FIELDS, *_WINRM_FIELDS) if getattr(args, name) is not None}
    for name, flag in (("addresses", "no_addresses"), ("tags", "no_tags")):
        if getattr(args, flag, False):
            if name in fields:
                raise UsageError(f"--{flag.replace('_', '-')} removes every one: give it or --{name[:-1]}, not both")
            fields[name] = []
    return fields


def _read_document(path: str, format: str | None) -> tuple[str, str]:
    """The document's format and text (UTF-8, stdin's for `-`)."""
    if format is None:
        format = _FORMATS_BY_SUFFIX.get(Path(path).suffix.lower()) if path != "-" else None
        if format is None:
            raise UsageError(f"cannot tell the format of {path}: give --format yaml or --format csv")
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        # utf-8-sig: a spreadsheet's CSV often starts with a byte order mark, which is no part of the header.
        return format, data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path} is not UTF-8 text (byte {exc.start}): save it as UTF-8") from None


def _refused(exc: InvalidArgumentError, headline: str) -> int:
    """An InvalidArgumentError with field violations, one problem a line (an import's with its line first);
    one without any goes to report_error as every other error does."""
    if not exc.field_violations:
        raise exc
    shown = TerminalText.for_stderr()
    print(shown(f"toolhost: {exc.code.name}: {headline}:"), file=sys.stderr)
    for violation in exc.field_violations:
        where, _, reason = violation.description.partition(": ")
        if where.startswith("line ") or where == "document":
            print(shown(f"  {where}: {violation.field or '-'}: {reason}"), file=sys.stderr)
        else:
            print(shown(f"  {violation.field or '/'}: {violation.description}"), file=sys.stderr)
    if UNLISTED_PROBLEMS in exc.message:
        print(shown("  and more problems than one answer lists: fix these and run it again to see the rest"),
              file=sys.stderr)
    return EXIT_USAGE


# --- the commands -------------------------------------------------------------------------------------------


def assets_list(client: Client, args: argparse.Namespace) -> int:
    assets = list(client.list_assets(os=args.os or "", platform=args.platform or "", site=args.site or "",
                                     tag=args.tag or "", name=args.name or ""))
    shown = TerminalText.for_stdout()
    if args.json:
        print(shown.json(json_text([asset.to_dict() for asset in assets])))
        return EXIT_OK
    if not assets:
        print("no assets match" if any((args.os, args.platform, args.site, args.tag, args.name))
              else "no assets (`toolhost assets create` or `toolhost assets import` adds some)", file=sys.stderr)
        return EXIT_OK
    rows = [[shown(a.name), shown(a.hostname or a.name), shown(a.platform or "-"), shown(a.site or "-"),
             shown(", ".join(a.tags) or "-"), shown(a.os or "-")] for a in assets]
    # One line per asset, cut to fit; a narrow terminal loses TAGS, then SITE, before OS shrinks to nothing.
    print("\n".join(format_table(["NAME", "HOSTNAME", "PLATFORM", "SITE", "TAGS", "OS"], rows, summary_width(),
                                 optional=(4, 3))))
    return EXIT_OK


def _profile_text(profile: WinrmProfile) -> str:
    port = profile.port or (5986 if profile.ssl else 5985)
    scheme = "https" if profile.ssl else "http"
    domain = f", domain {profile.domain}" if profile.domain else ""
    return (f"{scheme} port {port}{' (default)' if not profile.port else ''}, {profile.authentication}, "
            f"credential {profile.credential or 'winrm'}{domain}")


def assets_get(client: Client, args: argparse.Namespace) -> int:
    asset = client.get_asset(args.name)
    shown = TerminalText.for_stdout()
    if args.json:
        print(shown.json(json_text(asset.to_dict())))
        return EXIT_OK
    facts = [
        ("hostname", asset.hostname or f"{asset.name} (the name)"),
        ("addresses", ", ".join(asset.addresses) or "-"),
        ("os", asset.os or "-"),
        ("platform", asset.platform or "-"),
        ("site", asset.site or "-"),
        ("tags", ", ".join(asset.tags) or "-"),
        ("winrm", _profile_text(asset.winrm)),
        ("created", asset.created_at.isoformat(timespec="seconds")),
        ("updated", asset.updated_at.isoformat(timespec="seconds")),
    ]
    width = max(summary_width() - 15, 40)
    lines = [shown(asset.name)]
    for label, value in facts:
        wrapped = textwrap.wrap(shown(value), width) or [""]
        lines.append(f"  {label + ':':<11}{wrapped[0]}")
        lines += [f"{'':13}{part}" for part in wrapped[1:]]
    print("\n".join(lines))
    return EXIT_OK


def _changed(verb: str, asset: Asset) -> None:
    print(TerminalText.for_stdout()(f"{verb} asset {asset.name}"))


def assets_create(client: Client, args: argparse.Namespace) -> int:
    fields = _given_fields(args)
    profile = {name.removeprefix("winrm_"): fields.pop(name) for name in _WINRM_FIELDS if name in fields}
    try:
        asset = client.create_asset(args.name, **fields, winrm=WinrmProfile(**profile) if profile else None)
    except InvalidArgumentError as exc:
        return _refused(exc, f"asset {args.name} was not created")
    _changed("created", asset)
    return EXIT_OK


def assets_update(client: Client, args: argparse.Namespace) -> int:
    changes = _given_fields(args)
    if not changes:
        raise UsageError("nothing to change: give --os, --site, --tag, --winrm-port or another field "
                         "(`toolhost assets update -h` lists them)")
    try:
        asset = client.update_asset(args.name, **changes)
    except InvalidArgumentError as exc:
        return _refused(exc, f"asset {args.name} was not changed")
    _changed("updated", asset)
    return EXIT_OK


def assets_delete(client: Client, args: argparse.Namespace) -> int:
    _changed("deleted", client.delete_asset(args.name))
    return EXIT_OK


def assets_import(client: Client, args: argparse.Namespace) -> int:
    format, content = _read_document(args.file, args.format)
    try:
        summary = client.import_assets(format, content, validate_only=args.dry_run)  # type: ignore[arg-type]
    except InvalidArgumentError as exc:
        return _refused(exc, f"{args.file} was not imported, nothing changed")
    created, replaced = plural(summary.created, "asset"), plural(summary.replaced, "asset")
    if args.dry_run:
        print(f"{args.file} is fine: importing it would create {created} and replace {replaced}; nothing stored")
    else:
        print(f"imported {args.file}: created {created}, replaced {replaced}")
    return EXIT_OK
