"""Where the workspace tools are served: `make run` serves them in a `default` workspace under the data dir (and
the file search tools over it), and
a CLI provider (Claude Code, Codex: they have file tools of their own) is not offered the `file_ops` tools nor
their aliases, while an API provider is offered everything."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from google.protobuf.json_format import MessageToDict

from toolhost.v1 import tool_service_pb2_grpc
from toolhost_server.workspaces import Workspace

from helpers.calls import call
from helpers.cli import toolhost
from helpers.make_run import make_run

FILE_OPS = {"read", "load", "write", "edit", "glob", "grep", "search_content", "ls", "list_workspaces", "bash",
            "execute"}
AGENT = {"search_and_replace", "todo", "attempt_completion"}


@pytest.mark.server
async def test_make_run_serves_a_default_workspace_in_the_data_dir(tmp_path):
    (tmp_path / "workspace").mkdir(mode=0o700)
    (tmp_path / "workspace" / "plan.txt").write_text("written ahead of the start\n")
    async with make_run(tmp_path) as server:
        stub = SimpleNamespace(stub=tool_service_pb2_grpc.ToolServiceStub(server.channel))
        listed = await call(stub, "list_workspaces")
        written = await call(stub, "write", path="hello.txt", content="hello\n")
        read = await call(stub, "read", path="hello.txt")
        found = await call(stub, "search", query="ahead", scope=str(tmp_path / "workspace"))
    assert listed.success, listed.error.message
    assert [w["name"] for w in MessageToDict(listed.structured_output)["workspaces"]] == ["default"]
    assert written.success and read.success, (written.error.message, read.error.message)
    assert (tmp_path / "workspace" / "hello.txt").read_text() == "hello\n"
    # The file search tools index the same directory (found by a walk until the first build is done).
    assert found.success, found.error.message
    assert [hit["name"] for hit in MessageToDict(found.structured_output)["results"]] == ["plan.txt"]


def listed_names(output: str) -> set[str]:
    return {line.split()[0] for line in output.splitlines()[1:] if line.strip()}


@pytest.mark.server
async def test_a_cli_provider_is_not_offered_the_file_tools_and_their_aliases(start_server, tmp_path):
    (tmp_path / "w").mkdir()
    server = await start_server(workspaces=(Workspace("w", str(tmp_path / "w"), allow_bash=True,
                                                      bash_as_server_user=True),))
    runs = {provider: await toolhost("--target", server.target, "tools", "list", "--provider", provider)
            for provider in ("claude_code", "codex", "anthropic", "openai")}
    for run in runs.values():
        assert run.code == 0, run.err
    for cli in ("claude_code", "codex"):
        names = listed_names(runs[cli].out)
        assert not names & FILE_OPS, names & FILE_OPS
        assert names >= AGENT and "echo" in names
    for api in ("anthropic", "openai"):
        assert listed_names(runs[api].out) >= FILE_OPS | AGENT
