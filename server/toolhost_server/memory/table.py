"""MemoryTable: the structures and records of the memory tools in the store, each change one transaction that is
committed before the tool answers. Blocking: the tools call it in a thread.

On PostgreSQL a structure's view is created and dropped with it, in the memory schema, once `toolhost db
init-memory-role` has made that schema; sync_postgres_views makes up for structures created before.

Races: a change that depends on what it read locks that row first (SELECT ... FOR UPDATE on PostgreSQL; on SQLite
every transaction begins IMMEDIATE, so they take turns anyway). Adding a record locks its structure's row, so two
adds cannot both pass the cap, and one racing the structure's deletion finds the structure gone (NOT_FOUND); a
merge locks its record, so two merges of one record apply one after the other.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, update
from sqlalchemy import text as sql_text

from ..errors import FieldViolation, InvalidArgumentsError
from ..schema import ArgumentValidator
from ..store.database import Store
from ..store.schema import memory_query_role, memory_records, memory_structures
from .errors import (
    InvalidMemoryData,
    MemoryFull,
    RecordNotFound,
    StructureExists,
    StructureInUse,
    StructureNotFound,
)
from .structures import (
    MAX_RECORD_BYTES,
    Column,
    check_record_schema,
    check_structure_name,
    columns_of,
)
from .views import POSTGRES_SCHEMA, postgres_view

MAX_STRUCTURES = 1000
MAX_RECORDS_PER_STRUCTURE = 100_000
# memory_query calls running at once per server: each holds a thread (and on PostgreSQL a connection) up to its
# timeout, so more would starve the server's other blocking work. One more is refused, not queued (memory_tools.py).
MAX_CONCURRENT_QUERIES = 2

# pg_advisory_xact_lock(int, int): this class, key 0. Structure changes and view syncs take turns, so that two
# replicas never create or drop the same view at once.
_MEMORY_LOCK_CLASS = 0x6D656D6F  # "memo"
_LOCK_MEMORY = sql_text("SELECT pg_advisory_xact_lock(CAST(:lock_class AS integer), 0)")


@dataclass(frozen=True, slots=True)
class Structure:
    """A structure as stored, with its view's columns and how many records it holds."""

    name: str
    description: str
    record_schema: dict[str, Any]
    created_by: str
    created_at: datetime
    record_count: int

    @property
    def columns(self) -> tuple[Column, ...]:
        return columns_of(self.record_schema)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "schema": self.record_schema,
                "columns": ["id", "created_at", "updated_at", *(column.name for column in self.columns)],
                "created_by": self.created_by, "created_at": self.created_at.isoformat(),
                "record_count": self.record_count}


@dataclass(frozen=True, slots=True)
class Record:
    """One record: its id (unique across structures), its structure, its data, and who wrote it when."""

    id: int
    structure: str
    data: dict[str, Any]
    created_by: str
    updated_by: str
    created_at: datetime
    updated_at: datetime

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "structure": self.structure, "data": self.data, "created_by": self.created_by,
                "updated_by": self.updated_by, "created_at": self.created_at.isoformat(),
                "updated_at": self.updated_at.isoformat()}


class MemoryTable:
    """Structures and records, shared by every caller of the memory tools:

        table = MemoryTable(store)
        table.create_structure("people", "who we met", {"type": "object", "properties": {...}}, "alice")
        record = table.create_record("people", {"name": "Ada"}, "alice")
        table.update_record("people", record.id, {"age": 36}, "merge", "bob")
        table.delete_structure("people", force=True)
    """

    def __init__(self, store: Store, max_records_per_structure: int = MAX_RECORDS_PER_STRUCTURE) -> None:
        self.store = store
        self.max_records_per_structure = max_records_per_structure
        # Taken by memory_query for as long as its thread runs (also past a caller that gave up).
        self.query_slots = threading.BoundedSemaphore(MAX_CONCURRENT_QUERIES)

    def create_structure(self, name: str, description: str, record_schema: Any, caller: str) -> Structure:
        check_structure_name(name)
        check_record_schema(record_schema)
        with self.store.begin() as connection:
            _lock_memory(connection)
            if _structure_row(connection, name) is not None:
                raise StructureExists(f"a structure named {name!r} exists already; memory_structure_get shows it")
            count = connection.execute(select(func.count()).select_from(memory_structures)).scalar_one()
            if count >= MAX_STRUCTURES:
                raise MemoryFull(f"the memory holds {count} structures, the most it may; delete one no longer "
                                     "needed")
            now = datetime.now(UTC)
            connection.execute(insert(memory_structures).values(
                name=name, description=description, record_schema=dict(record_schema), created_by=caller,
                created_at=now))
            structure = Structure(name, description, dict(record_schema), caller, now, 0)
            if connection.dialect.name == "postgresql":
                role = _postgres_role(connection)
                if role is not None:
                    _create_postgres_view(connection, structure, role)
            return structure

    def get_structure(self, name: str) -> Structure:
        with self.store.begin() as connection:
            return _structure(connection, name)

    def list_structures(self) -> list[Structure]:
        counts = (select(memory_records.c.structure, func.count().label("records"))
                  .group_by(memory_records.c.structure).subquery())
        with self.store.begin() as connection:
            rows = connection.execute(
                select(memory_structures, counts.c.records)
                .join(counts, counts.c.structure == memory_structures.c.name, isouter=True)
                .order_by(memory_structures.c.name)).all()
        return [_structure_of(row, row.records or 0) for row in rows]

    def delete_structure(self, name: str, force: bool) -> int:
        """Delete a structure, and its records when `force`; how many records went with it."""
        with self.store.begin() as connection:
            _lock_memory(connection)
            structure = _structure(connection, name, for_update=True)
            if structure.record_count and not force:
                raise StructureInUse(
                    f"the structure {name!r} still holds {structure.record_count} records; delete them first, or "
                    "pass force=true to delete them with it")
            if connection.dialect.name == "postgresql" and _postgres_schema_exists(connection):
                connection.execute(sql_text(f'DROP VIEW IF EXISTS {POSTGRES_SCHEMA}."{name}"'))
            removed = connection.execute(delete(memory_records).where(memory_records.c.structure == name)).rowcount
            connection.execute(delete(memory_structures).where(memory_structures.c.name == name))
            return int(removed)

    def create_record(self, structure_name: str, data: Any, caller: str) -> Record:
        now = datetime.now(UTC)
        with self.store.begin() as connection:
            # Locked until the insert commits: the count below then includes every add committed before.
            structure = _structure(connection, structure_name, for_update=True)
            if structure.record_count >= self.max_records_per_structure:
                raise MemoryFull(
                    f"the structure {structure_name!r} holds {structure.record_count} records, the most one may; "
                    "delete records no longer needed")
            checked = _checked_data(structure, data)
            record_id = connection.execute(insert(memory_records).values(
                structure=structure_name, data=checked, created_by=caller, updated_by=caller, created_at=now,
                updated_at=now).returning(memory_records.c.id)).scalar_one()
            return Record(int(record_id), structure_name, checked, caller, caller, now, now)

    def update_record(self, structure_name: str, record_id: int, data: Any, mode: str, caller: str) -> Record:
        """Change a record's data: `merge` applies `data` as a JSON merge patch (RFC 7386: null removes a field,
        objects merge), `replace` puts `data` in its place; the result must satisfy the schema either way."""
        now = datetime.now(UTC)
        with self.store.begin() as connection:
            structure = _structure(connection, structure_name)
            record = _record(connection, structure_name, record_id, for_update=True)
            new_data = merge_patch(record.data, data) if mode == "merge" else data
            checked = _checked_data(structure, new_data)
            connection.execute(update(memory_records).where(memory_records.c.id == record_id).values(
                data=checked, updated_by=caller, updated_at=now))
            return Record(record.id, structure_name, checked, record.created_by, caller, record.created_at, now)

    def delete_record(self, structure_name: str, record_id: int) -> Record:
        with self.store.begin() as connection:
            _structure(connection, structure_name)
            record = _record(connection, structure_name, record_id)
            connection.execute(delete(memory_records).where(memory_records.c.id == record_id))
            return record

    def postgres_role(self) -> str | None:
        """The memory role `toolhost db init-memory-role` made for this database, or None."""
        with self.store.begin() as connection:
            return _postgres_role(connection)

    def sync_postgres_views(self) -> tuple[str, str] | None:
        """Create the views of structures that have none and drop those of structures gone, granted to the
        memory role; (role, password) for memory_query, or None before `toolhost db init-memory-role`."""
        with self.store.begin() as connection:
            row = connection.execute(select(memory_query_role.c.role, memory_query_role.c.password)).first()
            if row is None or not _postgres_schema_exists(connection):
                return None
            existing = set(connection.execute(
                sql_text("SELECT viewname FROM pg_views WHERE schemaname = :schema"),
                {"schema": POSTGRES_SCHEMA}).scalars())
            names = set(connection.execute(select(memory_structures.c.name)).scalars())
            if existing != names:
                _lock_memory(connection)
                for stale in existing - names:
                    connection.execute(sql_text(f'DROP VIEW IF EXISTS {POSTGRES_SCHEMA}."{stale}"'))
                for name in sorted(names - existing):
                    _create_postgres_view(connection, _structure(connection, name), row.role)
            return str(row.role), str(row.password)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch of `target` by `patch`."""
    if not isinstance(patch, Mapping):
        return patch
    merged = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def _checked_data(structure: Structure, data: Any) -> dict[str, Any]:
    """The data as it will be stored (defaults filled, whole numbers as integers), or InvalidMemoryData with
    pointers under /data."""
    if not isinstance(data, Mapping):
        raise InvalidMemoryData([FieldViolation("/data", "a record's data is a JSON object")])
    try:
        prepared = ArgumentValidator(structure.record_schema).prepare(structure.name, data)
    except InvalidArgumentsError as exc:
        raise InvalidMemoryData([
            FieldViolation(f"/data{v.pointer}", v.reason.replace("argument", "field").replace(
                "the fields are", f"the fields of {structure.name!r} are"))
            for v in exc.violations]) from None
    # Measured as the store writes it (json.dumps: ASCII, non-ASCII characters as \u escapes).
    size = len(json.dumps(prepared))
    if size > MAX_RECORD_BYTES:
        raise InvalidMemoryData([FieldViolation(
            "/data", f"{size} bytes as stored JSON (a non-ASCII character counts as its \\u escape, 6 or 12 bytes); "
                     f"a record may hold at most {MAX_RECORD_BYTES}: keep large texts elsewhere")])
    return prepared


def _structure_row(connection: Connection, name: str, for_update: bool = False) -> Any:
    query = select(memory_structures).where(memory_structures.c.name == name)
    # SQLite has no FOR UPDATE (SQLAlchemy leaves it out there): its IMMEDIATE transactions already take turns.
    return connection.execute(query.with_for_update() if for_update else query).first()


def _structure(connection: Connection, name: str, for_update: bool = False) -> Structure:
    row = _structure_row(connection, name, for_update)
    if row is None:
        raise StructureNotFound(f"no structure named {name!r}; memory_structure_get without a name lists them")
    count = connection.execute(
        select(func.count()).where(memory_records.c.structure == name)).scalar_one()
    return _structure_of(row, int(count))


def _structure_of(row: Any, record_count: int) -> Structure:
    return Structure(row.name, row.description, dict(row.record_schema), row.created_by, _aware(row.created_at),
                     record_count)


def _record(connection: Connection, structure: str, record_id: int, for_update: bool = False) -> Record:
    query = select(memory_records).where(memory_records.c.id == record_id, memory_records.c.structure == structure)
    row = connection.execute(query.with_for_update() if for_update else query).first()
    if row is None:
        raise RecordNotFound(f"the structure {structure!r} has no record {record_id}; memory_query finds ids "
                             f"(SELECT id FROM {structure})")
    return Record(int(row.id), row.structure, dict(row.data), row.created_by, row.updated_by,
                  _aware(row.created_at), _aware(row.updated_at))


def _lock_memory(connection: Connection) -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(_LOCK_MEMORY, {"lock_class": _MEMORY_LOCK_CLASS})


def _postgres_role(connection: Connection) -> str | None:
    role = connection.execute(select(memory_query_role.c.role)).scalar()
    return str(role) if role is not None else None


def _postgres_schema_exists(connection: Connection) -> bool:
    return connection.execute(sql_text("SELECT to_regnamespace(:schema) IS NOT NULL"),
                              {"schema": POSTGRES_SCHEMA}).scalar_one() is True


def _create_postgres_view(connection: Connection, structure: Structure, role: str) -> None:
    if not _postgres_schema_exists(connection):
        return
    connection.execute(sql_text(postgres_view(structure.name, structure.columns)))
    quoted_role = connection.dialect.identifier_preparer.quote(role)
    connection.execute(sql_text(f'GRANT SELECT ON {POSTGRES_SCHEMA}."{structure.name}" TO {quoted_role}'))


def _aware(moment: datetime) -> datetime:
    # SQLite keeps no time zone: the times written were UTC.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
