"""Redaction of JSON-like structures (dicts, lists, tuples of strings, numbers, booleans, None).

Walking a big structure string by string in Python is slow, and most structures hold no secret. So the
structure is first serialised with `json.dumps` (C speed) and the triggers of every sanitizer and of the
key rule are looked for in that text with `str.find`. No trigger: the input is returned as it is. Else
only the JSON strings that contain a trigger are decoded and checked, and the structure is rebuilt with
those strings replaced and the values of secret keys hidden; containers with nothing to change inside
are shared with the input, never copied or mutated.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Container, Iterable, Mapping
from typing import Any

from .base import REDACTED

_SCALARS = frozenset({int, float, bool, type(None)})
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def fold(text: str) -> str:
    """`text` with its ASCII letters lowercased and every position kept (what Sanitizer.find gets)."""
    folded = text.lower()
    # A few non-ASCII letters lowercase to two characters; positions must still line up.
    return folded if len(folded) == len(text) else text.translate(_ASCII_LOWER)


def json_text(value: Any) -> str | None:
    """`value` as JSON text, or None when it is not JSON-like enough to serialise (cycles, odd keys)."""
    try:
        # Objects json cannot encode become null: `rebuild` leaves them alone as well.
        return json.dumps(value, ensure_ascii=False, default=lambda _: None)
    except (TypeError, ValueError):
        return None


def strings_with_triggers(text: str, exact: Iterable[str], folded: Iterable[str]) -> set[str] | None:
    """The decoded JSON strings (keys and values) of `text` that contain a trigger.

    `exact` triggers are looked for as they are, `folded` ones in the folded text; both must already be
    JSON-escaped. None when a string around a trigger cannot be decoded (the caller then walks everything).
    """
    lowered = fold(text)
    escaped_quotes = '\\"' in text
    found: dict[str, str] = {}  # raw JSON string -> decoded
    for haystack, needles in ((text, exact), (lowered, folded)):
        for needle in needles:
            if not _collect(text, haystack, needle, found, escaped_quotes):
                return None
    return set(found.values())


def _collect(text: str, haystack: str, needle: str, found: dict[str, str], escaped_quotes: bool) -> bool:
    """Add to `found` every JSON string of `text` in which `haystack` has `needle`; False if one is unreadable.

    The same keys recur in every record of a list, so a string seen twice is counted in one C-speed
    pass, and the search stops as soon as the counted and visited strings hold every occurrence.
    """
    total = -1
    accounted = 0
    visits: dict[str, int] = {}
    at = haystack.find(needle)
    while at >= 0:
        start, end = _enclosing_string(text, at)
        if start < 0 or end < 0:
            return False
        raw = text[start:end + 1]
        if raw not in found:
            try:
                string = json.loads(raw)
            except ValueError:
                return False
            found[raw] = string if isinstance(string, str) else ""
        times = visits.get(raw, 0)
        if times >= 0:
            each = haystack.count(needle, start, end + 1) or 1
            if times == 1 and _countable(text, raw, needle, escaped_quotes):
                if total < 0:
                    total = haystack.count(needle)
                accounted += (text.count(raw) - 1) * each
                visits[raw] = -1
            else:
                accounted += each
                visits[raw] = times + 1
            if accounted == total:
                return True
        # The whole string is checked anyway: no need to find the needle in it again.
        at = haystack.find(needle, end + 1)
    return True


def _countable(text: str, raw: str, needle: str, escaped_quotes: bool) -> bool:
    """Whether `text.count(raw)` counts exactly the occurrences of the JSON string `raw` in `text`.

    It would also count a match starting at an escaped quote (inside another string) or at a closing
    quote (a string whose text starts with the `, ` or `: ` that follows one); and a needle holding a
    quote could be counted across two strings.
    """
    if '"' in needle or raw[1:2] in ',:]}"':
        return False
    return not escaped_quotes or ("\\" + raw) not in text


def _enclosing_string(text: str, at: int) -> tuple[int, int]:
    """The positions of the quotes around position `at` of JSON `text` (-1 when there is none).

    Inside a string every quote is escaped, so the nearest unescaped quotes are its own. A position
    outside any string (a trigger made of digits matching a number) yields the gap between two strings,
    which decodes to a harmless text that matches nothing in the structure.
    """
    start = text.rfind('"', 0, at)
    while start > 0 and text[start - 1] == "\\" and _escaped(text, start):
        start = text.rfind('"', 0, start)
    end = text.find('"', at)
    while end > 0 and text[end - 1] == "\\" and _escaped(text, end):
        end = text.find('"', end + 1)
    return start, end


def _escaped(text: str, quote: int) -> bool:
    backslashes = 0
    while quote - backslashes > 0 and text[quote - backslashes - 1] == "\\":
        backslashes += 1
    return backslashes % 2 == 1


def rebuild(value: Any, strings: Mapping[str, str], secret_keys: Container[Any]) -> Any:
    """`value` with every string `s` replaced by `strings.get(s, s)` and the value of each secret key hidden.

    A container whose contents all come back identical is returned itself; changed dicts, lists and
    tuples are copied as plain dict, list and tuple. Objects other than those and strings are returned
    as they are.
    """
    lookup = strings.get

    # The hot loops test exact types first (what json.loads produces) and copy a container only once
    # something in it changes: most of a structure is walked, very little of it rebuilt.
    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return lookup(value, value)
        if isinstance(value, dict):
            return walk_dict(value)
        if isinstance(value, list | tuple):
            return walk_sequence(value)
        return value

    def walk_dict(mapping: dict[Any, Any]) -> dict[Any, Any]:
        copy: dict[Any, Any] | None = None
        renamed: dict[str, str] | None = None
        for key, item in mapping.items():
            if key in secret_keys:
                new_item = item if type(item) is str and item == REDACTED else REDACTED
            else:
                kind = type(item)
                if kind is str:
                    new_item = lookup(item, item)
                elif kind in _SCALARS:
                    new_item = item
                else:
                    new_item = walk(item)
            if new_item is not item:
                if copy is None:
                    copy = dict(mapping)
                copy[key] = new_item
            if type(key) is str or isinstance(key, str):
                new_key = lookup(key, key)
                if new_key is not key:
                    renamed = renamed or {}
                    renamed[key] = new_key
        result = mapping if copy is None else copy
        if renamed:
            return {renamed.get(key, key): item for key, item in result.items()}
        return result

    def walk_sequence(sequence: list[Any] | tuple[Any, ...]) -> list[Any] | tuple[Any, ...]:
        copy: list[Any] | None = None
        for index, item in enumerate(sequence):
            kind = type(item)
            if kind is str:
                new_item = lookup(item, item)
            elif kind in _SCALARS:
                continue
            else:
                new_item = walk(item)
            if new_item is not item:
                if copy is None:
                    copy = list(sequence)
                copy[index] = new_item
        if copy is None:
            return sequence
        return copy if isinstance(sequence, list) else tuple(copy)

    return walk(value)


class LazyStrings(dict[str, str]):
    """A `strings` mapping for `rebuild` that redacts each string when first asked (no pre-scan possible)."""

    def __init__(self, redact: Callable[[str], str]) -> None:
        super().__init__()
        self._redact = redact

    def get(self, key: str, default: str | None = None) -> str:  # type: ignore[override]
        found = dict.get(self, key)
        if found is None:
            found = self[key] = self._redact(key)
        return found


class LazySecretKeys:
    """A `secret_keys` container for `rebuild` that applies the key rule to each name asked about."""

    def __init__(self, is_secret: Callable[[str], bool]) -> None:
        self._is_secret = is_secret

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._is_secret(name)
