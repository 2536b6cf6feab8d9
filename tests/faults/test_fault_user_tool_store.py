"""Fault injection: the store's PostgreSQL stopped under a server, as UserToolService and its callers see it.

A request that needs the database while it is down is UNAVAILABLE with reason STORE_UNAVAILABLE and a message
that says to retry, never INTERNAL, and never the database's address or password (those stay in the server's
log, under the incident id the message quotes); a caller without the right is still PERMISSION_DENIED first; and
the same request succeeds once the database is back. The cluster is this module's own, so that stopping it
disturbs no other test.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator
from pathlib import Path

import grpc
import psycopg
import pytest
from google.protobuf import field_mask_pb2

from toolhost.v1 import user_tool_service_pb2 as pb
from toolhost.v1 import user_tool_service_pb2_grpc
from toolhost_server.auth import hash_token

from helpers.cli import cli_env, toolhost
from helpers.servers import ServerFactory
from helpers.status import error_details
from postgres_cluster import PostgresCluster, throwaway_cluster

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresCluster]:
    with throwaway_cluster() as running:
        yield running


@pytest.fixture
def database(cluster: PostgresCluster) -> Iterator[str]:
    """A new database of the module's cluster; the cluster runs again afterwards, whatever the test did."""
    name = cluster.create_database()
    yield name
    try:
        cluster.execute("SELECT 1")
    except psycopg.OperationalError:
        cluster.start()
    cluster.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def tool(slug: str) -> pb.UserTool:
    return pb.UserTool(slug=slug, description="Says hi.", script="echo hi")


async def test_a_stopped_database_is_unavailable_saying_to_retry_and_the_retry_works(
        start_server: ServerFactory, cluster: PostgresCluster, database: str, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    tokens = {"smith": secrets.token_urlsafe(32), "caller": secrets.token_urlsafe(32)}
    (tmp_path / "auth.yaml").write_text(
        "roles:\n  toolsmith: {manage_tools: true}\n  caller: {call: {tools: ['*']}}\n"
        f"tokens:\n  - {{name: smith, sha256: {hash_token(tokens['smith'])}, roles: [toolsmith]}}\n"
        f"  - {{name: caller, sha256: {hash_token(tokens['caller'])}, roles: [caller]}}\n")
    url = cluster.url(database)
    server = await start_server(database_url=url.render_as_string(hide_password=False), process_user="nobody",
                                auth_file=str(tmp_path / "auth.yaml"), data_dir=str(tmp_path / "data"))
    stub = user_tool_service_pb2_grpc.UserToolServiceStub(server.channel)
    smith = (("authorization", f"Bearer {tokens['smith']}"),)
    caller = (("authorization", f"Bearer {tokens['caller']}"),)
    await stub.CreateUserTool(pb.CreateUserToolRequest(user_tool=tool("kept_tool")), metadata=smith)

    cluster.stop()
    caplog.set_level(logging.WARNING, logger="toolhost.api")
    requests = [
        (stub.GetUserTool, pb.GetUserToolRequest(slug="kept_tool")),
        (stub.ListUserTools, pb.ListUserToolsRequest()),
        (stub.CreateUserTool, pb.CreateUserToolRequest(user_tool=tool("new_tool"))),
        (stub.UpdateUserTool, pb.UpdateUserToolRequest(user_tool=pb.UserTool(slug="kept_tool", script="echo new"),
                                                       update_mask=field_mask_pb2.FieldMask(paths=["script"]))),
        (stub.ListUserToolVersions, pb.ListUserToolVersionsRequest(slug="kept_tool")),
        (stub.ListToolConflicts, pb.ListToolConflictsRequest()),
    ]
    for rpc, request in requests:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await rpc(request, metadata=smith)
        error = caught.value
        assert error.code() == grpc.StatusCode.UNAVAILABLE, (rpc, error.code(), error.details())
        info, _ = error_details(error)
        assert info.reason == "STORE_UNAVAILABLE" and info.metadata["incident"]
        details = error.details() or ""
        assert "retry later" in details and info.metadata["incident"] in details
        # Where the database is, and its password, are the operator's: in the log, not in the answer.
        for secret in (cluster.password, str(cluster.port), database):
            assert secret not in details
        assert any(info.metadata["incident"] in record.getMessage() and database in record.getMessage()
                   for record in caplog.records)
        # A caller without the right learns nothing of the database's state: PERMISSION_DENIED comes first.
        with pytest.raises(grpc.aio.AioRpcError) as denied:
            await rpc(request, metadata=caller)
        assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED, denied.value.details()

    # The CLI says the same in a sentence: the server was reached (exit status 1, not 3 for unreachable).
    (tmp_path / "token").write_text(tokens["smith"])
    env = cli_env(TOOLHOST_TARGET=server.target, TOOLHOST_TOKEN_FILE=str(tmp_path / "token"))
    code, _, err = await toolhost("user-tools", "show", "kept_tool", env=env)
    assert code == 1 and err.startswith("toolhost: UNAVAILABLE: the server's database cannot be used now; retry later")
    assert cluster.password not in err

    cluster.start()
    got = await stub.GetUserTool(pb.GetUserToolRequest(slug="kept_tool"), metadata=smith)
    assert got.user_tool.version == 1
    created = await stub.CreateUserTool(pb.CreateUserToolRequest(user_tool=tool("new_tool")), metadata=smith)
    assert created.user_tool.version == 1
