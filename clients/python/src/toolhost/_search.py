"""SearchTools as the clients send and return it: the request, and the results as frozen dataclasses."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format

from ._results import ToolInfo, plain_value
from .v1 import tool_service_pb2

__all__ = ["SearchResult", "SearchResults"]


def search_request(
    query: str,
    limit: int,
    platform: str | None,
    category: str | None,
    tags: Iterable[str],
    provider: str | None,
) -> tool_service_pb2.SearchToolsRequest:
    if isinstance(tags, str):
        raise TypeError("tags must be a list of tags, not one string")
    return tool_service_pb2.SearchToolsRequest(
        query=query, page_size=limit, platform=platform or "", category=category or "", tags=list(tags),
        provider=provider or "")


@dataclass(frozen=True)
class SearchResult:
    """One tool a search found. `tool` is in the "basic" view (no parameters, schemas or examples: get_tool
    has them). For a match of one of the tool's intents, `matched_intent` is its pattern and `arguments` the
    arguments to call the tool with (`client.call_tool(hit.tool.name, hit.arguments)`); a ranked result has ""
    and None. `score` orders the results of one search, higher first."""

    tool: ToolInfo
    score: float
    matched_intent: str
    arguments: dict[str, Any] | None
    raw: tool_service_pb2.SearchToolsResult = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, message: tool_service_pb2.SearchToolsResult) -> SearchResult:
        arguments = plain_value(json_format.MessageToDict(message.arguments)) if message.HasField("arguments") \
            else None
        return cls(ToolInfo.from_proto(message.tool), message.score, message.matched_intent, arguments, message)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field but `raw` (what `toolhost tools search --json` prints)."""
        return {"tool": self.tool.to_dict(), "score": self.score, "matched_intent": self.matched_intent,
                "arguments": self.arguments}


@dataclass(frozen=True)
class SearchResults:
    """What search_tools returns: the results, best first (an intent's match first), and the generation that
    served them. Iterating it iterates the results."""

    results: tuple[SearchResult, ...]
    generation: int
    raw: tool_service_pb2.SearchToolsResponse = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, message: tool_service_pb2.SearchToolsResponse) -> SearchResults:
        return cls(tuple(SearchResult.from_proto(r) for r in message.results), message.generation, message)

    def __iter__(self) -> Iterator[SearchResult]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)
