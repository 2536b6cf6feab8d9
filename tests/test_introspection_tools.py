"""application_info, component_inspector and config_access against real servers: what they report is the live
server's (its process, its bound port, its registry's generation, a log file that appears, a reload), the
settings' sources are those `toolhost serve` was given (a flag, a variable, a config file, the defaults), and
callers without the admin role may not call them."""

from __future__ import annotations

import json
import os
import sys
from importlib import metadata
from typing import Any

import pytest

import toolhost
from toolhost_server import __version__
from toolhost_server.auth import hash_token
from toolhost_server.catalog.builtins import unserved_builtins
from toolhost_server.store.migrations import LATEST_VERSION
from toolhost_server.tools.base import ToolServices
from toolhost_server.workspaces import Workspace

from helpers.auth import Tokens
from helpers.catalogs import write_tool
from helpers.log_drain import draining
from helpers.make_run import make_run
from helpers.servers import RunningServer, ServerProcess
from helpers.waiting import HANG_GUARD_SECONDS

TOOLS = ("application_info", "component_inspector", "config_access")
GREET = "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:greet'}\n" \
        "parameters: [{name: name, type: string, required: true}]\n"


async def answer(target: str, tool: str, token: str = "", **arguments: Any) -> dict[str, Any]:
    """The structured output of a successful call, checked to be what its text says."""
    async with toolhost.AsyncClient(target, timeout=HANG_GUARD_SECONDS, token=token or None,
                                    insecure_token_ok=True) as client:
        result = await client.call_tool(tool, arguments)
    assert result.success, result.error
    output: dict[str, Any] = result.structured_output
    assert json.loads(result.output) == output  # the text is the JSON of the structured output
    return output


async def failure(target: str, tool: str, **arguments: Any) -> toolhost.ToolError:
    async with toolhost.AsyncClient(target, timeout=HANG_GUARD_SECONDS) as client:
        result = await client.call_tool(tool, arguments)
    assert not result.success and result.error is not None
    return result.error


def by_name(components: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {component["name"]: component for component in components}


# --- application_info ----------------------------------------------------------------------------------------------

async def test_application_info_describes_this_process_its_bound_port_and_its_tools(start_server, tmp_path):
    catalog = tmp_path / "catalog"
    write_tool(catalog, "hello_probe", f"name: hello_probe\ndescription: Greets.\ncategory: probes\n{GREET}")
    server: RunningServer = await start_server(catalog_dirs=(catalog,))
    info = await answer(server.target, "application_info")

    assert info["version"] == __version__
    assert info["python"]["version"] == ".".join(map(str, sys.version_info[:3]))
    assert info["libraries"]["grpcio"] == metadata.version("grpcio")
    assert info["libraries"]["sqlalchemy"] == metadata.version("sqlalchemy")
    assert info["process"]["pid"] == os.getpid() and info["process"]["uid"] == os.geteuid()
    # The port the listener was given by the kernel, not the configured 0.
    assert {"kind": "grpc", "address": server.target, "tls": False} in info["addresses"]
    assert info["catalog_dirs"] == [{"path": str(catalog), "exists": True}]
    snapshot = server.toolhost.registry.snapshot
    assert info["tools"]["generation"] == snapshot.generation == info["summary"]["generation"]
    assert info["tools"]["count"] == len(snapshot) == sum(info["tools"]["by_source"].values())
    assert info["tools"]["by_source"]["catalog"] == 1 and info["tools"]["by_category"]["probes"] == 1
    assert info["tools"]["by_category"]["diagnostics"] >= 3

    # Read at each call: a reload shows as a new generation, the time since start only grows.
    write_tool(catalog, "bye_probe", f"name: bye_probe\ndescription: Also greets.\ncategory: probes\n{GREET}")
    await server.toolhost.reloader.reload("test")
    again = await answer(server.target, "application_info")
    assert again["tools"]["generation"] == info["tools"]["generation"] + 1
    assert again["tools"]["by_category"]["probes"] == 2
    assert again["process"]["uptime_seconds"] >= info["process"]["uptime_seconds"]
    assert again["process"]["started_at"] == info["process"]["started_at"]


# --- component_inspector -------------------------------------------------------------------------------------------

async def test_component_inspector_lists_every_part_with_its_live_state(start_server, tmp_path):
    (tmp_path / "w").mkdir()
    log_file = tmp_path / "logs" / "app.log"
    server = await start_server(workspaces=(Workspace("w", str(tmp_path / "w")),), log_files=(str(log_file),))
    listed = await answer(server.target, "component_inspector")
    components = by_name(listed["components"])

    for name in ("registry", "runner.python", "runner.process", "runner.script", "runner.remote",
                 "log_reader.memory", "log_reader.file", "log_reader.database", "credentials.environment",
                 "credentials.database", "store", "tracing", "auth", "watcher", "http", "search_index",
                 "workspaces", "user_tools", "databases", "pipeline", "audit"):
        assert name in components, name
    assert all(set(entry) == {"name", "kind", "state", "detail"} for entry in listed["components"])
    assert listed["summary"]["components"] == len(components)
    assert sum(listed["summary"]["by_state"].values()) == len(components)
    assert components["registry"]["detail"] == f"generation 1: {len(server.toolhost.registry.snapshot)} tools"
    assert components["log_reader.file"]["state"] == "unavailable"
    assert "no file matches" in components["log_reader.file"]["detail"]
    assert components["log_reader.database"] == {"name": "log_reader.database", "kind": "log reader",
                                                 "state": "off", "detail": "log_database is off"}
    assert components["workspaces"]["state"] == "ok" and "w is the default" in components["workspaces"]["detail"]
    assert components["auth"]["state"] == "off" and components["watcher"]["state"] == "off"
    assert components["search_index"]["state"] == "off" and components["databases"]["state"] == "off"
    assert components["credentials.database"]["state"] == "unavailable"  # no store key

    # The file reader's state is asked of the reader at each call: the file appearing makes it readable.
    log_file.parent.mkdir()
    log_file.write_text("")
    reader = by_name((await answer(server.target, "component_inspector", component="log_reader.file"))["components"])
    assert reader["log_reader.file"]["state"] == "ok"
    assert reader["log_reader.file"]["properties"]["patterns"] == [str(log_file)]


async def test_one_component_comes_with_its_properties(start_server, tmp_path):
    server = await start_server()
    store = (await answer(server.target, "component_inspector", component="store"))["components"]
    assert len(store) == 1 and store[0]["state"] == "ok"
    assert store[0]["properties"] == {
        "engine": "sqlite", "database": f"SQLite file {server.toolhost.config.effective_data_dir() / 'toolhost.db'}",
        "latest_schema_version": LATEST_VERSION, "schema_version": LATEST_VERSION, "audit_database": True,
        "log_database": False}
    runner = (await answer(server.target, "component_inspector", component="runner.process"))["components"][0]
    # start_server runs process tools as root (process_user root); the server's own user then.
    assert runner["properties"]["runs_as"] == "the server's own user"
    pipeline = (await answer(server.target, "component_inspector", component="pipeline"))["components"][0]
    # This very call is in flight while the pipeline is read.
    assert pipeline["properties"]["in_flight"] == 1 and pipeline["properties"]["accepting"] is True


async def test_the_watcher_is_shown_watching_once_started(start_server, tmp_path):
    server = await start_server(watch_catalog=True, catalog_dirs=(tmp_path,))
    watcher = (await answer(server.target, "component_inspector", component="watcher"))["components"][0]
    assert watcher["state"] == "ok" and watcher["properties"]["directories"] == [str(tmp_path)]


async def test_an_unknown_component_is_not_found_with_the_close_names(start_server):
    server = await start_server()
    error = await failure(server.target, "component_inspector", component="stor")
    assert error.code == "NOT_FOUND" and "did you mean store?" in error.message
    error = await failure(server.target, "component_inspector", component="zzz")
    assert error.code == "NOT_FOUND" and "use one of: registry, runner." in error.message


# --- config_access -------------------------------------------------------------------------------------------------

async def test_config_access_narrows_by_dotted_key(start_server, tmp_path):
    (tmp_path / "w").mkdir()
    server = await start_server(workspaces=(Workspace("w", str(tmp_path / "w"), read_only=True),),
                                databases=(("local", f"sqlite:///{tmp_path}/local.db"),))
    everything = await answer(server.target, "config_access")
    keys = [row["key"] for row in everything["settings"]]
    assert keys[-1] == "store_key" and {"grpc_address", "workspaces", "databases", "database_url"} <= set(keys)
    assert everything["summary"]["settings"] == len(keys)
    # An in-process server was given its Config by the test, not by flags: the note says so.
    assert any("given its Config by a program" in note for note in everything["summary"]["notes"])
    rows = {row["key"]: row for row in everything["settings"]}
    assert rows["watch_catalog"] == {"key": "watch_catalog", "value": False, "source": "program", "sensitive": False}
    assert rows["max_hops"] == {"key": "max_hops", "value": 8, "source": "default", "sensitive": False}

    path = await answer(server.target, "config_access", key="workspaces.0.path")
    assert path["settings"] == [{"key": "workspaces.0.path", "value": str(tmp_path / "w"), "source": "program",
                                 "sensitive": False}]
    read_only = await answer(server.target, "config_access", key="workspaces.0.read_only")
    assert read_only["settings"][0]["value"] is True
    database = await answer(server.target, "config_access", key="databases.local")
    assert database["settings"][0]["value"] == f"sqlite:///{tmp_path}/local.db"


@pytest.mark.parametrize(("key", "message"), [
    ("log_levle", "no setting named 'log_levle'; did you mean log_level,"),
    ("workspaces.3", "no entry of workspaces named '3'; use one of: 0"),
    ("workspaces.0.colour", "no key of workspaces.0 named 'colour'; use one of: name, path, read_only"),
    ("log_level.x", "no part of log_level (a single value: ask for log_level) named 'x'"),
    ("databases.nope", "no key of databases named 'nope'; use one of: local"),
])
async def test_a_key_that_names_nothing_is_not_found_with_what_exists_there(start_server, tmp_path, key, message):
    (tmp_path / "w").mkdir()
    server = await start_server(workspaces=(Workspace("w", str(tmp_path / "w")),),
                                databases=(("local", "sqlite:///local.db"),))
    error = await failure(server.target, "config_access", key=key)
    assert error.code == "NOT_FOUND" and error.message.startswith(message), error.message


async def test_config_access_names_the_flag_the_variable_the_file_and_the_default(tmp_path):
    (tmp_path / "w").mkdir()
    config_file = tmp_path / "toolhost.yaml"
    config_file.write_text(f"max_hops: 3\nworkspaces: [{{name: w, path: {tmp_path / 'w'}}}]\n"
                           "databases: {analytics: 'postgresql://reader@db-a/analytics', "
                           f"local: 'sqlite:///{tmp_path}/local.db'}}\n")
    process = ServerProcess("--config", str(config_file), "--log-level", "DEBUG", "--watch-catalog", "false",
                            "--database", f"extra=sqlite:///{tmp_path}/extra.db",
                            env={"TOOLHOST_MAX_CALL_SECONDS": "120",
                                 "TOOLHOST_DATABASE_ANALYTICS_URL": "postgresql://writer@db-b/analytics"})
    await process.start()
    try:
        async with draining(process):
            rows = {row["key"]: row for row in (await answer(process.target, "config_access"))["settings"]}
            analytics = (await answer(process.target, "config_access", key="databases.analytics"))["settings"][0]
    finally:
        await process.stop()
    assert rows["log_level"]["source"] == "flag --log-level" and rows["log_level"]["value"] == "DEBUG"
    assert rows["grpc_address"]["source"] == "flag --grpc-address"
    assert rows["max_call_seconds"] == {"key": "max_call_seconds", "value": 120.0,
                                        "source": "environment TOOLHOST_MAX_CALL_SECONDS", "sensitive": False}
    assert rows["max_hops"]["source"] == f"config file {config_file}" and rows["max_hops"]["value"] == 3
    assert rows["workspaces"]["source"] == f"config file {config_file}"
    assert rows["max_output_bytes"]["source"] == "default"
    assert rows["databases"]["value"] == {"analytics": "postgresql://writer@db-b/analytics",
                                          "extra": f"sqlite:///{tmp_path}/extra.db",
                                          "local": f"sqlite:///{tmp_path}/local.db"}
    # Per database: the variable replaced the file's analytics and kept its local.
    assert analytics["source"] == "environment TOOLHOST_DATABASE_ANALYTICS_URL"
    assert analytics["value"] == "postgresql://writer@db-b/analytics"


# --- who may call them ---------------------------------------------------------------------------------------------

async def test_callers_without_the_admin_role_may_not_call_them(start_server, tmp_path):
    """As log_inspector: a caller granted every tool sees them and is refused the call; a caller granted a few
    does not see them at all."""
    tokens = Tokens.generate()
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text(f"""\
roles:
  agent:
    call: {{tools: ["*"]}}
  viewer:
    call: {{tools: [echo]}}
  admin:
    admin: true
    call: {{tools: ["*"]}}
tokens:
  - {{name: agent-token, sha256: {hash_token(tokens.agent)}, roles: [agent]}}
  - {{name: viewer-token, sha256: {hash_token(tokens.viewer)}, roles: [viewer]}}
  - {{name: admin-token, sha256: {hash_token(tokens.admin)}, roles: [admin]}}
""")
    server = await start_server(auth_file=str(auth_file))
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS, token=tokens.agent,
                                    insecure_token_ok=True) as agent:
        for name in TOOLS:
            with pytest.raises(toolhost.PermissionDeniedError, match="requires the admin role"):
                await agent.call_tool(name)
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS, token=tokens.viewer,
                                    insecure_token_ok=True) as viewer:
        seen = [tool.name async for tool in viewer.list_tools()]
        assert seen == ["echo"]
        for name in TOOLS:
            with pytest.raises(toolhost.NotFoundError):
                await viewer.call_tool(name)
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS, token=tokens.admin,
                                    insecure_token_ok=True) as admin:
        for name in TOOLS:
            tool = await admin.get_tool(name)
            assert tool.requires_admin and tool.annotations.read_only and tool.annotations.idempotent
            assert tool.category == "diagnostics" and "introspection" in tool.tags and tool.examples
    auth = (await answer(server.target, "component_inspector", token=tokens.admin, component="auth"))["components"]
    assert auth[0]["state"] == "ok" and auth[0]["properties"]["roles"] == 3
    assert auth[0]["properties"]["token_entries"] == 3


def test_a_server_without_its_view_of_itself_leaves_them_out_and_says_why():
    reasons = unserved_builtins(ToolServices())
    assert any(set(TOOLS) <= set(names) and "offers no view of itself" in reason
               for reason, names in reasons.items())


@pytest.mark.server
async def test_make_run_serves_the_six_introspection_tools_and_each_answers(tmp_path):
    six = ("application_info", "component_inspector", "config_access", "route_inspector", "database_schema",
           "log_inspector")
    async with make_run(tmp_path) as server:
        target = f"127.0.0.1:{server.port}"
        answers = {tool: await answer(target, tool) for tool in six}
    assert all("summary" in answers[tool] for tool in six), {tool: sorted(answers[tool]) for tool in six}
    # Each tells of this server: its own port, its data dir's store, its own RPCs.
    assert {"kind": "grpc", "address": target, "tls": False} in answers["application_info"]["addresses"]
    assert [database["name"] for database in answers["database_schema"]["databases"]] == ["store"]
    assert "toolhost.v1.ToolService" in {service["service"] for service in answers["route_inspector"]["services"]}
    assert {"key": "data_dir", "value": str(tmp_path)} in [
        {"key": s["key"], "value": s["value"]} for s in answers["config_access"]["settings"]]
