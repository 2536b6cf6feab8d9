"""Reads a database's tables (columns, primary key, indexes, foreign keys) through SQLAlchemy's inspector, within
bounds: the names of at most MAX_TABLES tables are listed (the rest only counted), at most MAX_COLUMNS columns each
are described, every name and default cut at MAX_TEXT_CHARS."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, inspect
from sqlalchemy.engine import Inspector
from sqlalchemy.engine.reflection import ObjectKind, ObjectScope

# A schema can hold tens of thousands of tables: the first MAX_TABLES (by schema, then name) are described,
# the rest counted and named in a note. Each description costs a few catalog queries per table on SQLite.
MAX_TABLES = 500
# SQLite allows 2000 columns, PostgreSQL 1600.
MAX_COLUMNS = 250
MAX_INDEXES = 100  # per table, and as many foreign keys
# A name, type or default longer than this (a hostile schema's megabyte name) is cut, with "…".
MAX_TEXT_CHARS = 500
_CLOSE_NAMES = 5
# Names compared with a `table` that matches nothing, for suggestions: enough for any real schema, and a bound on
# the work a hostile one can ask for.
CLOSE_CANDIDATES = 5000


@dataclass(frozen=True, slots=True, order=True)
class TableName:
    """A table: its schema (PostgreSQL; None on SQLite) and name."""

    schema: str | None
    name: str

    @property
    def label(self) -> str:
        return f"{self.schema}.{self.name}" if self.schema else self.name


@dataclass
class TableListing:
    """The first tables of a database in the order they are shown (the default schema's first, then by schema and
    name, in byte order), and how many it has in all: a hostile schema's hundred thousand names are counted by
    the database, never brought into memory."""

    names: list[TableName]
    total: int
    default_schema: str | None


# The query's parts, for SQLite and PostgreSQL: which rows of the catalog are tables (SQLAlchemy's get_table_names
# takes the same: SQLite's own sqlite_* tables and PostgreSQL's pg_* schemas, temporary tables and foreign tables
# are left out), and the columns that name them.
_SQLITE_TABLES = "FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite~_%' ESCAPE '~'"
_POSTGRES_TABLES = ("FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE c.relkind IN ('r', 'p') AND c.relpersistence <> 't' "
                    "AND left(n.nspname, 3) <> 'pg_' AND n.nspname <> 'information_schema'")
_POSTGRES_ORDER = 'ORDER BY n.nspname <> current_schema(), n.nspname COLLATE "C", c.relname COLLATE "C"'


def list_tables(connection: Connection, limit: int) -> TableListing:
    """The first `limit` tables, and the number of tables."""
    if connection.dialect.name != "postgresql":
        names = [TableName(None, str(name)) for (name,) in connection.exec_driver_sql(
            f"SELECT name {_SQLITE_TABLES} ORDER BY name LIMIT ?", (limit,))]
        total = connection.exec_driver_sql(f"SELECT count(*) {_SQLITE_TABLES}").scalar_one()
        return TableListing(names, int(total), None)
    names = [TableName(str(schema), str(name)) for schema, name in connection.exec_driver_sql(
        f"SELECT n.nspname, c.relname {_POSTGRES_TABLES} {_POSTGRES_ORDER} LIMIT %(limit)s", {"limit": limit})]
    total = connection.exec_driver_sql(f"SELECT count(*) {_POSTGRES_TABLES}").scalar_one()
    default = connection.exec_driver_sql("SELECT current_schema()").scalar_one()
    return TableListing(names, int(total), str(default) if default is not None else None)


def find_tables(connection: Connection, wanted: str) -> list[TableName]:
    """The tables `wanted` names: `schema.table`, or a table name in any schema."""
    if connection.dialect.name != "postgresql":
        return [TableName(None, str(name)) for (name,) in connection.exec_driver_sql(
            f"SELECT name {_SQLITE_TABLES} AND name = ? ORDER BY name", (wanted,))]
    return [TableName(str(schema), str(name)) for schema, name in connection.exec_driver_sql(
        f"SELECT n.nspname, c.relname {_POSTGRES_TABLES} "
        "AND (c.relname = %(wanted)s OR n.nspname || '.' || c.relname = %(wanted)s) "
        f"{_POSTGRES_ORDER} LIMIT %(limit)s", {"wanted": wanted, "limit": MAX_TABLES})]


def close_table_names(connection: Connection, wanted: str) -> list[str]:
    """Up to five table names (or schema.name labels) close to `wanted`, among the first CLOSE_CANDIDATES tables."""
    listing = list_tables(connection, CLOSE_CANDIDATES)
    labels = {table.label for table in listing.names} | {table.name for table in listing.names}
    return difflib.get_close_matches(wanted, sorted(labels), n=_CLOSE_NAMES)


@dataclass
class TableDescriptions:
    tables: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)


def describe_tables(connection: Connection, tables: Sequence[TableName]) -> TableDescriptions:
    """Columns, primary key, indexes and foreign keys of each of `tables`, in their order."""
    inspector = inspect(connection)
    # PostgreSQL's reflection leaves out the schema of a referred table in the search path: named here instead.
    default_schema = inspector.default_schema_name if connection.dialect.name == "postgresql" else None
    result = TableDescriptions([])
    for schema, names in _by_schema(tables).items():
        described = _Described.read(inspector, connection.dialect.name, schema, names)
        for name in names:
            key = (schema, name)
            declared: dict[str, str] = {}
            if connection.dialect.name == "sqlite":
                declared = _sqlite_declared_types(connection, name)
                _add_sqlite_foreign_key_actions(connection, name, described.foreign_keys.get(key, []))
            result.tables.append(_table_entry(connection, TableName(schema, name), described, key, declared,
                                              default_schema, result.notes))
    return result


def _sqlite_declared_types(connection: Connection, table: str) -> dict[str, str]:
    """Each column's type as its CREATE TABLE declares it: SQLAlchemy shows a type it does not know
    (`geometry`, `jsonb`) by its SQLite affinity (NUMERIC), which would misdescribe the column."""
    rows = connection.exec_driver_sql("SELECT name, type FROM pragma_table_xinfo(?)", (table,))
    return {str(name): str(declared) for name, declared in rows if declared}


def _add_sqlite_foreign_key_actions(connection: Connection, table: str, foreign_keys: list[Any]) -> None:
    """ON DELETE and ON UPDATE of each foreign key, which SQLAlchemy's SQLite reflection leaves out; NO ACTION
    (the default) stays unset, as PostgreSQL's reflection reports it."""
    actions: dict[tuple[str, tuple[str, ...]], tuple[str, str]] = {}
    columns: dict[int, list[str]] = {}
    rows = connection.exec_driver_sql(
        'SELECT id, "table", "from", on_update, on_delete FROM pragma_foreign_key_list(?) ORDER BY id, seq',
        (table,)).all()
    for key_id, referred, column, on_update, on_delete in rows:
        columns.setdefault(key_id, []).append(str(column))
        actions[(str(referred), tuple(columns[key_id]))] = (str(on_update), str(on_delete))
    for foreign_key in foreign_keys:
        found = actions.get((foreign_key.get("referred_table") or "", tuple(foreign_key.get("constrained_columns")
                                                                            or ())))
        if found is None:
            continue
        options = foreign_key.setdefault("options", {})
        for option, action in zip(("onupdate", "ondelete"), found, strict=True):
            if action != "NO ACTION":
                options.setdefault(option, action)


@dataclass
class _Described:
    columns: dict[tuple[str | None, str], list[Any]]
    primary_keys: dict[tuple[str | None, str], Any]
    indexes: dict[tuple[str | None, str], list[Any]]
    foreign_keys: dict[tuple[str | None, str], list[Any]]

    @classmethod
    def read(cls, inspector: Inspector, dialect: str, schema: str | None, names: list[str]) -> _Described:
        # The get_multi_ calls read a whole schema's catalog in one query each on PostgreSQL, not one per table.
        # On SQLite they would first list every table of the file to filter it by `names` (a hostile file's
        # hundred thousand): any kind and scope takes the names as given.
        wide: dict[str, Any] = {"kind": ObjectKind.ANY, "scope": ObjectScope.ANY} if dialect == "sqlite" else {}
        return cls(dict(inspector.get_multi_columns(schema, filter_names=names, **wide)),
                   dict(inspector.get_multi_pk_constraint(schema, filter_names=names, **wide)),
                   dict(inspector.get_multi_indexes(schema, filter_names=names, **wide)),
                   dict(inspector.get_multi_foreign_keys(schema, filter_names=names, **wide)))


def _by_schema(tables: Iterable[TableName]) -> dict[str | None, list[str]]:
    grouped: dict[str | None, list[str]] = {}
    for table in tables:
        grouped.setdefault(table.schema, []).append(table.name)
    return grouped


def _table_entry(connection: Connection, table: TableName, described: _Described, key: tuple[str | None, str],
                 declared: dict[str, str], default_schema: str | None, notes: list[str]) -> dict[str, Any]:
    columns = described.columns.get(key, [])
    indexes = described.indexes.get(key, [])
    foreign_keys = described.foreign_keys.get(key, [])
    primary_key = described.primary_keys.get(key) or {}
    entry: dict[str, Any] = {"name": short(table.name)}
    if table.schema is not None:
        entry["schema"] = short(table.schema)
    entry["columns"] = [_column(connection, column, declared) for column in columns[:MAX_COLUMNS]]
    entry["column_count"] = len(columns)
    entry["primary_key"] = [short(name) for name in primary_key.get("constrained_columns") or []]
    entry["indexes"] = [_index(index) for index in indexes[:MAX_INDEXES]]
    entry["foreign_keys"] = [_foreign_key(foreign_key, default_schema) for foreign_key in foreign_keys[:MAX_INDEXES]]
    for what, found, limit in (("columns", columns, MAX_COLUMNS), ("indexes", indexes, MAX_INDEXES),
                               ("foreign keys", foreign_keys, MAX_INDEXES)):
        if len(found) > limit:
            notes.append(f"table {short(table.label)} has {len(found)} {what}; the first {limit} are shown")
    return entry


def _column(connection: Connection, column: Any, declared: dict[str, str]) -> dict[str, Any]:
    default = column.get("default")
    type_text = declared.get(column["name"]) or _type_text(connection, column["type"])
    return {"name": short(column["name"]), "type": short(type_text),
            "nullable": bool(column.get("nullable", True)),
            "default": short(str(default)) if default is not None else None}


def _type_text(connection: Connection, column_type: Any) -> str:
    try:
        return str(column_type.compile(dialect=connection.dialect))
    except Exception:  # a type the dialect cannot render (SQLite's unknown declared types): its class name
        return type(column_type).__name__


def _index(index: Any) -> dict[str, Any]:
    expressions = index.get("expressions") or []
    # An expression index has None among its column names and the expression's text in `expressions`.
    columns = [name if name is not None else (expressions[i] if i < len(expressions) else "?")
               for i, name in enumerate(index.get("column_names") or [])]
    return {"name": short(index.get("name") or ""), "columns": [short(str(column)) for column in columns],
            "unique": bool(index.get("unique"))}


def _foreign_key(foreign_key: Any, default_schema: str | None) -> dict[str, Any]:
    options = foreign_key.get("options") or {}
    references: dict[str, Any] = {"table": short(foreign_key.get("referred_table") or ""),
                                  "columns": [short(name) for name in foreign_key.get("referred_columns") or []]}
    referred_schema = foreign_key.get("referred_schema") or default_schema
    if referred_schema:
        references["schema"] = short(referred_schema)
    return {"name": short(foreign_key.get("name") or ""),
            "columns": [short(name) for name in foreign_key.get("constrained_columns") or []],
            "references": references,
            "on_delete": options.get("ondelete"), "on_update": options.get("onupdate")}


def short(text: str) -> str:
    return text if len(text) <= MAX_TEXT_CHARS else text[:MAX_TEXT_CHARS - 1] + "…"
