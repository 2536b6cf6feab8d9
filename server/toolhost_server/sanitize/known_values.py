"""Known secret values (the credentials the server resolved) found wherever they appear, also encoded.

Each value is searched as is, base64-encoded (standard and URL-safe alphabets, at each of the three
byte alignments a value can have inside a longer encoded text, and wrapped in lines as base64(1), PEM and
MIME write it), percent-encoded (`quote`, `quote_plus`, upper- and lowercase hex), JSON-escaped, inside
Python's repr of it or of its UTF-8 bytes (`%r` in a log call), and as the hex of its UTF-8 bytes (`xxd -p`,
`bytes.hex()`; lower- and uppercase). Values shorter than MIN_KNOWN_VALUE_LENGTH are refused: `admin` or
`1234` would also hide ordinary words and numbers wherever they occur.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Sequence
from urllib.parse import quote, quote_plus

from .base import Sanitizer, SanitizerSettings, Span

MIN_KNOWN_VALUE_LENGTH = 8

_PERCENT_ESCAPE = re.compile(r"%[0-9A-F]{2}")


def check_known_value(value: str) -> None:
    """Raise ValueError when `value` cannot be redacted safely. The message never contains the value."""
    if not isinstance(value, str):
        raise ValueError(f"a known secret value must be a string, not {type(value).__name__}")
    if len(value) < MIN_KNOWN_VALUE_LENGTH:
        raise ValueError(
            f"a known secret value of {len(value)} characters is too short to match safely (minimum "
            f"{MIN_KNOWN_VALUE_LENGTH}): replacing it everywhere would also hide ordinary text")


def base64_fragments(data: bytes) -> set[str]:
    """The base64 substrings that any encoding of a text containing `data` contains.

    Encoded in a longer text, `data` may start at byte 0, 1 or 2 of a 3-byte group. For each offset,
    only the characters whose 6 bits all come from `data` are the same whatever surrounds it.
    """
    fragments = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data).decode("ascii")
        first = -(-8 * offset // 6)  # the first character that holds no bit of the preceding bytes
        last = 8 * (offset + len(data)) // 6  # characters from here on hold bits of what follows
        stable = encoded[first:last]
        fragments.add(stable)
        fragments.add(stable.replace("+", "-").replace("/", "_"))
    return fragments


def wrap_triggers(fragment: str) -> set[str]:
    """Substrings of `fragment` that each of its wrapped forms keeps whole. Lines are at least 64 characters
    (PEM; MIME and base64(1) use 76), so a fragment is broken at most once per 64 characters: its first or its
    last half survives one break, and of its 8-character pieces one survives any number."""
    half = -(-len(fragment) // 2)
    found = {fragment[:half], fragment[-half:]}
    found.update(fragment[start:start + 8] for start in range(0, len(fragment) - 7, 8))
    return found


def wrapped_pattern(fragment: str) -> re.Pattern[str]:
    """`fragment` with a line break (LF or CRLF) allowed between any two of its characters."""
    return re.compile(r"(?:\r?\n)?".join(map(re.escape, fragment)))


def variants(value: str) -> set[str]:
    """Every form of `value` that is searched for."""
    data = value.encode("utf-8")
    found = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1], data.hex(),
             data.hex().upper()}
    # Python's repr, as `%r` in a log call or a printed container shows it: a str's, escaped to ASCII or not, and
    # a bytes' (its UTF-8 bytes as \x escapes).
    found |= {repr(value)[1:-1], ascii(value)[1:-1], repr(data)[2:-1]}
    found |= base64_fragments(data)
    for encoded in (quote(value, safe=""), quote(value), quote_plus(value, safe=""), quote_plus(value)):
        found.add(encoded)
        found.add(_PERCENT_ESCAPE.sub(lambda escape: escape.group().lower(), encoded))
    return found


class KnownValueSanitizer(Sanitizer):
    """Finds the known secret values of the server's configuration and of the current call."""

    def __init__(self, settings: SanitizerSettings) -> None:
        self._values: tuple[str, ...] = ()
        self._variants: tuple[str, ...] = ()
        self._fragments: tuple[str, ...] = ()
        self._wrapped: tuple[re.Pattern[str], ...] = ()
        self._wrap_triggers: tuple[str, ...] = ()
        self._add(settings.known_values)

    @property
    def longest(self) -> int:
        """The length of the longest form searched for (0 when there is none)."""
        return max(map(len, self._variants), default=0)

    def with_values(self, values: Sequence[str]) -> Sanitizer:
        derived = KnownValueSanitizer.__new__(KnownValueSanitizer)
        derived._values, derived._variants = self._values, self._variants
        derived._fragments, derived._wrapped = self._fragments, self._wrapped
        derived._wrap_triggers = self._wrap_triggers
        derived._add(values)
        return derived

    def _add(self, values: Iterable[str]) -> None:
        new = [value for value in dict.fromkeys(values) if value not in self._values]
        for value in new:
            check_known_value(value)
        found = set(self._variants)
        fragments = [fragment for value in new for fragment in base64_fragments(value.encode("utf-8"))]
        for value in new:
            found |= variants(value)
        self._values += tuple(new)
        # Longest first: a variant containing another is then found before it (the spans merge anyway).
        self._variants = tuple(sorted(found, key=len, reverse=True))
        self._fragments += tuple(fragments)
        self._wrapped += tuple(map(wrapped_pattern, fragments))
        triggers = {trigger for fragment in self._fragments for trigger in wrap_triggers(fragment)}
        self._wrap_triggers = tuple(sorted(triggers))
        self.exact_triggers = (*self._variants, *sorted(triggers - found))

    def find(self, text: str, folded: str) -> Iterable[Span]:
        spans = []
        for variant in self._variants:
            start = text.find(variant)
            while start >= 0:
                spans.append((start, start + len(variant)))
                start = text.find(variant, start + 1)
        # Base64 wrapped in lines may hold a value's fragment split by a line break; the patterns scan the
        # text only when it holds a piece that every wrapped form keeps (a few fast substring searches).
        if "\n" in text and any(trigger in text for trigger in self._wrap_triggers):
            for pattern in self._wrapped:
                spans.extend(found.span() for found in pattern.finditer(text))
        return spans
