"""`name=value` assignments in free text whose name is a secret by the key rule (see `keys`).

The forms of config files, command lines, query strings, headers, JSON and PHP/Ruby arrays:

    DB_PASSWORD=hunter22            -> DB_PASSWORD=[REDACTED]
    --api-key abc                   -> kept (no `=` or `:`: too close to prose to redact)
    password: "two words"           -> password: "[REDACTED]"
    {"client_secret": "s3"}         -> {"client_secret": "[REDACTED]"}
    {\\"token\\": \\"s3\\"}             -> {\\"token\\": \\"[REDACTED]\\"}   (JSON inside a JSON string)
    {"metrics_token": 7}            -> {"metrics_token": "[REDACTED]"}   (a JSON literal: still JSON)
    {'token': 5}, {token: 5}        -> {'token': [REDACTED]}, {token: [REDACTED]}   (the bracket stays)
    {\\"pin_token\\": null}           -> {\\"pin_token\\": \\"[REDACTED]\\"}
    'auth_key' => 'abc'             -> 'auth_key' => '[REDACTED]'
    ?access_token=abc&page=2        -> ?access_token=[REDACTED]&page=2
    Authorization: Basic dXNlcjpw   -> Authorization: Basic [REDACTED]
    max_tokens=512, token_count: 7  -> kept (not secret names)

An unquoted value ends at whitespace or `"',;&<>`; a quoted one at its closing quote or the end of the
line (a value cut off by truncation is still hidden). Under a double-quoted JSON key, a number, true, false
or null becomes a JSON string, where a bare [REDACTED] would leave text that no longer parses; under any other
key such a literal is replaced alone, so that the brackets after it (`{'token': 5}`) stay.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .base import REDACTED, ReplacedSpan, Sanitizer, SanitizerSettings, Span
from .keys import MAX_NAME_LENGTH

_NAME_CHARS = re.compile(r"[A-Za-z0-9_.\-]*")
_AFTER_NAME = re.compile(
    r"""(?P<quote>\\?["']?)[ \t]*(?P<separator>=>|:=|[:=])[ \t]*(?:"""
    r"""\\"(?P<escaped>(?:[^"\\\n]|\\(?!"))*)"""  # \"value\" : JSON text inside a JSON string
    r"""|"(?P<double>(?:[^"\\\n]|\\.)*)"""
    r"""|'(?P<single>[^'\n]*)"""
    r"""|(?P<scheme>(?:basic|bearer|digest|negotiate|token)[ \t]+)?(?P<bare>[^\s"',;&<>]+))""",
    re.IGNORECASE | re.ASCII,
)
_VALUE_GROUPS = ("escaped", "double", "single", "bare")
# A bare value that is a JSON number or literal (or the NaN and Infinity Python's json writes), then only what may
# close it: brackets, and inside a JSON string the escapes \n \r \t. Anything else and the value is no JSON; it is
# then hidden whole as before, so that no character of a secret that merely starts with digits is given back.
_JSON_LITERAL = re.compile(
    r"(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null|NaN|-?Infinity)(?:[}\]]|\\[nrt])*")


def _name_length(text: str, at: int) -> int:
    """How many name characters `text` has from `at` (at most one more than a name may have)."""
    match = _NAME_CHARS.match(text, at, at + MAX_NAME_LENGTH + 1)
    return match.end() - at if match else 0


class AssignmentSanitizer(Sanitizer):
    """Finds the values of `name=value` / `name: value` / `"name": "value"` where `name` is secret."""

    def __init__(self, settings: SanitizerSettings) -> None:
        self._rule = settings.secret_keys
        self.folded_triggers = settings.secret_keys.trigger_words

    def find(self, text: str, folded: str) -> Iterable[Span]:
        spans: list[Span] = []
        seen: set[int] = set()
        for word in self.folded_triggers:
            at = folded.find(word)
            while at >= 0:
                end = self._assignment_at(text, at, seen, spans)
                at = folded.find(word, max(end, at + 1))
        return spans

    def _assignment_at(self, text: str, at: int, seen: set[int], spans: list[Span]) -> int:
        """Add the value of the assignment whose name contains position `at`; where to search on."""
        # Capped: longer runs are no names (base64 blobs), and a blob full of `key` must stay linear.
        window = max(0, at - MAX_NAME_LENGTH - 1)
        start = at - _name_length(text[window:at][::-1], 0)
        end = at + _name_length(text, at)
        if start in seen:
            return end
        seen.add(start)
        if end - start > MAX_NAME_LENGTH or not self._rule.is_secret(text[start:end]):
            return end
        match = _AFTER_NAME.match(text, end)
        if match is None:
            return end
        quote = match.group("quote")
        literal = _JSON_LITERAL.fullmatch(text, *match.span("bare")) \
            if match.group("bare") and not match.group("scheme") else None
        if literal is not None:
            if quote in ('"', '\\"') and match.group("separator") == ":" \
                    and text.startswith(quote, start - len(quote)):
                spans.append(ReplacedSpan(*literal.span(1), f"{quote}{REDACTED}{quote}"))
            else:
                # A Python repr or a YAML flow map ({'token': 5}, {token: 5}): the literal alone, so that the
                # brackets closing the mapping stay.
                spans.append(literal.span(1))
            return match.end()
        for group in _VALUE_GROUPS:
            if match.group(group):
                spans.append(match.span(group))
                break
        return match.end()
