"""The OpenAPI 3.1 document of the REST API (web.rest), served at /openapi.json. Written out by hand: every
route, parameter, body and status the handlers have, checked against the routes by tests/test_rest_api.py."""

from __future__ import annotations

from typing import Any

OPENAPI_PATH = "/openapi.json"
_SCHEMAS = "#/components/schemas/"

_STATUS_TEXT = {
    400: "The request is refused as sent: `violations` lists each field (a JSON pointer into the body, or a query "
         "parameter's name) and why.",
    401: "No bearer token, or one this server does not know (WWW-Authenticate: Bearer).",
    403: "The caller may not do this (a tool it sees but may not call, a reload without the admin right), or the "
         "browser guard refused the Host or Origin.",
    404: "No tool by that name among those the caller may see (a hidden tool is answered exactly alike).",
    413: "The body is over max_message_bytes.",
    415: "A body that is not Content-Type: application/json.",
    429: "The server, or the tool, runs as many calls as it may: retry after Retry-After seconds.",
    500: "An internal error; the message quotes an incident id the server log has.",
    503: "The server is shutting down, or its database cannot be used now: retry (on another replica).",
}
# What each operation can answer besides 200: the guard's 403/413/415 apply to every route but the probes.
_OPERATION_ERRORS = {
    ("/ai/tools/list", "get"): (400, 401, 403, 500, 503),
    ("/ai/tools/search", "get"): (400, 401, 403, 500, 503),
    ("/ai/tools/execute", "post"): (400, 401, 403, 404, 413, 415, 429, 500, 503),
    ("/ai/tools/reload", "post"): (401, 403, 413, 415, 500, 503),
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": _SCHEMAS + name}


def _nullable(kind: str) -> dict[str, Any]:
    return {"type": [kind, "null"]}


def _query(name: str, description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "description": description,
            "schema": schema or {"type": "string"}}


_FILTERS = [
    _query("platform", "Only tools of this platform (windows, linux, cross-platform)."),
    _query("category", "Only tools of this category (network, system, asset, ...)."),
    _query("tags", "Only tools with every one of these tags, comma-separated (the parameter may repeat)."),
    _query("provider", "Only what an agent of this provider is offered (claude_code, codex, ...)."),
]

_COMPONENTS: dict[str, Any] = {
    "Parameter": {
        "type": "object", "required": ["name", "type", "description", "required"],
        "properties": {
            "name": {"type": "string"}, "type": {"type": "string"}, "description": {"type": "string"},
            "required": {"type": "boolean"}, "default": {"description": "The value used when none is given."},
            "enum": {"type": "array", "description": "The values allowed."},
        },
    },
    "Tool": {
        "type": "object",
        "required": ["name", "display_name", "description", "category", "platform", "source", "parameters",
                     "toolhost_source"],
        "properties": {
            "name": {"type": "string"}, "display_name": {"type": "string"}, "description": {"type": "string"},
            "category": {"type": "string"}, "platform": {"type": "string"},
            "source": {"type": "string", "enum": ["local", "pipeline"],
                       "description": "pipeline: the tool runs on another toolhost; local: on this one."},
            "parameters": {"type": "array", "items": _ref("Parameter")},
            "toolhost_source": {"type": "string", "enum": ["builtin", "catalog", "user", "remote"],
                                "description": "Where the definition came from."},
            "version": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}},
            "requires_admin": {"type": "boolean"}, "timeout_seconds": _nullable("number"),
            "input_schema": {"type": "object", "description": "The JSON Schema of params."},
            "annotations": {"type": "object", "properties": {
                key: {"type": "boolean"} for key in ("read_only", "destructive", "idempotent", "open_world")}},
        },
    },
    "Filters": {
        "type": "object", "description": "The filters as applied; null for one not given.",
        "properties": {"platform": _nullable("string"), "category": _nullable("string"),
                       "tags": {"type": ["array", "null"], "items": {"type": "string"}},
                       "provider": _nullable("string")},
    },
    "ToolList": {
        "type": "object", "required": ["success", "tools", "total", "filters"],
        "properties": {"success": {"type": "boolean"}, "tools": {"type": "array", "items": _ref("Tool")},
                       "total": {"type": "integer"}, "filters": _ref("Filters")},
    },
    "SearchResults": {
        "type": "object", "required": ["success", "query", "results", "total", "filters", "generation"],
        "properties": {
            "success": {"type": "boolean"}, "query": {"type": "string"}, "total": {"type": "integer"},
            "filters": _ref("Filters"), "generation": {"type": "integer"},
            "results": {"type": "array", "items": {
                "type": "object", "required": ["tool", "score", "matched_intent", "arguments"],
                "properties": {
                    "tool": _ref("Tool"), "score": {"type": "number"},
                    "matched_intent": {**_nullable("string"), "description": "The intent's pattern that matched "
                                       "the whole query; null for a ranked result."},
                    "arguments": {"type": ["object", "null"], "description": "For an intent's match: the params "
                                  "to execute the tool with."},
                }}},
        },
    },
    "ExecuteRequest": {
        "type": "object", "required": ["name"], "additionalProperties": False,
        "properties": {
            "name": {"type": "string", "description": "The tool to run."},
            "params": {"type": ["object", "null"], "description": "Its arguments."},
            "trace_id": {"type": ["string", "null"], "maxLength": 128, "pattern": "^[\\x20-\\x7e]*$",
                         "description": "32 lowercase hex digits (not all zero): the call's W3C trace id. Any "
                                        "other printable ASCII: your own id, kept in the audit record and echoed "
                                        "back; the call's trace id is then in the X-Trace-Id header."},
        },
    },
    "ExecuteResult": {
        "type": "object",
        "required": ["success", "tool", "output", "error", "error_message", "duration_ms", "trace_id", "timestamp",
                     "exit_code", "truncated", "redacted", "call_id"],
        "properties": {
            "success": {"type": "boolean"}, "tool": {"type": "string"},
            "output": {**_nullable("string"), "description": "What the tool wrote; null when it failed silent."},
            "error": {**_nullable("string"), "description": "null on success; missing_credentials, or the "
                      "failure's code (TIMEOUT, NON_ZERO_EXIT, ...)."},
            "error_message": _nullable("string"), "duration_ms": {"type": "number"},
            "trace_id": {"type": "string", "description": "The call's trace id, or your own trace_id echoed."},
            "timestamp": {"type": "string", "format": "date-time", "description": "ISO 8601, UTC, with a Z."},
            "exit_code": _nullable("integer"), "truncated": {"type": "boolean"}, "redacted": {"type": "boolean"},
            "call_id": {"type": "string"}, "structured_output": {"description": "A JSON value, or null."},
            "stderr": {"type": "string"}, "original_size_bytes": {"type": "integer"}, "generation": {"type": "integer"},
        },
    },
    "ReloadResult": {
        "type": "object", "required": ["success", "count", "tools", "missing_required", "catalog_dirs"],
        "properties": {
            "success": {"type": "boolean"}, "count": {"type": "integer"},
            "tools": {"type": "array", "items": {"type": "string"}},
            "missing_required": {"type": "array", "items": {"type": "string"}},
            "catalog_dirs": {"type": "array", "items": {"type": "string"}}, "generation": {"type": "integer"},
            "errors": {"type": "array", "items": {"type": "object", "properties": {
                "file": {"type": "string"}, "line": {"type": "integer"}, "reason": {"type": "string"}}}},
            "added": {"type": "array", "items": {"type": "string"}},
            "removed": {"type": "array", "items": {"type": "string"}},
            "changed": {"type": "array", "items": {"type": "string"}},
        },
    },
    "Error": {
        "type": "object", "required": ["success", "error", "error_message"],
        "description": "A refusal. The browser guard's (403 Host or Origin, 413, 415) are {error, message}.",
        "properties": {
            "success": {"const": False}, "error": {"type": "string"}, "error_message": {"type": "string"},
            "message": {"type": "string"},
            "violations": {"type": "array", "items": {"type": "object", "properties": {
                "field": {"type": "string"}, "reason": {"type": "string"}}}},
            "suggestions": {"type": "array", "items": {"type": "string"}},
            "tool": {"type": "string"}, "trace_id": _nullable("string"),
        },
    },
}


def _responses(path: str, method: str, schema: str, description: str) -> dict[str, Any]:
    responses: dict[str, Any] = {"200": {"description": description,
                                         "content": {"application/json": {"schema": _ref(schema)}}}}
    for status in _OPERATION_ERRORS[(path, method)]:
        answer: dict[str, Any] = {"description": _STATUS_TEXT[status],
                                  "content": {"application/json": {"schema": _ref("Error")}}}
        if status == 401:
            answer["headers"] = {"WWW-Authenticate": {"schema": {"type": "string"}}}
        if status in (429, 503):  # over capacity, draining
            answer["headers"] = {"Retry-After": {"schema": {"type": "integer"}}}
        responses[str(status)] = answer
    return responses


def openapi_document(version: str) -> dict[str, Any]:
    """The document for this server's `version`."""
    bearer: list[dict[str, list[str]]] = [{"bearer": []}]
    execute_ok = _responses("/ai/tools/execute", "post", "ExecuteResult",
                            "The tool ran: success, or its failure (error, error_message).")
    execute_ok["200"]["headers"] = {"X-Trace-Id": {"description": "The call's W3C trace id.",
                                                   "schema": {"type": "string"}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "toolhost REST API", "version": version,
                 "description": "The AI Tool Catalog's REST API in front of toolhost's call pipeline: the same "
                                "tools, rights, audit and redaction as gRPC and MCP."},
        "paths": {
            "/ai/tools/list": {"get": {
                "operationId": "listTools", "summary": "Every tool the caller may see that matches the filters.",
                "parameters": _FILTERS, "security": bearer,
                "responses": _responses("/ai/tools/list", "get", "ToolList", "The tools, sorted by name."),
            }},
            "/ai/tools/search": {"get": {
                "operationId": "searchTools",
                "summary": "The tools for a need written in words: an intent's match first, then ranked ones.",
                "parameters": [
                    _query("q", "The query, at most 1,000 characters."),
                    _query("query", "Another name of q."),
                    _query("limit", "How many results: 0 or none for 10, at most 50.",
                           {"type": "integer", "minimum": 0}),
                    *_FILTERS,
                ],
                "security": bearer,
                "responses": _responses("/ai/tools/search", "get", "SearchResults", "The results, best first."),
            }},
            "/ai/tools/execute": {"post": {
                "operationId": "executeTool", "summary": "Run one tool through the call pipeline.",
                "requestBody": {"required": True,
                                "content": {"application/json": {"schema": _ref("ExecuteRequest")}}},
                "security": bearer, "responses": execute_ok,
            }},
            "/ai/tools/reload": {"post": {
                "operationId": "reloadTools", "summary": "Read the catalog directories again (the admin right).",
                "security": bearer,
                "responses": _responses("/ai/tools/reload", "post", "ReloadResult", "What the reload did."),
            }},
            OPENAPI_PATH: {"get": {
                "operationId": "openapi", "summary": "This document.", "security": [],
                "responses": {"200": {"description": "The OpenAPI document.",
                                      "content": {"application/json": {"schema": {"type": "object"}}}},
                              "403": {"description": _STATUS_TEXT[403]}},
            }},
        },
        "components": {
            "schemas": _COMPONENTS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                           "description": "A token of the server's auth file; none is needed "
                                                          "when the server has no auth file."}},
        },
    }
