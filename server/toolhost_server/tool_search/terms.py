"""The terms a tool's text and a query are compared by: runs of letters and digits (so `tcp_port_check` is
tcp, port, check), folded as the file search folds them, without the English words that say nothing about a
tool, and with the common inflections cut (ports, checking, checked: port, check).

The cutting is deliberately crude, the same rule applied to both sides: it only has to make two forms of one
word meet, never to produce a dictionary word. bench/findings/tool_search.md measures what each step adds.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ..search.words import MAX_TOKEN_CHARS, fold

_TOKEN = re.compile(r"[^\W_]+")

# Words of a request that name no need: "is the database port open" is about database, port, open.
STOPWORDS = frozenset([
    "a", "about", "all", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can", "could", "do",
    "does", "for", "from", "had", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my",
    "of", "on", "or", "our", "please", "show", "so", "some", "that", "the", "their", "them", "then", "there",
    "these", "this", "those", "to", "us", "was", "we", "were", "what", "when", "where", "whether", "which",
    "who", "why", "will", "with", "would", "you", "your"
])


def terms(text: str) -> list[str]:
    """The terms of `text`, in order, repeats kept (they count in a tool's text)."""
    return [stem(token[:MAX_TOKEN_CHARS]) for token in _TOKEN.findall(fold(text)) if token not in STOPWORDS]


# Cached: a catalog repeats its words, and stemming is most of what tokenizing a tool costs.
@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """`word` without a plural or verb ending, or a final e, when enough of it is left to still mean something:
    resolve, resolves, resolved and resolving all give resolv."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("ing") and len(word) > 5:
        word = _undouble(word[:-3])
    elif word.endswith("ed") and len(word) > 4:
        word = _undouble(word[:-2])
    elif (word.endswith("es") and word[-3] in "sxz") or word.endswith(("ches", "shes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


def _undouble(word: str) -> str:
    # running -> runn -> run; but "pinging" -> ping, and "checked" -> check keep their last letters.
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
        return word[:-1]
    return word
