"""Finding 14: a caller that sees only some tools sees the generation of its own view, which moves only when one of
those tools changes; the real generation, and gaps in WatchTools, would reveal edits of the tools hidden from it.

The agent role sees admin_tool, echo_one and net_probe; secret_tool is hidden from it. The root role has every
right, so it sees the real generation."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolhost.v1 import tool_service_pb2
from toolhost_server.auth import hash_token

from helpers.auth import CATALOG, GREET, Tokens, write_catalog
from helpers.calls import call
from helpers.catalogs import write_tool
from helpers.servers import RunningServer, ServerFactory
from helpers.waiting import within


def auth_text(tokens: Tokens) -> str:
    """The agent role of helpers.auth, and root with every right (its token is Tokens.admin)."""
    return f"""\
roles:
  agent:
    call: {{tools: ["echo_*", admin_tool], categories: [probes]}}
  root:
    admin: true
    list: {{tools: ["*"]}}
    call: {{tools: ["*"]}}
tokens:
  - {{name: agent-token, sha256: {hash_token(tokens.agent)}, roles: [agent]}}
  - {{name: root-token, sha256: {hash_token(tokens.admin)}, roles: [root]}}
"""


@pytest.fixture
def tokens() -> Tokens:
    return Tokens.generate()


@pytest.fixture
async def server(start_server: ServerFactory, tmp_path: Path, tokens: Tokens) -> RunningServer:
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text(auth_text(tokens))
    return await start_server(catalog_dirs=[write_catalog(tmp_path / "catalog")], auth_file=auth_file)


def bearer(token: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {token}"),)


async def edit(server: RunningServer, directory: Path, name: str, description: str, extra: str = "") -> None:
    """Give tool `name` a new description (and `extra` lines in place of its catalog ones), and reload."""
    body = extra or CATALOG[name]
    write_tool(directory / "catalog", name, f"name: {name}\ndescription: {description}\n{body}{GREET}")
    report = await server.toolhost.reloader.reload("test")
    assert report.success and name in report.changed


async def generations(server: RunningServer, token: str) -> set[int]:
    """The generations ListTools, GetTool and CallTool of echo_one tell the holder of `token`."""
    metadata = bearer(token)
    listed = await server.stub.ListTools(tool_service_pb2.ListToolsRequest(), metadata=metadata)
    got = await server.stub.GetTool(tool_service_pb2.GetToolRequest(name="echo_one"), metadata=metadata)
    called = await call(server, "echo_one", name="x", metadata=metadata)
    assert called.success, called.error
    return {listed.generation, got.generation, called.generation}


async def test_list_get_and_call_generations_move_only_with_the_tools_the_caller_sees(server, tokens, tmp_path):
    real = server.toolhost.registry.snapshot.generation
    [agent] = await generations(server, tokens.agent)
    assert await generations(server, tokens.admin) == {real}

    await edit(server, tmp_path, "secret_tool", "Edited where the agent cannot see.")
    assert await generations(server, tokens.agent) == {agent}
    assert await generations(server, tokens.admin) == {real + 1}

    await edit(server, tmp_path, "echo_one", "Edited where the agent sees it.")
    assert await generations(server, tokens.agent) == {agent + 1}
    assert await generations(server, tokens.admin) == {real + 2}

    # A tool whose new definition leaves the view is a change of the view too, and so is its return.
    await edit(server, tmp_path, "net_probe", "Out of the probes.", "category: testing\n")
    assert await generations(server, tokens.agent) == {agent + 2}
    await edit(server, tmp_path, "net_probe", "Back in the probes.")
    assert await generations(server, tokens.agent) == {agent + 3}
    assert await generations(server, tokens.admin) == {real + 4}


async def test_a_watch_stream_has_no_event_for_a_hidden_change_and_no_gaps(server, tokens, tmp_path):
    request = tool_service_pb2.WatchToolsRequest()
    agent = server.stub.WatchTools(request, metadata=bearer(tokens.agent))
    root = server.stub.WatchTools(request, metadata=bearer(tokens.admin))
    first = await within(agent.read(), "the agent's first message")
    root_first = await within(root.read(), "root's first message")
    assert sorted(first.added) == ["admin_tool", "echo_one", "net_probe"]
    assert "secret_tool" in root_first.added
    [listed] = await generations(server, tokens.agent)
    assert first.generation == listed

    await edit(server, tmp_path, "secret_tool", "Edited where the agent cannot see.")
    await edit(server, tmp_path, "echo_one", "Edited where the agent sees it.")
    # The next message the agent gets is the visible edit, one generation on: the hidden one left no trace.
    change = await within(agent.read(), "the agent's message for the echo_one edit")
    assert (change.generation, list(change.changed), change.count) == (first.generation + 1, ["echo_one"], 3)
    assert await generations(server, tokens.agent) == {change.generation}

    hidden = await within(root.read(), "root's message for the secret_tool edit")
    visible = await within(root.read(), "root's message for the echo_one edit")
    assert (hidden.generation, list(hidden.changed)) == (root_first.generation + 1, ["secret_tool"])
    assert (visible.generation, list(visible.changed)) == (root_first.generation + 2, ["echo_one"])
    assert visible.generation == server.toolhost.registry.snapshot.generation
    agent.cancel()
    root.cancel()
