"""PocketDev's memory tools: structures (a JSON Schema of a record) and their records, kept in the store and read
with one read-only SQL SELECT (memory_query). Memory is shared: every caller allowed to call these tools reads and
changes the same structures and records, so grant them (auth file roles) only to callers that may share."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..daemon_threads import run_in_daemon_thread
from ..errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    FieldViolation,
    InvalidArgumentsError,
    OverCapacityError,
    ResourceNotFoundError,
)
from ..model import Annotations, Example, Parameter
from ..store.errors import StoreCommitUnknownError, StoreError
from .base import Tool, ToolContext, ToolOutput, ToolRaisedFailure, ToolServices

if TYPE_CHECKING:
    from ..memory.query import QueryResult
    from ..memory.table import MemoryTable

T = TypeVar("T")

MEMORY_QUERY_TIMEOUT_SECONDS = 30.0
MAX_SQL_CHARS = 20_000
# Bytes of max_output_bytes kept for what surrounds a query's rows (the other fields, the note).
RESULT_RESERVE_BYTES = 1024
_SHARED = ("Memory is shared: every caller allowed to call the memory tools sees and changes the same structures "
           "and records.")
_STRUCTURE_NAME = Parameter(
    "structure", "string", "The structure's name.", required=True,
    schema={"pattern": "^[a-z][a-z0-9_]{0,62}$"})
_RECORD_ID = Parameter("id", "integer", "The record's id (memory_create returned it; memory_query finds it).",
                       required=True, schema={"minimum": 1, "maximum": 2**63 - 1})


class _MemoryTool(Tool):
    category = "memory"
    tags = ("memory", "pocketdev")

    @classmethod
    def unserved_because(cls, services: ToolServices) -> str:
        return "" if services.memory is not None else "no store to keep the memory in"


class MemoryStructureCreate(_MemoryTool):
    name = "memory_structure_create"
    display_name = "Memory Structure Create"
    description = (
        "Creates a memory structure: a kind of record, with a JSON Schema (type object) that every record must "
        "satisfy. Its top-level properties become the columns of a view named after the structure, which "
        f"memory_query reads (with id, created_at and updated_at). {_SHARED}")
    parameters = (
        Parameter("name", "string", "The structure's name, also its view's: lower-case letters, digits and _.",
                  required=True, schema={"pattern": "^[a-z][a-z0-9_]{0,62}$"}),
        Parameter("description", "string", "What the structure holds, for whoever reads it later.", default="",
                  schema={"maxLength": 4000}),
        Parameter("schema", "object", "The JSON Schema of one record: {\"type\": \"object\", \"properties\": "
                                      "{...}, \"required\": [...]}. Relationships are ids in fields (owner_id).",
                  required=True),
    )
    examples = (Example("A structure of people", {
        "name": "people", "description": "People we work with",
        "schema": {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                   "required": ["name"]}}),)

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        table = _memory(context)
        structure = await _in_store(lambda: table.create_structure(
            arguments["name"], arguments["description"], arguments["schema"], context.caller), context)
        return _output(f"created the structure {structure.name!r}", structure.as_dict())


class MemoryStructureGet(_MemoryTool):
    name = "memory_structure_get"
    display_name = "Memory Structure Get"
    description = (
        "Shows a memory structure (its schema, its view's columns, how many records it holds), or, without a name, "
        f"lists every structure. {_SHARED}")
    parameters = (Parameter("name", "string", "The structure to show; omit it to list them all.",
                            schema={"pattern": "^[a-z][a-z0-9_]{0,62}$"}),)
    annotations = Annotations(read_only=True, idempotent=True)

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        table = _memory(context)
        name = arguments.get("name")
        if name is None:
            structures = await _in_store(table.list_structures, context)
            listed = [structure.as_dict() for structure in structures]
            return _output(f"{len(listed)} structures", {"structures": listed})
        structure = await _in_store(lambda: table.get_structure(name), context)
        return _output(f"the structure {name!r}", structure.as_dict())


class MemoryStructureDelete(_MemoryTool):
    name = "memory_structure_delete"
    display_name = "Memory Structure Delete"
    description = (
        "Deletes a memory structure and its view. Refused while it holds records, unless force is true, which "
        f"deletes its records too. {_SHARED}")
    parameters = (
        Parameter("name", "string", "The structure to delete.", required=True,
                  schema={"pattern": "^[a-z][a-z0-9_]{0,62}$"}),
        Parameter("force", "boolean", "Delete the structure's records with it.", default=False),
    )
    annotations = Annotations(destructive=True)

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        table = _memory(context)
        name = arguments["name"]
        removed = await _in_store(lambda: table.delete_structure(name, arguments["force"]), context)
        return _output(f"deleted the structure {name!r} and {removed} records",
                       {"name": name, "deleted_records": removed})


class MemoryCreate(_MemoryTool):
    name = "memory_create"
    display_name = "Memory Create"
    description = (
        "Adds a record to a memory structure; `data` must satisfy the structure's schema (INVALID_ARGUMENT names "
        f"each field that does not). Returns the record with its id. {_SHARED}")
    parameters = (_STRUCTURE_NAME,
                  Parameter("data", "object", "The record: a JSON object that satisfies the structure's schema.",
                            required=True))
    examples = (Example("Remember a person", {"structure": "people", "data": {"name": "Ada", "age": 36}}),)

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        table = _memory(context)
        record = await _in_store(lambda: table.create_record(
            arguments["structure"], arguments["data"], context.caller), context)
        return _output(f"created record {record.id} in {record.structure!r}", record.as_dict())


class MemoryUpdate(_MemoryTool):
    name = "memory_update"
    display_name = "Memory Update"
    description = (
        "Changes a record: mode merge (the default) applies `data` as a JSON merge patch (a null removes a "
        "field), mode replace puts `data` in its place. The result must satisfy the structure's schema. "
        f"{_SHARED}")
    parameters = (_STRUCTURE_NAME, _RECORD_ID,
                  Parameter("data", "object", "The fields to change (merge) or the whole new record (replace).",
                            required=True),
                  Parameter("mode", "string", "merge or replace.", default="merge", enum=("merge", "replace")))
    annotations = Annotations(destructive=True)

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        table = _memory(context)
        record = await _in_store(lambda: table.update_record(
            arguments["structure"], arguments["id"], arguments["data"], arguments["mode"], context.caller), context)
        return _output(f"updated record {record.id} in {record.structure!r}", record.as_dict())


class MemoryDelete(_MemoryTool):
    name = "memory_delete"
    display_name = "Memory Delete"
    description = f"Deletes one record of a memory structure, by id; returns it as it was. {_SHARED}"
    parameters = (_STRUCTURE_NAME, _RECORD_ID)
    annotations = Annotations(destructive=True)

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        table = _memory(context)
        record = await _in_store(lambda: table.delete_record(arguments["structure"], arguments["id"]), context)
        return _output(f"deleted record {record.id} from {record.structure!r}", record.as_dict())


class MemoryQuery(_MemoryTool):
    name = "memory_query"
    display_name = "Memory Query"
    description = (
        "Runs one read-only SQL SELECT over the memory: each structure is a view named after it, with columns id, "
        "created_at, updated_at and one per top-level field (SELECT name, age FROM people WHERE age > 30). Only "
        "the memory views can be read, and only aggregates, window functions and common text, number, date and "
        "JSON functions called; writes, other tables, catalogs, several statements, ATTACH, PRAGMA and file "
        "functions are INVALID_ARGUMENT. At most 1000 rows and the server's max_output_bytes of JSON (truncated "
        "and note say when and why it was cut); a value over 64 KiB fails the query, and so does one that needs "
        "more temporary space for its sorting, grouping or DISTINCT than the server gives (SQLite: 128 MB of "
        "memory and 200 million steps; PostgreSQL: 64 MB of temporary files); the query is ended at the tool's "
        "timeout. Two run at once per server: another is RESOURCE_EXHAUSTED, to retry in a moment. "
        f"{_SHARED}")
    parameters = (Parameter("sql", "string", "One SELECT (or WITH ... SELECT) over the memory views.",
                            required=True, schema={"minLength": 1, "maxLength": MAX_SQL_CHARS}),)
    output_schema: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "columns": {"type": "array", "items": {"type": "string"}},
            "rows": {"type": "array", "items": {"type": "array"}, "description": "Each row's values, by column."},
            "row_count": {"type": "integer"},
            "truncated": {"type": "boolean", "description": "True when the query had more rows than were sent."},
            "note": {"type": "string", "description": "Why the rows were cut, when truncated."},
        },
        "required": ["columns", "rows", "row_count", "truncated"],
    }
    timeout_seconds = MEMORY_QUERY_TIMEOUT_SECONDS
    annotations = Annotations(read_only=True, idempotent=True)
    examples = (Example("Who is over 30", {"sql": "SELECT id, name, age FROM people WHERE age > 30 ORDER BY age"}),)

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        from ..memory.query import run_memory_query

        table = _memory(context)
        # Ended a little before the call's own timeout, so that the caller is told why rather than TIMEOUT.
        deadline = time.monotonic() + max(0.05, context.timeout_seconds * 0.8)
        limit = min(type(self).max_output_bytes or context.services.max_output_bytes,
                    context.services.max_output_bytes)
        max_bytes = max(limit - RESULT_RESERVE_BYTES, limit // 2)
        # Refused at once rather than queued: a slot frees only when a query ends (up to its whole timeout), and
        # the caller can retry sooner than a queue would tell it anything.
        if not table.query_slots.acquire(blocking=False):
            raise OverCapacityError(
                "memory_query is already running as many queries as it may at once on this server; retry in a "
                "moment, or make long queries shorter (a WHERE, a LIMIT)")

        def query() -> QueryResult:
            try:
                return run_memory_query(table, arguments["sql"], deadline, max_bytes)
            finally:
                table.query_slots.release()

        # A daemon thread of its own, not asyncio's shared pool: a slow query never delays the server's other
        # blocking work, and the slot stays taken until the thread ends, also when the caller gave up.
        result = await _in_store(query, context, lambda work: run_in_daemon_thread(work, name="memory_query"))
        lines = [json.dumps(list(result.columns), ensure_ascii=False)]
        lines.extend(json.dumps(row, ensure_ascii=False) for row in result.rows)
        structured = {"columns": list(result.columns), "rows": list(result.rows), "row_count": len(result.rows),
                      "truncated": result.truncated}
        if result.truncated:
            lines.append(f"({result.note})")
            structured["note"] = result.note
        return ToolOutput(text="\n".join(lines), structured=structured)


def _memory(context: ToolContext) -> MemoryTable:
    table = context.services.memory
    if table is None:  # the tools are not served then; only a direct run (a test) can get here
        raise RuntimeError(f"{context.tool_name} was run by a server without a store")
    return table


def _output(summary: str, structured: dict[str, Any]) -> ToolOutput:
    return ToolOutput(text=f"{summary}\n{json.dumps(structured, ensure_ascii=False, indent=1)}",
                      structured=structured)


async def _in_store(work: Callable[[], T], context: ToolContext,
                    in_thread: Callable[[Callable[[], T]], Awaitable[T]] = asyncio.to_thread) -> T:
    """`work()` in a thread; the memory's refusals as the server's errors, the store's failures as the tool's."""
    from ..memory import errors

    try:
        return await in_thread(work)
    except errors.InvalidMemoryData as exc:
        raise InvalidArgumentsError(context.tool_name, exc.violations) from None
    except errors.QueryRefused as exc:
        raise InvalidArgumentsError(context.tool_name, [FieldViolation("/sql", str(exc))]) from None
    except (errors.StructureNotFound, errors.RecordNotFound) as exc:
        raise ResourceNotFoundError(str(exc)) from None
    except errors.StructureExists as exc:
        raise AlreadyExistsError(str(exc)) from None
    except (errors.StructureInUse, errors.MemoryFull, errors.QueryUnavailable) as exc:
        raise FailedPreconditionError(str(exc)) from None
    except errors.QueryTimedOut as exc:
        raise ToolRaisedFailure(str(exc), "QUERY_TIMEOUT") from None
    except StoreCommitUnknownError:
        context.logger.warning("the memory store lost its connection while committing call %s", context.call_id,
                               exc_info=True)
        raise ToolRaisedFailure(
            "the connection to the server's database broke while the change was committed, so whether it was kept "
            "is unknown; look (memory_structure_get, memory_query) before retrying", "STORE_OUTCOME_UNKNOWN") \
            from None
    except StoreError:
        # Where the store is (a path, a URL) is for the operator's log, not for the caller.
        context.logger.warning("the memory store failed in call %s", context.call_id, exc_info=True)
        raise ToolRaisedFailure(
            f"the server's database cannot be used now; retry later (the server log has the detail under call id "
            f"{context.call_id})", "STORE_UNAVAILABLE") from None
