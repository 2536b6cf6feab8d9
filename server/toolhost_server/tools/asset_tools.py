"""The asset inventory's read tools for agents: asset_count and asset_search (seed 004's required tools).

Both filter as AssetFilter does (the database evaluates it) and read the store in a worker thread, in statements
that stop when the call's time is up. Assets hold no secret: a profile names its credential, whose values never
leave the server's credential sources.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar, Final

from ..assets.model import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, MAX_TEXT_CHARS, Asset, AssetFilter
from ..assets.paging import decode_page_token, encode_page_token
from ..model import Annotations, Example, Parameter
from .asset_inventory import call_deadline, in_inventory, inventory_of, unserved_without_inventory
from .base import Tool, ToolContext, ToolOutput, ToolRaisedFailure, ToolServices

FILTER_NAMES: Final = ("os", "platform", "site", "tag", "name")
# Stored values hold no control character (assets/validation.py), so a filter with one could match nothing; refused
# by the schema, it never reaches the database (PostgreSQL rejects a NUL in a parameter outright).
_NO_CONTROL_CHARACTERS: Final = "^[^\\x00-\\x1f\\x7f]*$"
_FILTER_SCHEMA: Final = {"maxLength": MAX_TEXT_CHARS, "pattern": _NO_CONTROL_CHARACTERS}
_FILTER_PARAMETERS: Final = (
    Parameter("os", "string", "Only assets whose operating system contains this text, ignoring case: \"Windows 10\" "
                              "matches \"Microsoft Windows 10 Pro\".", schema=_FILTER_SCHEMA),
    Parameter("platform", "string", "Only assets of this platform (whole value, ignoring case), e.g. windows.",
              schema=_FILTER_SCHEMA),
    Parameter("site", "string", "Only assets at this site (whole value, ignoring case).", schema=_FILTER_SCHEMA),
    Parameter("tag", "string", "Only assets with this tag (whole tag, ignoring case).", schema=_FILTER_SCHEMA),
    Parameter("name", "string", "Only assets whose name matches this glob, ignoring case: * any characters, ? one "
                                "(ws-* matches ws-042).", schema=_FILTER_SCHEMA),
)
# Tokens hold a name of at most 128 characters and a digest: far below this, base64 included.
MAX_PAGE_TOKEN_CHARS: Final = 512
# The longest name a token may continue after, for sizing the line that carries the token.
_LONGEST_NAME: Final = "z" * 128


class _AssetTool(Tool):
    category = "asset"
    tags = ("asset", "inventory")
    annotations = Annotations(read_only=True, idempotent=True)
    # Each call holds a thread of the server's shared default executor and a store connection while it reads
    # (a PostgreSQL replica pools 5 + 5). The limit is per tool: the two together hold at most 8, and callers
    # past a pool's size wait for a connection (the pool's timeout), which adds latency.
    max_concurrency = 4

    @classmethod
    def unserved_because(cls, services: ToolServices) -> str:
        return unserved_without_inventory(services)


class AssetCount(_AssetTool):
    name = "asset_count"
    display_name = "Asset Count"
    description = (
        "Count assets in inventory: how many machines match every filter given (none: all of them). The output is "
        "the number; the structured output adds the filters it applied. asset_search lists them.")
    parameters = _FILTER_PARAMETERS
    output_schema: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "count": {"type": "integer", "description": "How many assets match."},
            "filters": {"type": "object", "description": "The filters given, by name.",
                        "additionalProperties": {"type": "string"}},
        },
        "required": ["count", "filters"],
    }
    examples = (
        Example("How many Windows 10 machines there are", {"os": "Windows 10"}),
        Example("Assets tagged finance at the berlin site", {"tag": "finance", "site": "berlin"}),
    )
    intents = (r"how many (?P<os>.+?) os assets do we have\??",)

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        table = inventory_of(context)
        filters = _given_filters(arguments)
        deadline = call_deadline(context)
        count = await in_inventory(lambda: table.count(AssetFilter(**filters), deadline=deadline), context)
        return ToolOutput(text=str(count), structured={"count": count, "filters": filters})


class AssetSearch(_AssetTool):
    name = "asset_search"
    display_name = "Asset Search"
    description = (
        "Search and list assets: the machines that match every filter given, sorted by name, a page at a time "
        "(name, hostname, addresses, os, platform, site, tags, and the WinRM profile with the NAME of its "
        "credential; never a credential's value). `total` counts every match; pass `next_page_token` back, with "
        "the same filters, for the next page (empty on the last). A page is cut short to fit the server's "
        "max_output_bytes; the token then continues after the last asset shown.")
    parameters = (
        *_FILTER_PARAMETERS,
        Parameter("page_size", "integer", f"The most assets to return (default {DEFAULT_PAGE_SIZE}).",
                  default=DEFAULT_PAGE_SIZE, schema={"minimum": 1, "maximum": MAX_PAGE_SIZE}),
        Parameter("page_token", "string", "The next_page_token of the previous page (same filters).", default="",
                  schema={"maxLength": MAX_PAGE_TOKEN_CHARS}),
    )
    output_schema: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "assets": {"type": "array", "items": {"type": "object"},
                       "description": "The page's assets: name, hostname, addresses, os, platform, site, tags, "
                                      "winrm {port, ssl, domain, credential, authentication}."},
            "total": {"type": "integer", "description": "How many assets match, over every page."},
            "next_page_token": {"type": "string", "description": "Empty on the last page."},
        },
        "required": ["assets", "total", "next_page_token"],
    }
    examples = (
        Example("Windows 10 machines", {"os": "Windows 10"}),
        Example("Workstations by name, 20 at a time", {"name": "ws-*", "page_size": 20}),
    )

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        table = inventory_of(context)
        filters = _given_filters(arguments)
        where = AssetFilter(**filters)
        after = decode_page_token(arguments["page_token"], where) if arguments["page_token"] else ""
        deadline = call_deadline(context)
        page = await in_inventory(
            lambda: table.search(where, after, int(arguments["page_size"]), deadline=deadline), context)
        assets, next_after, total = page.assets, page.next_after, page.total
        limit = min(type(self).max_output_bytes or context.services.max_output_bytes,
                    context.services.max_output_bytes)
        # Each asset's line and summary are made once: both for sizing the page and for the output.
        lines = [_line(asset) for asset in assets]
        summaries = [asset.summary() for asset in assets]
        kept = _fitting(assets, lines, summaries, _header(len(assets), total, filters), limit, where)
        if kept < len(assets):
            next_after = assets[kept - 1].name.lower()
        token = encode_page_token(where, next_after)
        text = [_header(kept, total, filters), *lines[:kept]]
        if token:
            text.append(_more(token))
        return ToolOutput(text="\n".join(text), structured={
            "assets": summaries[:kept], "total": total, "next_page_token": token})


def _given_filters(arguments: Mapping[str, Any]) -> dict[str, str]:
    """The filters the caller set, by name; an empty one filters nothing, as AssetFilter reads it."""
    return {name: str(arguments[name]) for name in FILTER_NAMES if arguments.get(name)}


# --- the text output and what fits in it --------------------------------------------------------------------------


def _header(shown: int, total: int, filters: Mapping[str, str]) -> str:
    applied = ", ".join(f"{name} {_quoted(value)}" for name, value in filters.items())
    if total == 0:
        return f"no assets match {applied}" if applied else (
            "the inventory holds no assets (toolhost assets import adds them)")
    return f"{shown} of {total} assets" + (f" matching {applied}" if applied else "")


def _line(asset: Asset) -> str:
    parts = [f"hostname {asset.effective_hostname}"]
    if asset.addresses:
        parts.append(f"addresses {', '.join(asset.addresses)}")
    for label, value in (("os", asset.os), ("platform", asset.platform), ("site", asset.site)):
        if value:
            parts.append(f"{label} {_quoted(value)}")
    if asset.tags:
        parts.append("tags " + ", ".join(_quoted(tag) for tag in asset.tags))
    winrm = asset.winrm
    domain = f" domain {_quoted(winrm.domain)}" if winrm.domain else ""
    parts.append(f"winrm {'https' if winrm.ssl else 'http'} port {winrm.effective_port} {winrm.authentication}"
                 f"{domain} credential {_quoted(winrm.effective_credential)}")
    return f"- {asset.name}: " + "; ".join(parts)


def _more(token: str) -> str:
    return f"more: call asset_search again with the same filters and page_token {token}"


def _quoted(value: str) -> str:
    """`value` in double quotes, escaped as JSON: an asset editor's text cannot pass for the output's own words."""
    return json.dumps(value, ensure_ascii=False)


def _fitting(assets: list[Asset], lines: list[str], summaries: list[dict[str, object]], header: str, limit: int,
             where: AssetFilter) -> int:
    """How many of the first `assets` (with their text `lines` and structured `summaries`) keep both outputs within
    `limit` bytes, as the server measures them (UTF-8; the structured output as json.dumps writes it), with room
    for a next page token."""
    if not assets:
        return 0
    longest_token = encode_page_token(where, _LONGEST_NAME)
    # The header only shrinks as the shown count does, and the total does not change: the first page's is an upper
    # bound.
    text_used = _size(header) + 1 + _size(_more(longest_token))
    structured_used = _size(json.dumps(
        {"assets": [], "total": 2**63, "next_page_token": longest_token}, ensure_ascii=False))
    kept = 0
    for line, summary in zip(lines, summaries, strict=True):
        text_used += _size(line) + 1
        structured_used += _size(json.dumps(summary, ensure_ascii=False)) + len(", ")
        if text_used > limit or structured_used > limit:
            break
        kept += 1
    if kept == 0:
        raise ToolRaisedFailure(
            f"asset {assets[0].name!r} alone is larger than this server's max_output_bytes ({limit}); ask the "
            "operator to raise max_output_bytes", "OUTPUT_TOO_LARGE")
    return kept


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


