"""Redaction of JSON-like structures (dicts, lists, tuples of strings, numbers, booleans, None).

Checking a big structure string by string in Python is slow, and most structures hold no secret. So one walk
(`gather`) lists every string of the structure (keys and values) and where it sits; the distinct strings are
joined into one text, and the triggers of every sanitizer and of the key rule are looked for in that text
with `str.find` (C speed, and each repeated key is searched once, not once per record). No trigger: the input
is returned as it is. Else only the strings that contain a trigger are checked, and only the containers that
hold one of those that changed, or a secret key, are rebuilt (with those strings replaced and the values of
secret keys hidden); everything else is shared with the input, never copied or mutated.

Where the joined text cannot stand for the strings (a string holds the NUL separator, or lowercasing changes
a length), the older scheme is used: the structure is serialised with `json.dumps` and the JSON strings around
each trigger are decoded (`strings_with_triggers`).
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Callable, Collection, Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .base import REDACTED

_SCALARS = frozenset({int, float, bool, type(None)})
_CONTAINERS = frozenset({dict, list, tuple})
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
# Joins the distinct strings of a structure into one text to search; a string that holds it is not joined.
_SEPARATOR = "\0"
# Strings looked at together when finding where the few changed ones sit (Gathered.holders).
_RUN = 256
# Beyond these a structure may share containers or contain itself: `gather` then keeps track of them.
_FAST_DEPTH = 100
_FAST_CONTAINERS = 1 << 17
_CHECK_EVERY = 64


def fold(text: str) -> str:
    """`text` with its ASCII letters lowercased and every position kept (what Sanitizer.find gets)."""
    folded = text.lower()
    # A few non-ASCII letters lowercase to two characters; positions must still line up.
    return folded if len(folded) == len(text) else text.translate(_ASCII_LOWER)


@dataclass(slots=True)
class Gathered:
    """Every string of a structure and the container it sits in, from one walk (`gather`).

    `containers` lists the dicts, lists and tuples breadth first, the root first, each object once however
    often it occurs. `strings` holds the keys of each dict (whatever their type) and the string values and
    items of each container, container by container: `containers[i]`'s own entries are
    `strings[starts[i]:starts[i + 1]]` (to the end for the last). `parents[i]` is the index of the container in
    which `containers[i]` was found first (-1 for the root); `shared` lists the other places, as (index, index of
    another container holding it) pairs: a container met twice, or a cycle.
    """

    strings: list[Any] = field(default_factory=list)
    containers: list[Any] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    shared: list[tuple[int, int]] = field(default_factory=list)

    def holders(self, hits: Collection[Any]) -> set[int]:
        """The ids of the containers that hold one of `hits` (as a key, a value or an item), at any depth."""
        more_parents: dict[int, list[int]] = {}
        for index, parent in self.shared:
            more_parents.setdefault(index, []).append(parent)
        marked: set[int] = set()
        starts, parents = self.starts, self.parents
        for position in self._positions(hits):
            pending = [bisect_right(starts, position) - 1]
            while pending:
                index = pending.pop()
                if index >= 0 and index not in marked:
                    marked.add(index)
                    pending.append(parents[index])
                    pending += more_parents.get(index, ())
        return {id(self.containers[index]) for index in marked}

    def _positions(self, hits: Collection[Any]) -> list[int]:
        """Where `hits` occur in `strings`. Hits are few: runs of strings without any are skipped at C speed."""
        if not hits:
            return []
        found = []
        strings = self.strings
        disjoint = frozenset(hits).isdisjoint
        for low in range(0, len(strings), _RUN):
            run = strings[low:low + _RUN]
            if not disjoint(run):
                found += [low + offset for offset, string in enumerate(run) if string in hits]
        return found


def gather(value: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> Gathered:
    """Walk `value` (dicts, lists and tuples, also subclasses) breadth first and list its strings; see
    `Gathered`. Objects of other types (sets, bytes, anything else) are not looked into, as `rebuild` does not
    look into them either.

    A tree (what json.loads makes) is walked as it is. A structure deeper than _FAST_DEPTH or with more than
    _FAST_CONTAINERS containers is walked again keeping track of the containers met, each walked once: one that
    contains itself then ends, and one that shares a container many times over costs what its distinct
    containers cost.
    """
    try:
        return _gather(value, fast=True)
    except _Unusual:
        return _gather(value, fast=False)


class _Unusual(Exception):
    """A structure too deep or too big for the fast walk."""


def _gather(value: Any, fast: bool) -> Gathered:
    found = Gathered(containers=[value], parents=[-1])
    strings, containers, starts, parents = found.strings, found.containers, found.starts, found.parents
    add, extend, start, push, parent = strings.append, strings.extend, starts.append, containers.append, parents.append
    # Every container listed is alive (the structure holds it), so its id is not reused meanwhile.
    met = None if fast else {id(value): 0}
    scalars, plain = _SCALARS, _CONTAINERS
    depth, depth_ends, check_at = 0, 1, 1
    # One loop, no call per container: `containers` grows behind the loop as containers are found inside.
    for index, container in enumerate(containers):
        if index == check_at:  # at the start of each level and every _CHECK_EVERY containers
            if index == depth_ends:
                depth, depth_ends = depth + 1, len(containers)
            if fast and (depth > _FAST_DEPTH or len(containers) > _FAST_CONTAINERS):
                raise _Unusual
            check_at = min(depth_ends, index + _CHECK_EVERY)
        start(len(strings))
        if type(container) is dict or isinstance(container, dict):
            extend(container)
            items: Iterable[Any] = container.values()
        else:
            items = container
        for item in items:
            kind = type(item)
            if kind is str:
                add(item)
            elif kind in scalars:
                continue
            elif kind in plain or isinstance(item, dict | list | tuple):
                if met is not None:
                    first = met.setdefault(id(item), len(containers))
                    if first != len(containers):
                        found.shared.append((first, index))
                        continue
                push(item)
                parent(index)
            elif isinstance(item, str):
                add(item)
    return found


def strings_with_triggers_in(strings: Iterable[Any], exact: Iterable[str], folded: Iterable[str]) -> set[str] | None:
    """The distinct strings among `strings` that contain a trigger: an `exact` one as it is, a `folded` one
    (lowercase) in the string folded (see `fold`). Items that are no strings are ignored.

    The distinct strings are joined with NUL into one text, searched once per trigger. None when that text
    cannot stand for the strings: one of them holds a NUL, or lowercasing changes a length (the caller then
    uses `strings_with_triggers` on the structure's JSON text).
    """
    distinct = set(strings)
    try:
        text = _SEPARATOR.join(distinct)
    except TypeError:  # dict keys that are no strings
        distinct = {string for string in distinct if isinstance(string, str)}
        text = _SEPARATOR.join(distinct)
    if not distinct:
        return set()
    lowered = text.lower()
    if text.count(_SEPARATOR) != len(distinct) - 1 or len(lowered) != len(text):
        return None
    found: set[str] = set()
    for haystack, needles in ((text, exact), (lowered, folded)):
        for needle in needles:
            at = haystack.find(needle)
            while at >= 0:
                # A NUL occurs in no string, so the nearest ones around a match delimit its string (a needle
                # holding a NUL matches across strings only: the string where it starts is checked in vain).
                start = text.rfind(_SEPARATOR, 0, at) + 1
                end = text.find(_SEPARATOR, at)
                if end < 0:
                    found.add(text[start:])
                    break
                found.add(text[start:end])
                at = haystack.find(needle, end + 1)
    return found


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


def rebuild(value: Any, strings: Mapping[str, str], secret_keys: Container[Any],
            holders: Container[int] | None = None) -> Any:
    """`value` with every string `s` replaced by `strings.get(s, s)` and the value of each secret key hidden.

    A container whose contents all come back identical is returned itself; changed dicts, lists and
    tuples are copied as plain dict, list and tuple. Objects other than those and strings are returned
    as they are. With `holders` (ids, see `Gathered.holders`), a container whose id is not in it is known
    to hold nothing to change and is returned without a look inside. A container that contains itself and
    something to change raises RecursionError.
    """
    lookup = strings.get
    # A container met again (shared) comes back as the same result: walked once, and shared in the result too.
    done: dict[int, Any] = {}

    # The hot loops test exact types first (what json.loads produces) and copy a container only once
    # something in it changes: most of a structure is walked, very little of it rebuilt.
    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return lookup(value, value)
        key = id(value)
        if holders is not None and key not in holders:
            return value
        if key in done:
            return done[key]
        if isinstance(value, dict):
            result: Any = walk_dict(value)
        elif isinstance(value, list | tuple):
            result = walk_sequence(value)
        else:
            return value
        done[key] = result
        return result

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
                elif kind in _SCALARS or (kind in _CONTAINERS and holders is not None and id(item) not in holders):
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
            elif kind in _SCALARS or (kind in _CONTAINERS and holders is not None and id(item) not in holders):
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
