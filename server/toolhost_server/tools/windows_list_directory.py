"""The windows_list_directory tool: a directory of a Windows machine of the asset inventory, listed over WinRM.

The seed's asset intelligence, in its four steps: the asset's connection profile from the inventory, its
credential from the server's sources (never from the caller), the two merged, and a structured failure
(MISSING_CREDENTIALS) when the credential is not there. Before any connection the credential must be allowed
to go where the asset points (windows/connection_plan.py); the path reaches PowerShell only as a quoted literal
(windows/powershell.py).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any, ClassVar, Final

from ..assets.model import Asset
from ..credentials.resolved import Credential
from ..errors import MissingCredentialsError
from ..model import Annotations, Example, Parameter
from ..windows.connection_plan import merged_login, plan_connection, refuse_insecure_transport
from ..windows.credential_hosts import CredentialHosts
from ..windows.directory_listing import (
    MAX_LISTING_OUTPUT_BYTES,
    DirectoryEntry,
    InvalidListingError,
    entry_line,
    parse_listing,
    remote_error,
)
from ..windows.powershell import DEFAULT_PATH, MAX_ENTRIES, MAX_PATH_CHARS, UnusablePathError, list_directory_script
from .asset_inventory import call_deadline, in_inventory, inventory_of, unserved_without_inventory
from .base import Tool, ToolContext, ToolOutput, ToolRaisedFailure, ToolServices
from .net import HOST_MAX_LENGTH

TIMEOUT_SECONDS: Final = 60
# Of the call's time, what is left for the tool's own work: the rest lets it report its own TIMEOUT (saying
# what it was waiting for) before the pipeline stops it.
_BUDGET_SHARE: Final = 0.9
_MIN_SECONDS: Final = 0.05
# What the host may send at most: what MAX_ENTRIES + 1 entries of the longest names take as the script prints
# them (about 21 MiB; directory_listing.py says how it is computed). Output past it means the host is not running
# the listing script, and is refused rather than read.
MAX_REMOTE_OUTPUT_BYTES: Final = MAX_LISTING_OUTPUT_BYTES
# Bytes of max_output_bytes kept for what surrounds the entries (the other fields, the header line).
_RESERVE_BYTES: Final = 4096
_NO_CONTROL_CHARACTERS: Final = "^[^\\x00-\\x1f\\x7f]*$"
# A path may hold tab and line breaks (literal characters inside the quoted string; see powershell.py), no other
# control character: refused by the schema as the caller's mistake, and again by check_path.
_PATH_PATTERN: Final = "^[^\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f-\\x9f]*$"

_ENTRY_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "type": {"enum": ["file", "directory"]},
        "size": {"type": ["integer", "null"], "description": "Bytes; null for a directory."},
        "modified": {"type": "string", "description": "Last write time, ISO 8601 in UTC."},
    },
    "required": ["name", "type", "size", "modified"],
}


class WindowsListDirectory(Tool):
    name = "windows_list_directory"
    display_name = "Windows List Directory"
    description = (
        "List Windows directory contents on a machine of the asset inventory, over WinRM: each entry's name, type "
        "(file or directory), size in bytes and last write time (ISO 8601, UTC). `host` is an asset's name or "
        "hostname (asset_search lists them); the connection settings and the credential come from the inventory "
        "and the server, never from the caller. At most 10,000 entries (and the server's max_output_bytes); "
        "`truncated` says when there were more. Fails with MISSING_CREDENTIALS when the server holds no "
        "credential for the asset, ASSET_NOT_FOUND for an unknown host, PATH_NOT_FOUND, ACCESS_DENIED, "
        "CONNECTION_FAILED or AUTHENTICATION_FAILED as the host answers, and CREDENTIAL_HOST_DENIED or "
        "EGRESS_DENIED when the server's operator does not let the credential or the tools go to that host.")
    category = "asset"
    platform = "windows"
    tags = ("asset", "windows", "winrm", "filesystem")
    parameters = (
        Parameter("host", "string", "The asset's name or hostname (ignoring case), for example 'ws-042'.",
                  required=True, schema={"minLength": 1, "maxLength": HOST_MAX_LENGTH,
                                         "pattern": _NO_CONTROL_CHARACTERS}),
        Parameter("path", "string", "The directory to list, on one of the host's drives, for example "
                  "'C:\\Users' (default C:\\); UNC, device and provider paths are refused. Any character but "
                  "control characters (tab and line breaks pass); wildcards are not expanded.",
                  default=DEFAULT_PATH,
                  schema={"minLength": 1, "maxLength": MAX_PATH_CHARS, "pattern": _PATH_PATTERN}),
    )
    output_schema: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "host": {"type": "string", "description": "The asset's name."},
            "hostname": {"type": "string", "description": "The hostname that was connected to."},
            "path": {"type": "string"},
            "entries": {"type": "array", "items": _ENTRY_SCHEMA},
            "truncated": {"type": "boolean", "description": "True when the directory holds more entries."},
        },
        "required": ["host", "hostname", "path", "entries", "truncated"],
    }
    timeout_seconds = TIMEOUT_SECONDS
    # Each call may hold a host's reply of up to MAX_REMOTE_OUTPUT_BYTES in memory, a few copies of it while
    # parse_listing decodes it, but never the objects a hostile document's JSON would make.
    max_concurrency = 16
    examples = (
        Example("The C: drive of ws-042", {"host": "ws-042"}),
        Example("A user's profile", {"host": "ws-042.corp.example.com", "path": "C:\\Users\\alice"}),
    )
    intents = (r"show (?:me )?(?:the )?directory (?:listing )?of (?:the )?c:? drive on (?P<host>[^\s?]+)\??",)
    annotations = Annotations(read_only=True, open_world=True)

    @classmethod
    def unserved_because(cls, services: ToolServices) -> str:
        return unserved_without_inventory(services)

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        from ..windows.winrm_client import WinrmFailure, run_powershell

        loop = asyncio.get_running_loop()
        budget = max(_MIN_SECONDS, context.timeout_seconds * _BUDGET_SHARE)
        deadline = loop.time() + budget
        host, path = str(arguments["host"]), str(arguments["path"])
        try:
            script = list_directory_script(path)
        except UnusablePathError as exc:
            raise ToolRaisedFailure(str(exc), "INVALID_PATH") from None
        asset = await _find_asset(host, context)
        services = context.services
        hosts = services.winrm_credential_hosts or CredentialHosts({})
        # Both before the credential is resolved: a refused call reads no secret, and tells an asset editor
        # (who may name any credential) nothing about what the server holds.
        refuse_insecure_transport(asset, services.winrm_ca_file)
        unlisted = hosts.unlisted_refusal(asset.winrm.effective_credential)
        if unlisted:
            raise ToolRaisedFailure(unlisted, "CREDENTIAL_HOST_DENIED")
        credential = await _credential(asset, context)
        login = merged_login(asset, credential, context.logger)
        plan = await plan_connection(asset, login, credential.name, hosts, services.winrm_ca_file, deadline, budget)
        endpoint = plan.endpoint
        context.logger.info(
            "listing a directory of asset %s at %s port %d (%s, %s, addresses %s from %s) with credential %s",
            asset.name, endpoint.hostname, endpoint.port, "https" if endpoint.ssl else "http",
            login.authentication, ", ".join(endpoint.addresses), "DNS" if plan.from_dns else "the asset",
            credential.name)
        try:
            output = await run_powershell(endpoint, login, script,
                                          timeout_seconds=max(_MIN_SECONDS, deadline - loop.time()),
                                          max_output_bytes=MAX_REMOTE_OUTPUT_BYTES)
        except WinrmFailure as exc:
            raise ToolRaisedFailure(exc.message, exc.code) from None
        except ValueError as exc:  # the endpoint cannot be used (a hostname the client refuses)
            raise ToolRaisedFailure(f"asset {asset.name!r}: {exc}; an asset manager corrects it",
                                    "INVALID_TARGET") from None
        if output.truncated:
            raise ToolRaisedFailure(
                f"{asset.name!r} sent more than {MAX_REMOTE_OUTPUT_BYTES} bytes, more than the listing script "
                "prints for any directory; the host does not run it as sent", "PROTOCOL_ERROR")
        if output.exit_code != 0:
            error = remote_error(output.exit_code, output.errors)
            raise ToolRaisedFailure(f"listing {path!r} on {asset.name!r} failed: {error.message}", error.code)
        try:
            # Decoding and checking up to MAX_REMOTE_OUTPUT_BYTES takes a fraction of a second: not on the loop
            # that serves every other call.
            listing = await asyncio.to_thread(parse_listing, output.stdout)
        except InvalidListingError as exc:
            raise ToolRaisedFailure(f"{asset.name!r} answered, but not as the listing script does: {exc}",
                                    "PROTOCOL_ERROR") from None
        limit = min(type(self).max_output_bytes or services.max_output_bytes, services.max_output_bytes)
        entries = _fitting(listing.entries, limit)
        truncated = listing.truncated or len(entries) < len(listing.entries)
        header = _header(asset, path, len(entries), truncated)
        return ToolOutput(
            text="\n".join([header, *(entry_line(entry) for entry in entries)]),
            structured={"host": asset.name, "hostname": endpoint.hostname, "path": path,
                        "entries": [entry.as_json() for entry in entries], "truncated": truncated})


async def _find_asset(host: str, context: ToolContext) -> Asset:
    """The asset named `host`, else the one whose hostname it is, ignoring case; ASSET_NOT_FOUND (with close
    names) or AMBIGUOUS_HOST."""
    table = inventory_of(context)
    deadline = call_deadline(context)
    found = await in_inventory(lambda: table.find_host(host, deadline=deadline), context)
    if len(found) == 1:
        return found[0]
    if found:
        names = ", ".join(sorted(asset.name for asset in found))
        raise ToolRaisedFailure(
            f"{host!r} is the hostname of several assets ({names}); call again with one of those names",
            "AMBIGUOUS_HOST")
    close = await in_inventory(lambda: table.close_names(host, deadline=deadline), context)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ToolRaisedFailure(
        f"no asset is named {host!r} or has it as hostname{hint} (asset_search lists the inventory)",
        "ASSET_NOT_FOUND")


async def _credential(asset: Asset, context: ToolContext) -> Credential:
    """The credential the asset's profile names, from the server's sources; MISSING_CREDENTIALS naming it."""
    name = asset.winrm.effective_credential
    resolve = context.services.resolve_credentials
    if resolve is None:  # only offline validation builds services without it, and it runs no call
        raise RuntimeError(f"{context.tool_name} was run by a server that resolves no credentials")
    try:
        return (await resolve([name]))[name]
    except MissingCredentialsError as exc:
        # Where the server looked (paths, the database) goes to the operator's log, not to the caller.
        context.logger.warning("call %s: asset %s: %s", context.call_id, asset.name, exc.message)
        raise ToolRaisedFailure(
            f"the server has no credential {name!r}, which asset {asset.name!r} uses for WinRM. An operator "
            f"provides it as TOOLHOST_CRED_{name.upper()}_USERNAME and _PASSWORD (optionally _DOMAIN) variables, "
            f"{name}.username and {name}.password files in credentials_dir, or with `toolhost credentials set "
            f"{name}`; the server log says where it looked", "MISSING_CREDENTIALS") from None


def _header(asset: Asset, path: str, shown: int, truncated: bool) -> str:
    where = f"{json.dumps(path)} on {asset.name}"
    if shown == 0 and not truncated:
        return f"{where}: empty"
    more = f" (truncated: the directory holds more; at most {MAX_ENTRIES} are listed)" if truncated else ""
    return f"{where}: {shown} entries{more}"


def _fitting(entries: tuple[DirectoryEntry, ...], limit: int) -> tuple[DirectoryEntry, ...]:
    """The first entries whose text and structured output both stay within `limit` bytes, as the server
    measures them (UTF-8; the structured output as json.dumps writes it)."""
    budget = max(limit - _RESERVE_BYTES, limit // 2)
    text_used = structured_used = 0
    for kept, entry in enumerate(entries):
        text_used += len(entry_line(entry).encode("utf-8")) + 1
        structured_used += len(json.dumps(entry.as_json(), ensure_ascii=False).encode("utf-8")) + len(", ")
        if text_used > budget or structured_used > budget:
            return entries[:kept]
    return entries
