"""How an intent's regular expression is compiled, and the shapes of pattern refused at load.

Intent patterns come from catalog authors and run on callers' text, in the event loop, with the standard `re`
module (no match timeout; the `regex` module, which has one, is not a dependency). A query is at most 1,000
characters (tool_search.MAX_QUERY_CHARACTERS), which bounds a linear or polynomial pattern but not an exponential
one, so the textbook exponential shape, a repeat inside a repeat (`(a+)+`, `(\\w*\\s?)*`), is refused here with a
way to write it instead. That is a heuristic: alternatives that overlap inside a repeat (`(a|a)*`) still pass.
"""

from __future__ import annotations

import re
from typing import Any

# Whole-query matches (fullmatch) ignoring case; `.` also matches a line break, so that a group such as
# `(?P<text>.+)` takes a query of several lines whole.
INTENT_FLAGS = re.IGNORECASE | re.DOTALL

try:  # the parser `re` itself uses; private, so the check is skipped where it is gone
    from re import _constants as _sre_constants  # type: ignore[attr-defined]
    from re import _parser as _sre_parser  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python versions that have moved it
    _sre_parser = _sre_constants = None


class IntentPatternError(ValueError):
    """An intent pattern that cannot be used; the message says why and how to fix it."""


def compile_intent(pattern: str) -> re.Pattern[str]:
    """`pattern` compiled with INTENT_FLAGS; IntentPatternError when it is not a regular expression or nests
    unbounded repeats."""
    try:
        compiled = re.compile(pattern, INTENT_FLAGS)
    except (re.error, OverflowError, RecursionError) as exc:  # a{4294967296} is an OverflowError
        raise IntentPatternError(f"intent {pattern!r} is not a valid regular expression: {exc}") from exc
    if _sre_parser is not None and _nests_repeats(_sre_parser.parse(pattern), outer=""):
        raise IntentPatternError(
            f"intent {pattern!r} repeats a group that itself repeats (such as `(a+)+` or `(\\w+\\s?)*`), which "
            "can take exponential time on a crafted query; repeat one character class instead (`[\\w\\s]+`) or "
            "make the inner repeat possessive (`\\w++`)")
    return compiled


def _nests_repeats(items: Any, outer: str) -> bool:
    """Whether a parsed pattern repeats something of varying length inside a repeat in a way that backtracks
    exponentially: a repeat of varying count inside an unbounded one (`(a{1,2})*`; an optional `?` passes), an
    unbounded one inside any repeat of more than once (`(a+){2,9}`). `outer` is the repeat around `items`: "",
    "bounded" or "unbounded". A short bounded repeat in a bounded one, such as an address's `(\\d{1,3}\\.){3}`,
    passes."""
    constants = _sre_constants
    for op, value in items:
        if op in (constants.MAX_REPEAT, constants.MIN_REPEAT):
            least, most, body = value
            unbounded = most == constants.MAXREPEAT
            if (outer == "unbounded" and least != most and most > 1) or (outer and unbounded):
                return True
            inner = "unbounded" if unbounded or outer == "unbounded" else "bounded" if most > 1 or outer else ""
            if _nests_repeats(body, inner):
                return True
        elif op == constants.SUBPATTERN:
            if _nests_repeats(value[3], outer):
                return True
        elif op == constants.BRANCH:
            if any(_nests_repeats(branch, outer) for branch in value[1]):
                return True
        elif op in (constants.ASSERT, constants.ASSERT_NOT):
            if _nests_repeats(value[1], outer):
                return True
        elif op == constants.GROUPREF_EXISTS and any(
                branch is not None and _nests_repeats(branch, outer) for branch in value[1:]):
            return True
        # POSSESSIVE_REPEAT and ATOMIC_GROUP never backtrack into themselves: whatever they hold is safe.
    return False
