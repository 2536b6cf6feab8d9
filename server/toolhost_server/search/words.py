"""How the words of a query match: the same tokens in the FTS5 index and in the fallback walk.

A token is a run of letters and digits (FTS5's unicode61 tokenizer: everything else separates, `_` included),
compared without case or diacritics; each query token must begin some token of the file's name or text. User
words are data, never FTS5 syntax: only their tokens reach the MATCH expression, each quoted, so quotes,
NEAR, AND/OR/NOT, `*`, `^` and `column:` filters in a query mean nothing.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

_TOKEN = re.compile(r"[^\W_]+")
# Longest token kept: FTS5 ignores nothing, but a 10 KiB "word" is no word anybody searches by.
MAX_TOKEN_CHARS = 256


def query_tokens(words: Sequence[str]) -> list[str]:
    """The tokens of the caller's words, folded, duplicates dropped; empty when the words hold no letter or
    digit (a query of only punctuation)."""
    tokens: dict[str, None] = {}
    for word in words:
        for token in _TOKEN.findall(fold(word)):
            tokens[token[:MAX_TOKEN_CHARS]] = None
    return list(tokens)


def match_expression(tokens: Sequence[str]) -> str:
    """The FTS5 MATCH expression: every token as a quoted prefix query, ANDed (FTS5's implicit AND)."""
    return " ".join('"' + token.replace('"', '""') + '"*' for token in tokens)


def fold(text: str) -> str:
    """`text` without case or diacritics, as unicode61 with remove_diacritics 2 compares."""
    folded = text.lower()
    if folded.isascii():
        return folded
    decomposed = unicodedata.normalize("NFKD", folded)
    return "".join(char for char in decomposed if not unicodedata.combining(char))


class WordMatcher:
    """Matches text against query tokens without an index (the fallback walk)::

        matcher = WordMatcher(query_tokens(["quart", "rep"]))
        matcher.matches("Quarterly report")   # True
    """

    def __init__(self, tokens: Sequence[str]) -> None:
        # A token begins a word when no letter or digit stands before it.
        self._patterns = [re.compile(r"(?<![^\W_])" + re.escape(token)) for token in tokens]

    def matches(self, *texts: str) -> bool:
        """Whether every token begins some word of `texts` together."""
        folded = [fold(text) for text in texts]
        return all(any(pattern.search(text) for text in folded) for pattern in self._patterns)

    def count_in(self, text: str) -> int:
        """How many of the tokens begin a word of `text`."""
        folded = fold(text)
        return sum(1 for pattern in self._patterns if pattern.search(folded))
