"""What a REST request asks, read from its body or query string and checked: InvalidFieldsError (400, with one
violation per field) for anything the handlers could not use as it is.

The execute body is the seed's `{"name", "params", "trace_id"}` and nothing else: an unknown key is refused
rather than ignored, so that a misspelt `parms` is not a call without arguments. Query strings are read
leniently, as the web reads them: unknown parameters are ignored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from starlette.datastructures import QueryParams

from ..errors import FieldViolation, InvalidFieldsError

MAX_CLIENT_TRACE_ID_CHARS: Final = 128
_W3C_TRACE_ID: Final = re.compile(r"[0-9a-f]{32}")
_INVALID_TRACE_ID: Final = "0" * 32
# Printable ASCII, space included: what a log line and a database row keep as it is.
_PRINTABLE_ASCII: Final = re.compile(r"[\x20-\x7e]*")
_EXECUTE_KEYS: Final = ("name", "params", "trace_id")
_SHOWN_KEY_CHARS: Final = 64
_EXECUTE_SHAPE: Final = 'send a JSON object such as {"name": "echo", "params": {"text": "hi"}}'


@dataclass(frozen=True, slots=True)
class ClientTrace:
    """The execute body's `trace_id`: a W3C trace id the call joins, or the caller's own correlation id (kept
    beside a trace id the server makes), or neither."""

    w3c_trace_id: str = ""
    client_trace_id: str = ""


@dataclass(frozen=True, slots=True)
class ExecuteRequest:
    name: str
    params: Mapping[str, Any]
    trace: ClientTrace


@dataclass(frozen=True, slots=True)
class Filters:
    """The list and search filters of a query string: every one given must match."""

    platform: str = ""
    category: str = ""
    tags: tuple[str, ...] = ()
    provider: str = ""

    def echoed(self) -> dict[str, Any]:
        """As the seed's list body shows them: null for a filter not given."""
        return {"platform": self.platform or None, "category": self.category or None,
                "tags": list(self.tags) or None, "provider": self.provider or None}


@dataclass(frozen=True, slots=True)
class SearchRequest:
    query: str
    limit: int
    filters: Filters


def execute_request(body: bytes) -> ExecuteRequest:
    """The execute body, checked."""
    document = _json_object(body)
    violations: list[FieldViolation] = []
    unknown = [key for key in document if key not in _EXECUTE_KEYS]
    if unknown:
        # One, shortened: a body of a million keys gets one line back, not its keys.
        more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
        violations.append(FieldViolation(_pointer(unknown[0]), f"unknown field{more}; the body has only "
                                         f"{', '.join(_EXECUTE_KEYS)}"))
    name = document.get("name")
    if not isinstance(name, str) or not name:
        violations.append(FieldViolation("/name", "required: the name of the tool to run, a string "
                                         "(GET /ai/tools/list shows them)"))
    params = document.get("params")
    if params is None:
        params = {}
    elif not isinstance(params, dict):
        violations.append(FieldViolation("/params", "must be a JSON object of the tool's arguments, or null"))
    trace: ClientTrace | None = None
    try:
        trace = client_trace(document.get("trace_id"))
    except ValueError as exc:
        violations.append(FieldViolation("/trace_id", str(exc)))
    if violations or trace is None:
        raise InvalidFieldsError(_listed("the execute body", violations), violations)
    assert isinstance(name, str) and isinstance(params, dict)
    return ExecuteRequest(name, params, trace)


def client_trace(value: Any) -> ClientTrace:
    """What a `trace_id` of the execute body is; ValueError saying how to write it."""
    if value is None or value == "":
        return ClientTrace()
    if not isinstance(value, str):
        raise ValueError("must be a string: 32 lowercase hex digits (a W3C trace id), or your own id")
    if _W3C_TRACE_ID.fullmatch(value) and value != _INVALID_TRACE_ID:
        return ClientTrace(w3c_trace_id=value)
    if len(value) > MAX_CLIENT_TRACE_ID_CHARS:
        raise ValueError(f"is {len(value)} characters long; send at most {MAX_CLIENT_TRACE_ID_CHARS}, or a W3C "
                         "trace id (32 lowercase hex digits)")
    if not _PRINTABLE_ASCII.fullmatch(value):
        raise ValueError("holds a character that is not printable ASCII (a control character, or one past "
                         "'~'); use letters, digits and punctuation")
    return ClientTrace(client_trace_id=value)


def filters_of(query: QueryParams) -> Filters:
    """platform, category, provider, and tags comma-separated (the parameter may repeat)."""
    tags = tuple(tag for given in query.getlist("tags") for tag in (t.strip() for t in given.split(",")) if tag)
    return Filters(query.get("platform", ""), query.get("category", ""), tags, query.get("provider", ""))


def search_request(query: QueryParams) -> SearchRequest:
    """`q` (or `query`), `limit` and the filters of a search, checked."""
    violations: list[FieldViolation] = []
    text = query.get("q")
    alternative = query.get("query")
    if text is not None and alternative is not None and text != alternative:
        violations.append(FieldViolation("query", "give q or query, not both"))
    text = text if text is not None else alternative or ""
    limit = 0
    given = query.get("limit", "")
    if given:
        if not given.isascii() or not given.isdigit() or len(given) > 9:
            violations.append(FieldViolation("limit", "must be a whole number of results, 0 or more (0: the "
                                             "default of 10; at most 50 are returned)"))
        else:
            limit = int(given)
    if violations:
        raise InvalidFieldsError(_listed("the search", violations), violations)
    return SearchRequest(text, limit, filters_of(query))


def _json_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, read as RFC 8259 says JSON between systems is: UTF-8 (json.loads would also
    take UTF-16 and UTF-32), and with no key twice in one object (readers disagree on which copy counts, so a
    gateway checking the first `name` would see another tool than the one run)."""
    if not body.strip():
        raise _body_error(f"the request has no body; {_EXECUTE_SHAPE}")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _body_error(f"the body is not UTF-8 (byte {exc.start}); send JSON encoded as UTF-8") from None
    try:
        document = json.loads(text, object_pairs_hook=_object_of_unique_keys)
    except _RepeatedKey as exc:
        raise _body_error(f"the key {_quoted_key(exc.key)} appears more than once in one object of the body; send "
                          "each key once") from None
    except RecursionError:
        raise _body_error(f"the body is nested too deeply to read; {_EXECUTE_SHAPE}") from None
    except ValueError as exc:  # not JSON, or a number of thousands of digits
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise _body_error(f"the body is not valid JSON{where}; {_EXECUTE_SHAPE}") from None
    if not isinstance(document, dict):
        raise _body_error(f"the body must be a JSON object; {_EXECUTE_SHAPE}")
    return document


class _RepeatedKey(Exception):  # not a ValueError: json.loads would report it as a syntax error
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _object_of_unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _RepeatedKey(key)
            seen.add(key)
    return document


def _quoted_key(key: str) -> str:
    """A key of the body as an error names it: JSON-quoted, ASCII, cut to 64 characters (it is the caller's
    text: no control character or bidi override reaches the answer as it is)."""
    shown = json.dumps(key[:_SHOWN_KEY_CHARS])
    return shown[:-1] + '..."' if len(key) > _SHOWN_KEY_CHARS else shown


def _pointer(key: str) -> str:
    """The JSON pointer of a top-level key (RFC 6901), cut to 64 characters."""
    return "/" + key[:_SHOWN_KEY_CHARS].replace("~", "~0").replace("/", "~1")


def _body_error(message: str) -> InvalidFieldsError:
    return InvalidFieldsError(message, [FieldViolation("", message)])


def _listed(what: str, violations: list[FieldViolation]) -> str:
    return f"{what} is refused: " + "; ".join(f"{v.pointer}: {v.reason}" for v in violations)
