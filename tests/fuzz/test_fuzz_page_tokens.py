"""Fuzzing the page tokens of QueryLogs (logs/page_tokens.py) and ListTools (listing.py).

A page token comes back from the caller, who may have changed it: any text is possible, including base64 of
JSON crafted with the right filter digest (the digest is a hash of the filter, not a secret).

What it proves:
- decoding any text, any base64 of any bytes and any base64 of any JSON either gives a sort key or raises
  InvalidPageTokenError, never another exception; a key that decodes is one every reader can use: a UTC time,
  a source name, and positions that fit the 64-bit integers the store's tables hold;
- every key the inspector can issue decodes to itself, and only with the filter digest it was issued for;
- ListTools with any page token gives a page or InvalidPageTokenError; following next_page_token from the
  first page, with any filter, page size and caller, lists exactly the tools that caller sees and the filter
  matches, sorted, each once; and a token used with another filter or by a caller with other roles is refused.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from toolhost_server.auth import ANONYMOUS, AuthMethod, Caller, Permissions, ToolSet
from toolhost_server.catalog.loader import ToolLoader
from toolhost_server.errors import InvalidPageTokenError, InvalidRequestError
from toolhost_server.listing import ToolFilter, list_tools
from toolhost_server.logs.page_tokens import decode_page_token, encode_page_token
from toolhost_server.model import ToolSource, ToolSpec
from toolhost_server.registry import RegisteredTool, Snapshot
from toolhost_server.runners import RunnerSettings

from helpers.json_strategies import json_values, odd_text

DIGEST = "0123456789abcdef"
INT64_MAX = 2**63 - 1


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def forged_tokens(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[str]:
    """Tokens of JSON objects with these fields (the digest among them), each of any value or a plausible one."""
    return st.fixed_dictionaries({key: st.one_of(value, json_values(6)) for key, value in fields.items()}).map(
        lambda data: _b64(json.dumps(data).encode()))


def tokens(forged: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        odd_text(60),
        st.binary(max_size=60).map(_b64),
        st.builds(lambda value: _b64(json.dumps(value).encode()), json_values()),
        st.integers(1, 5000).map(lambda depth: _b64(b"[" * depth)),
        forged,
    )


LOG_TOKENS = tokens(forged_tokens({
    "t": st.integers(), "s": st.one_of(st.sampled_from(["memory", "file", "database"]), odd_text(8)),
    "p": st.lists(st.integers(), max_size=3), "f": st.just(DIGEST)}))


@given(LOG_TOKENS)
@example(_b64(json.dumps({"t": 0, "s": "database", "p": [2**70], "f": DIGEST}).encode())).via(
    "a forged row id past 64 bits decoded, and the database reader then failed on it")
def test_a_log_page_token_decodes_to_a_usable_key_or_is_refused(token: str) -> None:
    try:
        moment, source, position = decode_page_token(token, DIGEST)
    except InvalidPageTokenError as refused:
        refused.message.encode("utf-8")
        return
    assert moment.tzinfo is not None and moment.utcoffset() == timedelta(0)
    assert isinstance(source, str)
    assert all(isinstance(p, int) and not isinstance(p, bool) and 0 <= p <= INT64_MAX for p in position)


SORT_KEYS = st.tuples(
    st.datetimes(timezones=st.just(UTC)), st.sampled_from(["memory", "file", "database"]),
    st.lists(st.integers(0, INT64_MAX), max_size=3).map(tuple))


@given(SORT_KEYS, st.text(st.sampled_from("0123456789abcdef"), min_size=16, max_size=16))
def test_a_log_page_token_decodes_to_its_key_with_its_filter_only(key: tuple[datetime, str, tuple[int, ...]],
                                                                  other: str) -> None:
    token = encode_page_token(key, DIGEST)
    assert decode_page_token(token, DIGEST) == key
    if other != DIGEST:
        try:
            decode_page_token(token, other)
        except InvalidPageTokenError:
            pass
        else:
            raise AssertionError("a token decoded with another filter's digest")


# ListTools: a pool of tools made once, of which each example serves a few.
CATEGORIES = ("network", "system", "file_ops", "utility")


def _pool() -> list[RegisteredTool]:
    loader = ToolLoader([], [], RunnerSettings())
    pool = []
    for index in range(24):
        name = f"{'abcxyz'[index % 6]}{index:02d}{'_.-'[index % 3]}t"
        spec = ToolSpec(name=name, description="A pool tool.", input_schema={"type": "object"},
                        runner={"type": "builtin", "implementation": "echo"}, source=ToolSource.CATALOG,
                        origin="fuzz", category=CATEGORIES[index % 4], platform=("linux", "darwin")[index % 2],
                        tags=("a", "b", "c")[: index % 4])
        pool.append(loader.compile(spec))
    return pool


POOL = _pool()
FILTERS = st.builds(ToolFilter, platform=st.sampled_from(["", "linux", "darwin"]),
                    category=st.sampled_from(["", *CATEGORIES]),
                    tags=st.lists(st.sampled_from(["a", "b", "c"]), max_size=2).map(tuple),
                    provider=st.sampled_from(["", "claude_code", "openai"]))
GLOBS = st.lists(st.sampled_from(["*", "a*", "?0*", "[bx]*", "*t", "nothing"]), max_size=2).map(tuple)
CALLERS = st.one_of(st.just(ANONYMOUS), st.builds(
    lambda roles, listed, called, categories: Caller(
        "fuzz", frozenset(roles), AuthMethod.TOKEN,
        Permissions(list=ToolSet(listed), call=ToolSet(called, frozenset(categories)))),
    st.lists(st.sampled_from(["agent", "viewer"]), min_size=1, max_size=2, unique=True), GLOBS, GLOBS,
    st.lists(st.sampled_from(CATEGORIES), max_size=1)))
SNAPSHOTS = st.lists(st.sampled_from(POOL), unique_by=lambda tool: tool.spec.name, max_size=12).map(
    lambda tools: Snapshot(1, {tool.spec.name: tool for tool in tools}))


@given(SNAPSHOTS, FILTERS, CALLERS, st.integers(-2, 1200), tokens(forged_tokens({"a": odd_text(8), "f": st.text()})))
def test_list_tools_with_any_page_token_gives_a_page_or_a_documented_refusal(
        snapshot: Snapshot, tool_filter: ToolFilter, caller: Caller, page_size: int, token: str) -> None:
    try:
        page = list_tools(snapshot, tool_filter, page_size, token, caller)
    except (InvalidPageTokenError, InvalidRequestError) as refused:
        refused.message.encode("utf-8")
        return
    assert len(page.tools) <= min(page_size or 100, 1000)


@given(SNAPSHOTS, FILTERS, FILTERS, CALLERS, CALLERS, st.integers(1, 5))
def test_following_next_page_token_lists_each_visible_tool_once_in_order(
        snapshot: Snapshot, tool_filter: ToolFilter, other_filter: ToolFilter, caller: Caller, other_caller: Caller,
        page_size: int) -> None:
    rights = caller.permissions
    expected = [name for name in snapshot.names
                if tool_filter.matches(snapshot.tools()[name].spec)
                and (rights.unrestricted or rights.may_see(snapshot.tools()[name].spec))]
    listed: list[str] = []
    token = ""
    tokens_seen = []
    while True:
        page = list_tools(snapshot, tool_filter, page_size, token, caller)
        listed.extend(tool.spec.name for tool in page.tools)
        assert page.total_size == len(expected)
        if not page.next_page_token:
            break
        token = page.next_page_token
        tokens_seen.append(token)
        assert len(listed) <= len(expected), "paging does not end"
    assert listed == expected
    for token in tokens_seen[:1]:
        for changed_filter, changed_caller in ((other_filter, caller), (tool_filter, other_caller)):
            if tool_filter.digest(caller.visibility) == changed_filter.digest(changed_caller.visibility):
                continue  # the same filter and view in other words: the token is theirs
            try:
                list_tools(snapshot, changed_filter, page_size, token, changed_caller)
            except InvalidPageTokenError:
                continue
            raise AssertionError("a token served another filter or another caller's view")
