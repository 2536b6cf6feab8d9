"""What a tool search returns, and its bounds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..registry import RegisteredTool

DEFAULT_RESULTS = 10
MAX_RESULTS = 50
MAX_QUERY_CHARACTERS = 1000


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One tool found. An intent's match has `matched_intent` (its pattern) and the `arguments` to call the tool
    with; a ranked result has neither. `score` orders the hits of one search, higher first; an intent's match
    scores above every ranked hit."""

    tool: RegisteredTool
    score: float
    matched_intent: str = ""
    arguments: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class SearchResults:
    """The hits, best first, and the generation (as the caller sees it) that served them."""

    hits: tuple[SearchHit, ...]
    generation: int
