"""Tool search results -> toolhost.v1 SearchToolsResponse."""

from __future__ import annotations

from toolhost.v1 import tool_service_pb2

from ..tool_search import SearchResults
from .convert import ToolMessages, to_struct


def search_response(results: SearchResults, messages: ToolMessages) -> tool_service_pb2.SearchToolsResponse:
    """Each hit's tool in the BASIC view (from the kept messages); `arguments` set only for an intent's match,
    so a client can tell "call it with nothing" ({}) from "no arguments were found" (unset)."""
    response = tool_service_pb2.SearchToolsResponse(generation=results.generation)
    for hit in results.hits:
        result = response.results.add(score=hit.score, matched_intent=hit.matched_intent)
        result.tool.CopyFrom(messages.get(hit.tool.spec, False))
        if hit.arguments is not None:
            result.arguments.CopyFrom(to_struct(hit.arguments))
    return response
