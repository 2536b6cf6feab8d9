"""The search_tools tool: SearchTools for an agent, which finds the tool for a need in words before it calls one.
It asks the server's one tool search for the caller of the call, so it shows only the tools that caller may see."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from ..errors import InvalidRequestError
from ..listing import ToolFilter
from ..model import Annotations, Example, ExampleExpectation, Parameter
from ..tool_search import DEFAULT_RESULTS, MAX_QUERY_CHARACTERS, MAX_RESULTS, SearchHit, SearchResults
from .base import Tool, ToolContext, ToolOutput, ToolRaisedFailure, ToolServices

_FILTER_TEXT = {"maxLength": 256}
_RESULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "display_name": {"type": "string"},
        "description": {"type": "string"},
        "category": {"type": "string"},
        "score": {"type": "number", "description": "Higher is better; comparable within one search only."},
        "matched_intent": {"type": "string", "description": "The intent's pattern that matched the whole query; "
                           "empty for a ranked result."},
        "arguments": {"type": ["object", "null"], "description": "For an intent's match, the arguments to call "
                      "the tool with; null for a ranked result."},
    },
    "required": ["name", "score", "matched_intent", "arguments"],
}


class SearchTools(Tool):
    name = "search_tools"
    display_name = "Search Tools"
    # Its own description stays clear of the needs it finds tools for (ports, files, hosts ...): it would
    # otherwise rank among them for every such need.
    description = (
        "Finds the tools that fit a need described in plain words, best first: use it before guessing a tool's "
        "name. When the request is a phrase one of a tool's intents answers, that tool comes first with the "
        "arguments to call it with; the others follow by how well their name, description and tags fit the words. "
        "Returns them as text and as `results` (name, description, category, score, matched_intent, arguments). "
        "Only tools you may see appear.")
    category = "utility"
    tags = ("tools", "discovery")
    parameters = (
        Parameter("query", "string", f"What you need, in words, at most {MAX_QUERY_CHARACTERS} characters.",
                  required=True, schema={"minLength": 1, "maxLength": MAX_QUERY_CHARACTERS}),
        Parameter("limit", "integer", "How many results at most.", default=DEFAULT_RESULTS,
                  schema={"minimum": 1, "maximum": MAX_RESULTS}),
        Parameter("category", "string", "Only tools in this category, for example network.", schema=_FILTER_TEXT),
        Parameter("platform", "string", "Only tools for this platform, for example linux.", schema=_FILTER_TEXT),
        Parameter("tags", "array", "Only tools that carry every one of these tags.",
                  schema={"items": {"type": "string", "maxLength": 256}, "maxItems": 32}),
    )
    output_schema: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "results": {"type": "array", "items": _RESULT_SCHEMA},
            "generation": {"type": "integer", "description": "The catalog generation that served the search."},
        },
        "required": ["results", "generation"],
    }
    examples = (
        Example("Find the tool for a need", {"query": "is the database port open"}),
        Example("A phrase an intent answers: the tool and the arguments to call it with",
                {"query": "check port 5432 on db.example.com", "limit": 3},
                ExampleExpectation(structured_subset={"results": [{
                    "name": "tcp_port_check", "arguments": {"host": "db.example.com", "port": 5432}}]})),
    )
    # Closed-world: it reads the server's own catalog, nothing outside it.
    annotations = Annotations(read_only=True, idempotent=True)

    @classmethod
    def unserved_because(cls, services: ToolServices) -> str:
        if services.tool_search is None:
            return "the server has no tool search here (offline validation)"
        return ""

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        search, caller = context.services.tool_search, context.authenticated_caller
        if search is None or caller is None:  # the pipeline sets both; only a direct run (a test) gets here
            raise RuntimeError(f"{context.tool_name} was run outside a server call")
        query = arguments["query"]
        tool_filter = ToolFilter(platform=arguments.get("platform", ""), category=arguments.get("category", ""),
                                 tags=tuple(arguments.get("tags", ())))
        try:
            results = search.search(query, caller, tool_filter, arguments["limit"])
        except InvalidRequestError as exc:  # the schema bounds the query already; this keeps the search's word
            raise ToolRaisedFailure(exc.message, "INVALID_ARGUMENT") from None
        return ToolOutput(text=_text(query, results), structured=_structured(results))


def _structured(results: SearchResults) -> dict[str, Any]:
    return {"results": [_result(hit) for hit in results.hits], "generation": results.generation}


def _result(hit: SearchHit) -> dict[str, Any]:
    spec = hit.tool.spec
    return {
        "name": spec.name, "display_name": spec.display_name, "description": spec.description,
        "category": spec.category, "score": hit.score, "matched_intent": hit.matched_intent,
        "arguments": dict(hit.arguments) if hit.arguments is not None else None,
    }


def _text(query: str, results: SearchResults) -> str:
    if not results.hits:
        return f"No tool matches {json.dumps(query, ensure_ascii=False)}: try other words, or fewer filters."
    lines = []
    for rank, hit in enumerate(results.hits, 1):
        spec = hit.tool.spec
        lines.append(f"{rank}. {spec.name}: {' '.join(spec.description.split())}")
        if hit.arguments is not None:
            call = json.dumps(dict(hit.arguments), ensure_ascii=False, sort_keys=True)
            lines.append(f"   matches the request: call {spec.name} with {call}")
    return "\n".join(lines)
