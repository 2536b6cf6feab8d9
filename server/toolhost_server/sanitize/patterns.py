"""Credentials recognisable by their shape in free text: AWS key ids, JWTs, PEM private keys, bearer
tokens and the password of a URL.

Each pattern is anchored on a literal it begins with: the literal is located with `str.find` (fast) in
the case-folded text, and the compiled regex is only tried there, so a text without any anchor costs a
few substring searches.

    AKIAIOSFODNN7EXAMPLE                       -> [REDACTED]
    eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig   -> [REDACTED]
    -----BEGIN RSA PRIVATE KEY----- ... -----END RSA PRIVATE KEY-----  -> [REDACTED] (to the end of the
                                                  text when the END line is missing: a truncated key)
    Authorization: Bearer abc123def456ghi      -> Authorization: Bearer [REDACTED]
    postgres://app:hunter22@db:5432/app        -> postgres://app:[REDACTED]@db:5432/app
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .base import Sanitizer, SanitizerSettings, Span

_TOKEN_CHARS = "A-Za-z0-9_-"


def _plausible_bearer_token(token: str) -> bool:
    # "a Bearer authentication scheme" is prose: real tokens carry digits or symbols, or are long.
    return len(token) >= 8 and (not token.isalpha() or len(token) >= 24)


@dataclass(frozen=True, slots=True)
class _Pattern:
    """One credential shape: where a match may start, what it is, and which part of it is secret."""

    anchors: tuple[str, ...]  # lowercase literals a match begins with, searched in the folded text
    regex: re.Pattern[str]  # tried (`match`) at each anchor, in the original text
    not_after: str = ""  # characters that must not precede the match (it would be part of a longer word)
    accept: Callable[[str], bool] | None = None  # a last check on the secret part


_PATTERNS = (
    _Pattern(("akia", "asia"), re.compile(r"(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"), not_after="A-Za-z0-9"),
    _Pattern(("eyj",), re.compile(rf"eyJ[{_TOKEN_CHARS}]{{2,}}\.[{_TOKEN_CHARS}]{{2,}}\.[{_TOKEN_CHARS}]*"),
             not_after=_TOKEN_CHARS),
    _Pattern(("-----begin",), re.compile(
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
        re.DOTALL)),
    _Pattern(("bearer",), re.compile(r"bearer\s+(?P<secret>[A-Za-z0-9\-._~+/]+=*)", re.IGNORECASE | re.ASCII),
             not_after="A-Za-z0-9_", accept=_plausible_bearer_token),
    # The password is everything between the user's colon and the LAST @ of the authority.
    _Pattern(("://",), re.compile(r"://[^\s/?#@:\"'<>]*:(?P<secret>[^\s/?#\"'<>]+)@")),
)


class CredentialPatternSanitizer(Sanitizer):
    """Finds AWS access key ids, JWTs, PEM private key blocks, bearer tokens and passwords in URLs."""

    folded_triggers = tuple(anchor for pattern in _PATTERNS for anchor in pattern.anchors)

    def __init__(self, settings: SanitizerSettings) -> None:
        self._checks = [(pattern, re.compile(f"[{pattern.not_after}]") if pattern.not_after else None)
                        for pattern in _PATTERNS]

    def find(self, text: str, folded: str) -> Iterable[Span]:
        spans: list[Span] = []
        for pattern, before in self._checks:
            for anchor in pattern.anchors:
                start = folded.find(anchor)
                while start >= 0:
                    end = self._match_at(text, start, pattern, before, spans)
                    start = folded.find(anchor, max(end, start + 1))
        return spans

    @staticmethod
    def _match_at(text: str, start: int, pattern: _Pattern, before: re.Pattern[str] | None,
                  spans: list[Span]) -> int:
        """Add the secret of a match at `start` to `spans`; where to look for the next anchor."""
        if before is not None and start > 0 and before.match(text, start - 1):
            return start + 1
        match = pattern.regex.match(text, start)
        if match is None:
            return start + 1
        group = "secret" if "secret" in pattern.regex.groupindex else 0
        if pattern.accept is not None and not pattern.accept(match.group(group)):
            return start + 1
        spans.append(match.span(group))
        return match.end()
