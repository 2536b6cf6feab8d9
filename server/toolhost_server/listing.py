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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .auth import ANONYMOUS, Caller
from .errors import InvalidPageTokenError, InvalidRequestError
from .model import ToolSpec
from .providers import Provider, provider_named
from .registry import RegisteredTool, Snapshot

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000


@dataclass(frozen=True, slots=True)
class ToolFilter:
    """Every set field must match. A `provider` (providers.PROVIDERS; InvalidRequestError for another name)
    adds its rules: a CLI agent is not offered the file tools, nor the tools `natives_equivalent` says are
    equivalent to one of its own, nor their aliases."""

    platform: str = ""
    category: str = ""
    tags: tuple[str, ...] = ()
    provider: str = ""
    # ToolConflicts.natives_equivalent(): tool name -> the provider tools ("native:Bash") it is equivalent to.
    natives_equivalent: Mapping[str, frozenset[str]] = field(default_factory=dict, compare=False, repr=False)
    _rules: Provider | None = field(default=None, init=False, compare=False, repr=False)
    _hidden: frozenset[str] = field(default=frozenset(), init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        rules = provider_named(self.provider) if self.provider else None
        object.__setattr__(self, "_rules", rules)
        if rules is not None:
            object.__setattr__(self, "_hidden", rules.hidden_tools(self.natives_equivalent))

    @property
    def hidden(self) -> frozenset[str]:
        """The tools the provider has its own equivalent of (their aliases are hidden too)."""
        return self._hidden

    def key(self) -> tuple[str, str, tuple[str, ...], str, frozenset[str]]:
        """What decides the result: the hidden names are in it, so a change of the conflicts is a new key."""
        return (self.platform, self.category, tuple(sorted(set(self.tags))), self.provider, self._hidden)

    def matches(self, spec: ToolSpec) -> bool:
        return self.predicate()(spec)

    def predicate(self) -> Callable[[ToolSpec], bool]:
        """`matches`, with the filter's fields looked up once: it runs on every tool of a snapshot the first
        time a filter is asked for."""
        platform, category, hidden = self.platform, self.category, self._hidden
        excluded = self._rules.excluded_categories if self._rules is not None else frozenset()
        tags = frozenset(self.tags)

        def matches(spec: ToolSpec) -> bool:
            if platform and spec.platform != platform:
                return False
            if category and spec.category != category:
                return False
            if tags and not tags.issubset(spec.tags):
                return False
            if spec.category in excluded:
                return False
            return not (spec.name in hidden or (spec.alias_of and spec.alias_of in hidden))

        return matches

    def digest(self, visibility: Sequence[str] = ()) -> str:
        """Of the filter and of what decides the caller's view (Caller.visibility). Not of the hidden names: a
        token stays valid across a change of the conflicts as it does across a reload."""
        fields = [self.platform, self.category, sorted(set(self.tags)), self.provider]
        return hashlib.sha256(json.dumps([fields, list(visibility)]).encode()).hexdigest()[:16]


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


def matching_tools(snapshot: Snapshot, tool_filter: ToolFilter, caller: Caller) -> list[RegisteredTool]:
    """Every tool matching `tool_filter` that `caller` may see, sorted by name: what all of ListTools' pages
    hold together."""
    tools = snapshot.tools()
    return [tools[name] for name in _matching_names(snapshot, tool_filter, caller)]


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
