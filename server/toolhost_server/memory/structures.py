"""What a structure may be: its name (which is also its view's), its record schema (a JSON Schema of an object),
and the view columns that schema gives: `id`, `created_at`, `updated_at`, then each top-level property."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import FieldViolation
from ..schema import check_schema
from .errors import InvalidMemoryData

# A view name on SQLite and PostgreSQL alike without quoting (PostgreSQL folds unquoted names to lower case).
STRUCTURE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
# A column name either database accepts when quoted; mixed case must then be quoted on PostgreSQL ("firstName").
FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
# Names the query gate refuses (the databases' own catalogs), so that no structure or field can take them.
RESERVED_PREFIXES = ("pg_", "sqlite_")
VIEW_COLUMNS = ("id", "created_at", "updated_at")
MAX_FIELDS = 200
MAX_DESCRIPTION_CHARS = 4000
MAX_SCHEMA_BYTES = 64 * 1024
# A record's JSON as the store keeps it (non-ASCII characters as \u escapes): memory_query reads every value up to
# this length and no longer (query.py MAX_VALUE_BYTES), so a larger record could not be read back.
MAX_RECORD_BYTES = 64 * 1024

# How a property's JSON Schema type shows in its column: anything else (several types, none, array, object) is
# the value as JSON.
_SCALAR_KINDS = {"string": "text", "integer": "number", "number": "number", "boolean": "boolean"}


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a structure's view: a top-level property of its records, and how its value is typed."""

    name: str
    kind: str  # "text", "number", "boolean" or "json"


def check_structure_name(name: str, pointer: str = "/name") -> None:
    """InvalidMemoryData unless `name` can name a structure and its view."""
    if not STRUCTURE_NAME.match(name):
        raise InvalidMemoryData([FieldViolation(
            pointer, "a structure's name is 1 to 63 lower-case letters, digits and _, starting with a letter (it "
                     "names the structure's view in memory_query)")])
    if name.startswith(RESERVED_PREFIXES):
        raise InvalidMemoryData([FieldViolation(
            pointer, f"a structure's name may not start with {' or '.join(RESERVED_PREFIXES)}: the databases keep "
                     "those names for their catalogs")])


def columns_of(record_schema: Mapping[str, Any]) -> tuple[Column, ...]:
    """The view's columns after id, created_at and updated_at, from a schema that check_record_schema accepted."""
    properties = record_schema.get("properties", {})
    return tuple(Column(name, _kind(spec)) for name, spec in properties.items())


def check_record_schema(record_schema: Any) -> None:
    """InvalidMemoryData (pointers under /schema) unless `record_schema` is a JSON Schema of an object whose
    top-level properties can be columns."""
    if not isinstance(record_schema, Mapping):
        raise InvalidMemoryData([FieldViolation("/schema", "must be a JSON Schema object")])
    problem = check_schema(record_schema)
    if problem is not None:
        raise InvalidMemoryData([FieldViolation("/schema", problem)])
    if record_schema.get("type") != "object":
        raise InvalidMemoryData([FieldViolation(
            "/schema/type", 'a record is a JSON object: the schema needs "type": "object"')])
    properties = record_schema.get("properties", {})
    if not isinstance(properties, Mapping) or not properties:
        raise InvalidMemoryData([FieldViolation(
            "/schema/properties", "name the record's fields under properties: each becomes a column of the "
                                  "structure's view")])
    if len(properties) > MAX_FIELDS:
        raise InvalidMemoryData([FieldViolation(
            "/schema/properties", f"{len(properties)} fields; a structure may have at most {MAX_FIELDS}")])
    violations: list[FieldViolation] = []
    seen: dict[str, str] = {}
    for name in properties:
        pointer = f"/schema/properties/{_escape(name)}"
        folded = name.lower()
        if not FIELD_NAME.match(name):
            violations.append(FieldViolation(
                pointer, "a field's name is 1 to 63 letters, digits and _, not starting with a digit (it becomes a "
                         "column)"))
        elif folded in VIEW_COLUMNS:
            violations.append(FieldViolation(pointer, f"{', '.join(VIEW_COLUMNS)} are the view's own columns; "
                                                      "rename the field"))
        elif folded.startswith(RESERVED_PREFIXES):
            violations.append(FieldViolation(
                pointer, f"a field's name may not start with {' or '.join(RESERVED_PREFIXES)}"))
        elif folded in seen:
            violations.append(FieldViolation(
                pointer, f"differs from the field {seen[folded]!r} only in case, and SQLite's column names ignore "
                         "case"))
        seen.setdefault(folded, name)
    if violations:
        raise InvalidMemoryData(violations)


def _kind(spec: Any) -> str:
    kind = spec.get("type") if isinstance(spec, Mapping) else None
    return _SCALAR_KINDS.get(kind, "json") if isinstance(kind, str) else "json"


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")
