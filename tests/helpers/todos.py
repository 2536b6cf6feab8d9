"""The todo tool called over gRPC (`todo`, `todo_failure`), two callers with tokens of their own, and the Config
fields that point a server at a test database."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from sqlalchemy import URL

from toolhost.v1 import tool_service_pb2, tool_service_pb2_grpc
from toolhost_server.auth import hash_token

Stub = tool_service_pb2_grpc.ToolServiceStub


async def call_tool(stub: Stub, name: str, token: str = "", **arguments: Any) -> tool_service_pb2.CallToolResponse:
    """The response of tool `name`, called with `arguments` and, when given, a bearer token."""
    metadata = (("authorization", f"Bearer {token}"),) if token else None
    response: tool_service_pb2.CallToolResponse = await stub.CallTool(
        tool_service_pb2.CallToolRequest(name=name, arguments_json=json.dumps(arguments)), metadata=metadata)
    return response


async def todo(stub: Stub, token: str = "", **arguments: Any) -> dict[str, Any]:
    """The structured output of a todo call that must succeed."""
    response = await call_tool(stub, "todo", token, **arguments)
    assert response.success, response.error
    output: dict[str, Any] = MessageToDict(response.structured_output)
    return output


async def todo_failure(stub: Stub, token: str = "", **arguments: Any) -> tuple[str, str]:
    """The error code and message of a todo call that must fail (success=false)."""
    response = await call_tool(stub, "todo", token, **arguments)
    assert not response.success, response.output
    return response.error.code, response.error.message


def contents(output: dict[str, Any]) -> list[tuple[int, str, str]]:
    """(id, content, status) of each item of a todo output."""
    return [(int(item["id"]), item["content"], item["status"]) for item in output["items"]]


def two_callers_auth_file(path: Path) -> tuple[str, str]:
    """Write an auth file with callers alice and bob, both allowed the agent tools; their tokens."""
    alice, bob = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    path.write_text(f"""\
roles:
  agent:
    call: {{categories: [agent]}}
tokens:
  - {{name: alice, sha256: {hash_token(alice)}, roles: [agent]}}
  - {{name: bob, sha256: {hash_token(bob)}, roles: [agent]}}
""")
    return alice, bob


def store_settings(database: URL, tmp_path: Path) -> dict[str, str]:
    """Config fields that point a server at `database` (a SQLite file in a data dir, or a PostgreSQL URL)."""
    if database.get_backend_name() == "sqlite":
        assert database.database is not None
        return {"data_dir": str(Path(database.database).parent)}
    return {"database_url": database.render_as_string(hide_password=False), "data_dir": str(tmp_path / "unused")}
