"""ListTools: filters and AIP-158 pagination with opaque keyset tokens.

A token holds the last name returned and a digest of the filter and of the caller's roles. Names are the sort
key, so a token stays valid across reloads (it continues after that name in whatever generation serves the next
page); a token used with a different filter, or by a caller with other roles, is refused rather than silently
giving a wrong page. Only the tools the caller may see are listed.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .auth import ANONYMOUS, Caller
from .errors import InvalidPageTokenError, InvalidRequestError
from .model import ToolSpec
from .registry import RegisteredTool, Snapshot

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
# Providers whose agents bring their own file tools, so toolhost's would only compete (PocketDev's rule).
CLI_PROVIDERS = frozenset({"claude_code", "codex"})
CLI_EXCLUDED_CATEGORIES = frozenset({"file_ops"})


@dataclass(frozen=True, slots=True)
class ToolFilter:
    """Every set field must match."""

    platform: str = ""
    category: str = ""
    tags: tuple[str, ...] = ()
    provider: str = ""

    def key(self) -> tuple[str, str, tuple[str, ...], bool]:
        """What decides the result: the provider only matters as CLI or not."""
        return (self.platform, self.category, tuple(sorted(set(self.tags))), self.provider in CLI_PROVIDERS)

    def matches(self, spec: ToolSpec) -> bool:
        return self.predicate()(spec)

    def predicate(self) -> Callable[[ToolSpec], bool]:
        """`matches`, with the filter's fields looked up once: it runs on every tool of a snapshot the first
        time a filter is asked for."""
        platform, category, cli = self.platform, self.category, self.provider in CLI_PROVIDERS
        tags = frozenset(self.tags)

        def matches(spec: ToolSpec) -> bool:
            if platform and spec.platform != platform:
                return False
            if category and spec.category != category:
                return False
            if tags and not tags.issubset(spec.tags):
                return False
            return not (cli and spec.category in CLI_EXCLUDED_CATEGORIES)

        return matches

    def digest(self, visibility: Sequence[str] = ()) -> str:
        """Of the filter and of what decides the caller's view (Caller.visibility)."""
        return hashlib.sha256(json.dumps([self.key(), list(visibility)]).encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class ToolPage:
    tools: Sequence[RegisteredTool]
    next_page_token: str
    total_size: int


def list_tools(
    snapshot: Snapshot, tool_filter: ToolFilter, page_size: int, page_token: str, caller: Caller = ANONYMOUS
) -> ToolPage:
    """One page of the tools matching `tool_filter` that `caller` may see, sorted by name."""
    if page_size < 0:
        raise InvalidRequestError(f"page_size must not be negative (got {page_size}); use 0 for the default of "
                                  f"{DEFAULT_PAGE_SIZE}")
    size = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
    digest = tool_filter.digest(caller.visibility)
    names = _matching_names(snapshot, tool_filter, caller)
    start = Snapshot.position_after(names, _decode_token(page_token, digest)) if page_token else 0
    page_names = names[start:start + size]
    more = start + size < len(names)
    tools = snapshot.tools()
    return ToolPage(
        tools=[tools[n] for n in page_names],
        next_page_token=_encode_token(page_names[-1], digest) if more and page_names else "",
        total_size=len(names),
    )


def _matching_names(snapshot: Snapshot, tool_filter: ToolFilter, caller: Caller) -> tuple[str, ...]:
    rights = caller.permissions
    matches = tool_filter.predicate()
    if rights.unrestricted:
        return snapshot.filtered(tool_filter.key(), matches)
    return snapshot.filtered((tool_filter.key(), rights), lambda spec: matches(spec) and rights.may_see(spec))


def _encode_token(after: str, digest: str) -> str:
    raw = json.dumps({"a": after, "f": digest}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_token(token: str, digest: str) -> str:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
        after, token_digest = data["a"], data["f"]
    # RecursionError: a forged token of deeply nested JSON.
    except (ValueError, KeyError, TypeError, RecursionError):
        raise InvalidPageTokenError("page_token is not one this server issued; start again with an empty "
                                    "page_token") from None
    if not isinstance(after, str) or token_digest != digest:
        raise InvalidPageTokenError("page_token belongs to a different filter or caller; use the same platform, "
                                    "category, tags, provider and credentials as the first page, or start again")
    return after
