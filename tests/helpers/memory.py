"""The memory tools called over gRPC, the database a test runs them on (with PostgreSQL's memory role made by the
real `toolhost db init-memory-role`), and a dump of every table to tell that a query changed nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.json_format import MessageToDict
from sqlalchemy import URL, inspect, select, text

from toolhost.v1 import tool_service_pb2
from toolhost_server.store.engine import create_store_engine

from helpers.cli import cli_env, toolhost
from helpers.todos import Stub

PEOPLE_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                                  "friend_id": {"type": "integer"}, "tags": {"type": "array"}},
                 "required": ["name"], "additionalProperties": False}


async def call_memory_tool(stub: Stub, tool: str, token: str, arguments: dict[str, Any]) -> Any:
    """The response of `tool` (the arguments as a dict: memory tools take a `name`, as CallToolRequest does)."""
    metadata = (("authorization", f"Bearer {token}"),) if token else None
    return await stub.CallTool(tool_service_pb2.CallToolRequest(name=tool, arguments_json=json.dumps(arguments)),
                               metadata=metadata)


async def memory(stub: Stub, tool: str, token: str = "", **arguments: Any) -> dict[str, Any]:
    """The structured output of a memory tool call that must succeed."""
    response = await call_memory_tool(stub, tool, token, arguments)
    assert response.success, response.error
    output: dict[str, Any] = MessageToDict(response.structured_output)
    return output


async def memory_refused(stub: Stub, tool: str, token: str = "", **arguments: Any) -> grpc.aio.AioRpcError:
    """The gRPC error of a memory tool call that must be refused."""
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call_memory_tool(stub, tool, token, arguments)
    return refused.value


async def init_memory_role(database: URL) -> None:
    """On PostgreSQL, `toolhost db init-memory-role` for the database, as a real command; nothing on SQLite."""
    if database.get_backend_name() != "postgresql":
        return
    run = await toolhost("db", "init-memory-role", env=cli_env(
        TOOLHOST_DATABASE_URL=database.render_as_string(hide_password=False)))
    assert run.code == 0, run.err
    assert "memory role" in run.out


def dump(database: URL) -> dict[str, Any]:
    """Every row of every table (and, on PostgreSQL, the memory schema's views and the cluster's roles)."""
    engine = create_store_engine(database)
    try:
        with engine.connect() as connection:
            tables = sorted(inspect(connection).get_table_names())
            rows: dict[str, Any] = {}
            for name in tables:
                table = inspect(connection).get_columns(name)
                columns = [column["name"] for column in table]
                result = connection.execute(select(text(", ".join(f'"{c}"' for c in columns)))
                                            .select_from(text(f'"{name}"')))
                rows[name] = sorted(repr(tuple(row)) for row in result)
            if database.get_backend_name() == "postgresql":
                rows["views"] = sorted(connection.execute(text(
                    "SELECT schemaname || '.' || viewname || ':' || definition FROM pg_views "
                    "WHERE schemaname NOT IN ('pg_catalog', 'information_schema')")).scalars())
                rows["roles"] = sorted(connection.execute(text("SELECT rolname FROM pg_roles")).scalars())
                rows["large_objects"] = connection.execute(
                    text("SELECT count(*) FROM pg_largeobject_metadata")).scalar_one()
            return rows
    finally:
        engine.dispose()


def data_dir_of(database: URL) -> Path:
    assert database.database is not None
    return Path(database.database).parent
