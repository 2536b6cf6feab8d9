"""How an intent's pattern is compiled and matched: with RE2, so that no pattern a catalog author writes can stall
the server on a crafted query.

Python's `re` backtracks: `(?:x|x?)+y` took 37 s on 26 characters, and no check of a pattern's shape catches every
such case. RE2 matches in time linear in the query for a given pattern, and has no backreferences, lookarounds,
possessive repeats or atomic groups: a pattern using them is refused at load. Its time is also proportional to
the pattern's compiled size, so a pattern over MAX_PROGRAM_SIZE instructions is refused as well (one of 432,000
instructions took 68 s on a 1,000-character query; the bundled intents compile to 11 to 78). In RE2, `\\d`, `\\w`,
`\\s` and `\\b` are ASCII, where Python's were Unicode: `\\d+` takes "5432", not "٥٤٣٢".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import re2

# Past this many instructions a pattern is refused. 3,000 keeps one match of the longest query (1,000 characters,
# tool_search.MAX_QUERY_CHARACTERS) within about 30 ms however the pattern is written (measured with captures
# that all take part), and lets a pattern hold two Unicode classes: `\p{L}` alone compiles to about 1,200.
MAX_PROGRAM_SIZE: Final = 3000

# The documented semantics: the whole query, ignoring case; `.` also matches a line break, so that a group such
# as `(?P<text>.+)` takes a query of several lines whole.
_OPTIONS: Final = re2.Options()
_OPTIONS.case_sensitive = False
_OPTIONS.dot_nl = True
_OPTIONS.log_errors = False  # RE2 would print each refused pattern to stderr; the catalog problem says it
# The same but case-sensitive: only to find the text every match starts with (see _required_prefix).
_CASE_SENSITIVE: Final = re2.Options()
_CASE_SENSITIVE.dot_nl = True
_CASE_SENSITIVE.log_errors = False
# How much of a match's start RE2 is asked to bound: more than any intent's leading words.
PREFIX_SCAN_CHARACTERS: Final = 64

_NOT_IN_RE2 = ("RE2 syntax is required: backreferences (\\1, (?P=name)), lookarounds ((?=, (?!, (?<=, (?<!), "
               "possessive repeats (a++), atomic groups ((?>...)), conditionals and \\Z are not supported, nor is "
               "a counted repeat over 1000")


class IntentPatternError(ValueError):
    """An intent pattern that cannot be used; the message says why and how to fix it."""


class IntentPattern:
    """One intent's pattern, compiled: `fullmatch` tells whether it matches a whole query, and the text of each
    named group if so."""

    __slots__ = ("_compiled", "group_names", "pattern", "required_prefix")

    def __init__(self, pattern: str) -> None:
        try:
            compiled = re2.compile(pattern, _OPTIONS)
        except re2.error as exc:
            reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else exc
            raise IntentPatternError(f"intent {pattern!r} is not a regular expression toolhost can use ({reason}); "
                                     f"{_NOT_IN_RE2}") from None
        size = compiled.programsize
        if size > MAX_PROGRAM_SIZE:
            raise IntentPatternError(
                f"intent {pattern!r} compiles to {size} instructions, more than the {MAX_PROGRAM_SIZE} an intent "
                "may take (matching costs time in proportion): write it shorter, with fewer counted repeats "
                "(a{50}) and Unicode classes (\\p{L}; `\\S+` or `.+?` take any word)")
        self.pattern = pattern
        self._compiled = compiled
        self.group_names: tuple[str, ...] = tuple(compiled.groupindex)
        self.required_prefix = _required_prefix(pattern)
        """ASCII text, lowercased, that every query this pattern matches starts with, ignoring case (at most
        PREFIX_SCAN_CHARACTERS long; "" if there is none): most intents start with words, so a search of a
        thousand intents passes most of them over without a call into RE2, which costs microseconds."""

    def fullmatch(self, text: str) -> Mapping[str, str | None] | None:
        """Each named group's text (None for a group that took no part) when the pattern matches all of `text`,
        else None."""
        if not may_start(self.required_prefix, text[:PREFIX_SCAN_CHARACTERS]):
            return None
        match = self._compiled.fullmatch(text)
        if match is None:
            return None
        groups: dict[str, str | None] = match.groupdict()
        return groups


def _required_prefix(pattern: str) -> str:
    """The ASCII text, lowercased, that every match of `pattern` starts with, ignoring case ("" if none).

    RE2 bounds the strings a pattern matches (every match m has low <= m <= high), so their common start
    starts every match; asked of the case-sensitive pattern, whose case variants are what the intent matches.
    """
    try:
        low, high = re2.compile(pattern, _CASE_SENSITIVE).possiblematchrange(PREFIX_SCAN_CHARACTERS)
    except re2.error:  # no bound (a pattern starting with `.*`), or a pattern RE2 sizes differently
        return ""
    length = 0
    while length < min(len(low), len(high)) and low[length] == high[length] and low[length] < 0x80:
        length += 1
    prefix: str = low[:length].decode("ascii")
    return prefix.lower()


def may_start(prefix: str, head: str) -> bool:
    """Whether a query starting with `head` (its first PREFIX_SCAN_CHARACTERS) may match a pattern whose
    required_prefix is `prefix`. Only an ASCII start is compared: RE2 also folds k and s with the Kelvin sign
    and the long s."""
    return not prefix or not head.isascii() or head.lower().startswith(prefix)


def compile_intent(pattern: str) -> IntentPattern:
    """`pattern` compiled for matching whole queries, ignoring case; IntentPatternError when RE2 cannot compile
    it or it is too large."""
    return IntentPattern(pattern)
