"""The database_schema tool: the tables of toolhost's own store and of every configured database (Config.databases),
read through introspection.database_schemas."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..introspection.database_schemas import SchemaRequest, UnknownNameError
from ..model import Annotations, Example, Parameter
from .base import Tool, ToolContext, ToolRaisedFailure, ToolServices

# What the call keeps for itself of its time: answering after the databases have been read.
_ANSWER_SECONDS = 2.0


class DatabaseSchemaTool(Tool):
    name = "database_schema"
    display_name = "Database Schema"
    description = (
        "Describes the databases this server knows: its own store (named \"store\") and every connection in its "
        "`databases` setting, all of them when `database` is not given. Returns `databases`, each with its name, "
        "dialect, URL (password shown as [REDACTED]), server version, table count and tables: columns (type, "
        "nullable, default), primary key, indexes and foreign keys, and with row_counts each table's row_count "
        "and row_count_kind (exact, estimate above a million rows, timed_out, unavailable). A database that "
        "cannot be read, or does not answer within the call's time (\"timed out\"), is an entry with `error`; "
        "the others still answer. Large schemas are cut, with a note in summary.notes. NOT_FOUND, listing close "
        "names, for an unknown database or table. Four calls read at once per server: another is "
        "RESOURCE_EXHAUSTED, to retry in a moment.")
    category = "diagnostics"
    tags = ("introspection", "diagnostics", "database")
    # Schemas show what data a deployment keeps and where its databases are: admins only.
    requires_admin = True
    timeout_seconds = 60.0
    parameters = (
        Parameter("database", "string", "Only this database: \"store\" or a name from the databases setting.",
                  schema={"pattern": "^[a-z][a-z0-9_]{0,63}$"}),
        Parameter("table", "string", "Only this table: its name, or schema.name on PostgreSQL.",
                  schema={"minLength": 1, "maxLength": 1024}),
        Parameter("row_counts", "boolean", "Count each table's rows (an estimate above a million rows).",
                  default=False),
    )
    examples = (
        Example("Every database and its tables", {}),
        Example("One table of the store, with its row count",
                {"database": "store", "table": "audit_records", "row_counts": True}),
    )
    annotations = Annotations(read_only=True, idempotent=True)

    @classmethod
    def unserved_because(cls, services: ToolServices) -> str:
        return "" if services.databases is not None else "the server has no database list here (offline validation)"

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> dict[str, Any]:
        schemas = context.services.databases
        if schemas is None:
            raise ToolRaisedFailure("this server has no database list, so there is no schema to read",
                                    "UNAVAILABLE")
        request = SchemaRequest(database=arguments.get("database"), table=arguments.get("table"),
                                row_counts=bool(arguments.get("row_counts", False)))
        seconds = max(1.0, context.timeout_seconds - _ANSWER_SECONDS)
        try:
            return await schemas.describe(request, seconds, context.logger, context.services.max_output_bytes)
        except UnknownNameError as exc:
            raise ToolRaisedFailure(str(exc), "NOT_FOUND") from None
