"""The Redactor: every sanitizer and the secret-key rule behind one object the server builds once."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from .base import REDACTED, RedactionResult, ReplacedSpan, Sanitizer, SanitizerSettings, Span, replacement_of
from .discovery import sanitizer_classes
from .keys import SecretKeyRule
from .structure import (
    LazySecretKeys,
    LazyStrings,
    fold,
    gather,
    json_text,
    rebuild,
    strings_with_triggers,
    strings_with_triggers_in,
)

# The characters tokens, keys, passwords in URLs and their base64 or percent-encoded forms are made of.
_TRAILING_TOKEN = re.compile(r"[A-Za-z0-9+/=_.~%-]*\Z")
# How far back a cut-off token is looked for: longer runs are data (a minified document), not a secret.
_MAX_TOKEN = 16 * 1024
# Texts up to this long are first searched for every trigger at once, with one regular expression: most are
# short and hold none (an echo's output, a tool name, a log message), and running each sanitizer's own search
# cost several times more. Longer texts go straight to the sanitizers, whose str.find beats the expression.
_PRECHECK_MAX_CHARS = 4096


class Redactor:
    """Replaces secrets with REDACTED in text and in JSON-like structures, without mutating the input.

    Built once from configuration; `with_values` derives a per-call redactor cheaply:

        redactor = Redactor(extra_secret_keys=["pin"], known_values=[server_wide_secret])
        call_redactor = redactor.with_values(credentials_resolved_for_this_call)
        output = call_redactor.redact_text(outcome.output)          # RedactionResult[str]
        structured = call_redactor.redact_value(outcome.structured)  # RedactionResult[Any]
        redacted = output.redacted or structured.redacted

    Known values shorter than MIN_KNOWN_VALUE_LENGTH and extra keys without letters raise ValueError
    (at construction, or from `with_values`). Thread-safe: nothing changes after construction.
    """

    __slots__ = ("_exact", "_folded", "_folded_all", "_json_exact", "_json_folded", "_precheck", "_rule",
                 "_sanitizers", "longest_trigger")

    def __init__(self, extra_secret_keys: Iterable[str] = (), known_values: Iterable[str] = ()) -> None:
        rule = SecretKeyRule(_many(extra_secret_keys, "extra_secret_keys"))
        settings = SanitizerSettings(rule, _many(known_values, "known_values"))
        self._setup(rule, tuple(cls(settings) for cls in sanitizer_classes()))

    def _setup(self, rule: SecretKeyRule, sanitizers: tuple[Sanitizer, ...]) -> None:
        self._rule = rule
        self._sanitizers = sanitizers
        self._exact = tuple(dict.fromkeys(t for s in sanitizers for t in s.exact_triggers))
        self._folded = tuple(dict.fromkeys(t for s in sanitizers for t in s.folded_triggers))
        # In a structure, secret keys must be found too.
        self._folded_all = tuple(dict.fromkeys((*self._folded, *rule.trigger_words)))
        # In a structure's JSON text (the fallback of redact_value), strings appear escaped.
        self._json_exact = tuple(dict.fromkeys(json.dumps(t, ensure_ascii=False)[1:-1] for t in self._exact))
        self._json_folded = tuple(dict.fromkeys(json.dumps(t, ensure_ascii=False)[1:-1] for t in self._folded_all))
        self.longest_trigger = max(map(len, self._exact), default=0)
        """The length of the longest literal secret (known value form) this redactor looks for."""
        self._precheck: _TriggerPrecheck | None = None  # built on first use: with_values must stay cheap

    def with_values(self, values: Iterable[str]) -> Redactor:
        """A redactor that also hides `values` (e.g. the credentials one call resolved), in every form."""
        added: Sequence[str] = _many(values, "values")
        if not added:
            return self
        derived = Redactor.__new__(Redactor)
        derived._setup(self._rule, tuple(sanitizer.with_values(added) for sanitizer in self._sanitizers))
        return derived

    def is_secret_key(self, name: str) -> bool:
        """Whether a value stored under `name` is hidden whole (the rule is in `keys`)."""
        return self._rule.is_secret(name)

    def safe_end(self, text: str) -> int:
        """Where to end `text`, which a size limit cut off, so that no secret survives as its first part.

        Before the trailing run of token characters (a key, a JWT, the password of a URL, cut anywhere,
        is no longer recognisable by its shape) and before any ending that begins a known value.
        """
        window = max(0, len(text) - _MAX_TOKEN)
        match = _TRAILING_TOKEN.search(text, window)
        end = match.start() if match else len(text)
        for form in self._exact:
            # Only where the form's first character stands can an ending begin it: look there, earliest first.
            start = text.find(form[0], max(0, len(text) - len(form) + 1), end)
            while start != -1 and not form.startswith(text[start:]):
                start = text.find(form[0], start + 1, end)
            if start != -1:
                end = start
        return end

    def find_spans(self, text: str) -> list[Span]:
        """The secrets of `text`: sorted, non-overlapping spans (empty for the common secret-free text)."""
        if len(text) <= _PRECHECK_MAX_CHARS:
            precheck = self._precheck
            if precheck is None:
                precheck = self._precheck = _TriggerPrecheck(self._exact, self._folded)
            if not precheck.may_hold_secret(text):
                return []
        folded = fold(text)
        spans: list[Span] = []
        for sanitizer in self._sanitizers:
            spans.extend(sanitizer.find(text, folded))
        return _merge(text, spans) if spans else spans

    def redact_text(self, text: str) -> RedactionResult[str]:
        """`text` with every secret replaced by REDACTED."""
        spans = self.find_spans(text)
        if not spans:
            return RedactionResult(text, False)
        return RedactionResult(replace_spans(text, spans), True)

    def redact_value(self, value: Any) -> RedactionResult[Any]:
        """A JSON-like `value` with secrets hidden: values of secret keys whole, strings as in redact_text.

        Dicts, lists and tuples are walked; other objects than those, strings, numbers, booleans and None
        are left as they are. Parts with nothing to hide are shared with the input, not copied.
        """
        if isinstance(value, str):
            return self.redact_text(value)
        if not isinstance(value, dict | list | tuple):
            return RedactionResult(value, False)
        found = gather(value)
        candidates = strings_with_triggers_in(found.strings, self._exact, self._folded_all)
        if candidates is None:
            return self._redact_value_as_json(value)
        replacements, secret_keys = self._check(candidates)
        if not replacements and not secret_keys:
            return RedactionResult(value, False)
        new = rebuild(value, replacements, secret_keys, found.holders(replacements.keys() | secret_keys))
        return RedactionResult(new, new is not value)

    def _redact_value_as_json(self, value: Any) -> RedactionResult[Any]:
        """redact_value the older way, for strings `strings_with_triggers_in` cannot join: by the JSON text."""
        text = json_text(value)
        candidates = None if text is None else strings_with_triggers(text, self._json_exact, self._json_folded)
        if candidates is None:
            new = rebuild(value, LazyStrings(self._redact_string), LazySecretKeys(self._rule.is_secret))
            return RedactionResult(new, new is not value)
        replacements, secret_keys = self._check(candidates)
        if not replacements and not secret_keys:
            return RedactionResult(value, False)
        new = rebuild(value, replacements, secret_keys)
        return RedactionResult(new, new is not value)

    def _check(self, candidates: Iterable[str]) -> tuple[dict[str, str], set[str]]:
        """Of the strings that hold a trigger: their redacted forms where they differ, and the secret names."""
        replacements: dict[str, str] = {}
        secret_keys: set[str] = set()
        for string in candidates:
            if self._rule.is_secret(string):
                secret_keys.add(string)
            redacted = self._redact_string(string)
            if redacted is not string:
                replacements[string] = redacted
        return replacements, secret_keys

    def _redact_string(self, text: str) -> str:
        spans = self.find_spans(text)
        return replace_spans(text, spans) if spans else text


class _TriggerPrecheck:
    """Whether a text holds any sanitizer's trigger (the Sanitizer contract: no trigger, nothing to find)."""

    __slots__ = ("_exact", "_folded")

    def __init__(self, exact: Sequence[str], folded: Sequence[str]) -> None:
        self._exact = _any_of(exact)
        self._folded = _any_of(folded)

    def may_hold_secret(self, text: str) -> bool:
        if self._folded is not None and self._folded.search(fold(text)):
            return True
        return self._exact is not None and self._exact.search(text) is not None


def _any_of(literals: Sequence[str]) -> re.Pattern[str] | None:
    # Longest first: an alternation takes the first alternative that matches, and any match will do here,
    # but a shorter literal that is a prefix of a longer one then never hides it.
    ordered = sorted(literals, key=len, reverse=True)
    return re.compile("|".join(map(re.escape, ordered))) if ordered else None


def _many(values: Iterable[str], name: str) -> tuple[str, ...]:
    # A lone string would be taken character by character: refuse it rather than mislead.
    if isinstance(values, str):
        raise TypeError(f"{name} takes a list of strings, not one string")
    return tuple(values)


def _merge(text: str, spans: list[Span]) -> list[Span]:
    """Sorted spans with overlapping or touching ones joined; what is already REDACTED is left alone.

    A ReplacedSpan keeps its replacement when what it is joined with lies inside it (a known value that is
    part of a number under a secret key); joined into something larger, it is plain.
    """
    merged: list[Span] = []
    for span in sorted(spans):
        start, end = span
        if end <= start or text[start:end] == REDACTED:
            continue
        if merged and start <= merged[-1][1]:
            last = merged[-1]
            if start == last[0] and (end > last[1] or (end == last[1] and isinstance(span, ReplacedSpan))):
                merged[-1] = span  # it covers all that was joined so far
            elif end > last[1]:
                merged[-1] = (last[0], end)
        else:
            merged.append(span)
    return merged


def replace_spans(text: str, spans: Sequence[Span]) -> str:
    """`text` with each of the sorted, disjoint `spans` replaced by REDACTED (or its own replacement)."""
    parts = []
    position = 0
    for span in spans:
        start, end = span
        parts.append(text[position:start])
        parts.append(replacement_of(span))
        position = end
    parts.append(text[position:])
    return "".join(parts)
