"""The Sanitizer contract: what finds secrets in text, and the result type every redaction returns."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from .keys import SecretKeyRule

REDACTED = "[REDACTED]"
"""What every secret is replaced with, whatever its type or length (so its length leaks nothing either)."""

Span = tuple[int, int]
"""A secret's place in a text: `text[start:end]`, replaced with REDACTED (or a ReplacedSpan's replacement)."""


class ReplacedSpan(tuple[int, int]):
    """A Span whose secret takes `replacement` instead of REDACTED, where REDACTED alone would break the syntax
    around it: the JSON number in `{"token": 5}` becomes the JSON string `"[REDACTED]"`, so the text stays JSON.

    It unpacks as `start, end` like any Span. A span made of more or less than it (merged with an overlapping
    one, cut at a stream's edge) is a plain Span again: the replacement stood for exactly this text.
    """

    replacement: str

    def __new__(cls, start: int, end: int, replacement: str) -> ReplacedSpan:
        span = super().__new__(cls, (start, end))
        span.replacement = replacement
        return span


def replacement_of(span: Span) -> str:
    """What replaces the secret at `span`."""
    return span.replacement if isinstance(span, ReplacedSpan) else REDACTED


def clipped(span: Span, start: int, end: int) -> Span:
    """The part of `span` inside [start, end), relative to `start`; a ReplacedSpan wholly inside stays one."""
    low, high = span
    if isinstance(span, ReplacedSpan) and start <= low and high <= end:
        return ReplacedSpan(low - start, high - start, span.replacement)
    return max(low, start) - start, min(high, end) - start

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RedactionResult(Generic[T]):
    """A redacted copy of a value. `redacted` is True when anything was replaced.

    When nothing was, `value` is the input object itself (no copy is made).
    """

    value: T
    redacted: bool


@dataclass(frozen=True, slots=True)
class SanitizerSettings:
    """What every sanitizer is built from: the secret-key rule and the known secret values."""

    secret_keys: SecretKeyRule
    known_values: tuple[str, ...] = ()


class Sanitizer(ABC):
    """Finds the secrets of one kind in free text; a `Redactor` runs them all and replaces what they find.

    Contract:
      - `__init__(settings)` builds the sanitizer once, when the server builds its Redactor. Invalid
        settings raise ValueError with a message that says why and never contains a secret.
      - `find(text, folded)` returns the spans of `text` that are secret, in any order, overlapping or
        not; the Redactor merges them and replaces each with REDACTED, or with a ReplacedSpan's own
        replacement. `folded` is `text` with its ASCII letters lowercased and the same length, so a
        position found in one is the same in the other.
      - `exact_triggers` / `folded_triggers`: substrings one of which occurs (in `text`, resp. in
        `folded`) whenever `find` would find anything. The Redactor looks for them in the JSON text of
        a whole structure and only checks the strings that hold one, which is what keeps the common,
        secret-free output cheap; `find` itself should start by searching them with `str.find`.
      - `with_values(values)` returns a sanitizer that also covers these per-call known values; the
        default returns `self` (most sanitizers do not depend on them). It must be cheap.
      - No state changes after `__init__`: one instance serves concurrent calls.

    Implementations are found, not registered: every concrete subclass defined in a module of
    `toolhost_server.sanitize` is built by every Redactor (see `discovery.sanitizer_classes`).

    Example (in a new module of this package, say `pins.py`):
        class PinSanitizer(Sanitizer):
            exact_triggers = ()
            folded_triggers = ("pin:",)

            def __init__(self, settings: SanitizerSettings) -> None:
                self._pattern = re.compile(r"pin:(\\d{4,})")

            def find(self, text: str, folded: str) -> Iterable[Span]:
                return [m.span(1) for m in self._pattern.finditer(folded)]

        Redactor().redact_text("pin:123456")  # -> RedactionResult(value="pin:[REDACTED]", redacted=True)
    """

    exact_triggers: Sequence[str] = ()
    folded_triggers: Sequence[str] = ()

    @abstractmethod
    def __init__(self, settings: SanitizerSettings) -> None: ...

    @abstractmethod
    def find(self, text: str, folded: str) -> Iterable[Span]:
        """The spans of `text` that are secret."""

    def with_values(self, values: Sequence[str]) -> Sanitizer:
        """A sanitizer that also covers the known secret `values`; `self` when they do not concern it."""
        return self
