"""The REST API's JSON bodies in the seed's shapes (AI Tool Catalog), from the core's results, and the response
that carries them.

The seed's fields come first and mean what they meant there; toolhost's own follow (call_id, generation, ...).
A tool entry's `source` is the seed's: "pipeline" for a tool that runs on another toolhost, else "local";
where the definition came from is `toolhost_source` (builtin, catalog, user, remote).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from starlette.responses import Response

from ..model import NO_DEFAULT, Parameter, ToolSource, ToolSpec
from ..pipeline import CallResult
from ..registry import RegisteredTool
from ..reloading import ReloadReport
from ..tool_search import SearchResults
from .rest_requests import Filters

_MISSING_CREDENTIALS = "MISSING_CREDENTIALS"


# Every REST answer's: never cached (outputs and tool lists are the caller's), and never sniffed into another
# type than JSON (a search body reflects its query).
JSON_HEADERS: Mapping[str, str] = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


class JsonBody(Response):
    """A JSON response, UTF-8, with JSON_HEADERS. A text a tool made may hold a lone surrogate, which UTF-8
    cannot carry: such a body is written with ASCII escapes instead."""

    media_type = "application/json"

    def __init__(self, content: Any, status_code: int = 200, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(content, status_code, {**JSON_HEADERS, **(headers or {})})

    def render(self, content: Any) -> bytes:
        try:
            return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
        except UnicodeEncodeError:
            return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode()


def tool_entry(tool: RegisteredTool) -> dict[str, Any]:
    """One tool of the list body."""
    spec = tool.spec
    runs_elsewhere = tool.runner.kind == "remote" or spec.source is ToolSource.REMOTE
    hints = spec.annotations
    return {
        "name": spec.name,
        "display_name": spec.display_name,
        "description": spec.description,
        "category": spec.category,
        "platform": spec.platform,
        "source": "pipeline" if runs_elsewhere else "local",
        "parameters": parameters_of(spec),
        "toolhost_source": spec.source.value,
        "version": spec.version,
        "tags": list(spec.tags),
        "requires_admin": spec.requires_admin,
        "timeout_seconds": spec.timeout_seconds,
        "input_schema": spec.input_schema,
        "annotations": {"read_only": hints.read_only, "destructive": hints.destructive,
                        "idempotent": hints.idempotent, "open_world": hints.open_world},
    }


def parameters_of(spec: ToolSpec) -> list[dict[str, Any]]:
    """The seed's parameter list: from the definition's parameters, or, for a tool defined by its input schema
    alone (user tools, some YAML), from the schema's properties."""
    if spec.parameters:
        return [_parameter(p) for p in spec.parameters]
    properties = spec.input_schema.get("properties")
    if not isinstance(properties, Mapping):
        return []
    required = spec.input_schema.get("required")
    required_names = set(required) if isinstance(required, list) else set()
    entries = []
    for name, schema in properties.items():
        schema = schema if isinstance(schema, Mapping) else {}
        entry: dict[str, Any] = {"name": name, "type": _schema_type(schema),
                                 "description": str(schema.get("description", "")),
                                 "required": name in required_names}
        if "default" in schema:
            entry["default"] = schema["default"]
        if isinstance(schema.get("enum"), list):
            entry["enum"] = schema["enum"]
        entries.append(entry)
    return entries


def _parameter(parameter: Parameter) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": parameter.name, "type": parameter.type, "description": parameter.description,
                             "required": parameter.required}
    if parameter.default is not NO_DEFAULT:
        entry["default"] = parameter.default
    if parameter.enum:
        entry["enum"] = list(parameter.enum)
    return entry


def _schema_type(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, str):
        return kind
    if isinstance(kind, list):  # ["string", "null"]: the type it has when given
        return next((k for k in kind if isinstance(k, str) and k != "null"), "object")
    return "object"


def list_body(tools: Sequence[RegisteredTool], filters: Filters) -> dict[str, Any]:
    return {"success": True, "tools": [tool_entry(t) for t in tools], "total": len(tools),
            "filters": filters.echoed()}


def search_body(query: str, results: SearchResults, filters: Filters) -> dict[str, Any]:
    hits = [{"tool": tool_entry(hit.tool), "score": hit.score, "matched_intent": hit.matched_intent or None,
             "arguments": dict(hit.arguments) if hit.arguments is not None else None} for hit in results.hits]
    return {"success": True, "query": query, "results": hits, "total": len(hits), "filters": filters.echoed(),
            "generation": results.generation}


def reload_body(report: ReloadReport) -> dict[str, Any]:
    return {
        "success": report.success,
        "count": len(report.tools),
        "tools": list(report.tools),
        "missing_required": list(report.missing_required),
        "catalog_dirs": list(report.catalog_dirs),
        "generation": report.generation,
        "errors": [{"file": p.file, "line": p.line, "reason": p.reason} for p in report.problems],
        "added": list(report.added),
        "removed": list(report.removed),
        "changed": list(report.changed),
    }


def execute_body(result: CallResult, trace_id: str) -> dict[str, Any]:
    """The seed's execute body. `trace_id` is what the caller should see there: the call's trace id, or the
    caller's own id echoed back."""
    outcome = result.outcome
    failure = outcome.failure
    error: str | None = None
    if failure is not None:
        error = "missing_credentials" if failure.code == _MISSING_CREDENTIALS else failure.code
    return {
        "success": result.success,
        "tool": result.tool,
        # The seed's failures carry no output; a failed tool's own words are kept when it wrote any.
        "output": outcome.output if outcome.output or failure is None else None,
        "error": error,
        "error_message": failure.message if failure is not None else None,
        "duration_ms": round(result.duration_ms, 3),
        "trace_id": trace_id,
        "timestamp": iso_timestamp(result.started_at),
        "exit_code": outcome.exit_code,
        "truncated": outcome.truncated,
        "redacted": result.redacted,
        "call_id": result.call_id,
        "structured_output": outcome.structured,
        "stderr": outcome.stderr,
        "original_size_bytes": outcome.original_size_bytes,
        "generation": result.generation,
    }


def iso_timestamp(moment: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and a Z, as `2024-01-15T10:30:00.123Z`."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
