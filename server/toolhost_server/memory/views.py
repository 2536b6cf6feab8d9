"""The SQL of a structure's view: its records' id and times, then one column per top-level field, read out of the
JSON `data` of memory_records. Names come from structures.py's checks (identifiers only), so they are quoted
here and never carry a quote themselves."""

from __future__ import annotations

from collections.abc import Sequence

from .structures import Column

# PostgreSQL: the schema the views live in, the memory role's only one (its search_path).
POSTGRES_SCHEMA = "toolhost_memory"

_POSTGRES_CASTS = {"text": "", "number": "::numeric", "boolean": "::boolean"}


def sqlite_view(name: str, columns: Sequence[Column]) -> str:
    """CREATE TEMP VIEW for one memory_query connection: temp views see the main database's tables, and
    shadow nothing of it but for that connection."""
    fields = "".join(f", json_extract(r.data, '$.\"{column.name}\"') AS \"{column.name}\"" for column in columns)
    return (f'CREATE TEMP VIEW "{name}" AS SELECT r.id AS id, r.created_at AS created_at, '
            f"r.updated_at AS updated_at{fields} FROM main.memory_records AS r WHERE r.structure = '{name}'")


def postgres_view(name: str, columns: Sequence[Column]) -> str:
    """CREATE VIEW in the memory schema, owned by the server's user: the memory role reads the view, and the
    view (with its owner's rights) reads memory_records, which the role may not."""
    fields = "".join(_postgres_field(column) for column in columns)
    return (f'CREATE VIEW {POSTGRES_SCHEMA}."{name}" AS SELECT r.id AS id, r.created_at AS created_at, '
            f"r.updated_at AS updated_at{fields} FROM memory_records AS r WHERE r.structure = '{name}'")


def _postgres_field(column: Column) -> str:
    if column.kind == "json":
        return f", (r.data -> '{column.name}') AS \"{column.name}\""
    return f", (r.data ->> '{column.name}'){_POSTGRES_CASTS[column.kind]} AS \"{column.name}\""
