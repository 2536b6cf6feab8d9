"""GetInstructions and `toolhost instructions`, and the provider rules of ListTools, against a real server: a
fixed catalog, the workspace tools, two user tools, and an `agent` role granted a fixed list of tools.

The blocks are compared with golden files, tests/golden/instructions/<provider>.md. After a deliberate change of
the block (or of a tool it shows), regenerate them and review the diff:

    TOOLHOST_REGENERATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/test_instructions.py
"""

from __future__ import annotations

import os
from pathlib import Path

import grpc
import pytest

from toolhost.v1 import tool_service_pb2
from toolhost_server.instructions import write_instructions
from toolhost_server.listing import ToolFilter
from toolhost_server.model import ToolSource, ToolSpec
from toolhost_server.providers import PROVIDERS, provider_named

from helpers.cli import toolhost
from helpers.provider_servers import (
    AGENT_TOOLS,
    CLI_AGENT_TOOLS,
    DISK_REPORT_PROMPT,
    FILE_TOOLS,
    ProviderServer,
    start_provider_server,
    status_of,
)
from helpers.servers import ServerFactory

GOLDEN_DIR = Path(__file__).parent / "golden" / "instructions"
REGENERATE = os.environ.get("TOOLHOST_REGENERATE_GOLDEN") == "1"
CLI_PROVIDERS = ("claude_code", "codex")
API_PROVIDERS = ("anthropic", "openai", "openai_compatible")
KNOWN = sorted(CLI_PROVIDERS + API_PROVIDERS)


@pytest.fixture
async def served(start_server: ServerFactory, tmp_path: Path) -> ProviderServer:
    return await start_provider_server(start_server, tmp_path)


def check_golden(provider: str, markdown: str) -> None:
    path = GOLDEN_DIR / f"{provider}.md"
    if REGENERATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(markdown, encoding="utf-8")
    assert path.exists(), f"{path} is missing: run with TOOLHOST_REGENERATE_GOLDEN=1 to write it"
    assert markdown == path.read_text(encoding="utf-8"), (
        f"the {provider} block differs from {path}; if the change is meant, regenerate (see the module docstring)")


# --- the provider rules of ListTools ---------------------------------------------------------------------------


async def test_the_known_providers_are_the_five_of_the_contract() -> None:
    assert sorted(PROVIDERS) == KNOWN
    assert sorted(name for name, provider in PROVIDERS.items() if provider.cli) == list(CLI_PROVIDERS)


# Hostile provider names: tests/security/test_security_conflicts_and_instructions.py.
@pytest.mark.parametrize("provider", ["gemini", "cli"])
async def test_an_unknown_provider_is_invalid_argument_listing_the_known_ones(served: ProviderServer,
                                                                              provider: str) -> None:
    for attempt in (served.list_names("agent", provider), served.instructions("agent", provider)):
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await attempt
        code, details = status_of(raised.value)
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        assert all(name in details for name in KNOWN), details
        # The message quotes at most the start of what was sent.
        assert len(details) < 600


async def test_get_instructions_needs_a_provider(served: ProviderServer) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await served.instructions("agent", "")
    code, details = status_of(raised.value)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "provider is required" in details
    assert all(name in details for name in KNOWN)


async def test_no_provider_lists_every_tool_the_caller_may_see(served: ProviderServer) -> None:
    assert await served.list_names("agent") == AGENT_TOOLS


@pytest.mark.parametrize("provider", API_PROVIDERS)
async def test_api_providers_see_every_tool(served: ProviderServer, provider: str) -> None:
    assert await served.list_names("agent", provider) == AGENT_TOOLS


@pytest.mark.parametrize("provider", CLI_PROVIDERS)
async def test_cli_providers_do_not_see_file_tools_nor_their_aliases(served: ProviderServer, provider: str) -> None:
    names = await served.list_names("agent", provider)
    assert names == CLI_AGENT_TOOLS
    assert not set(names) & {*FILE_TOOLS, "file_peek"}


@pytest.mark.parametrize("provider", CLI_PROVIDERS)
async def test_a_tool_made_equivalent_to_a_native_tool_is_hidden_from_cli_providers_only(
        served: ProviderServer, provider: str) -> None:
    from toolhost.v1 import user_tool_service_pb2 as pb

    conflict = pb.ToolConflict(tool_a="net_check", tool_b="native:Bash", type=pb.CONFLICT_TYPE_EQUIVALENT,
                               resolution_hint="use your own Bash tool to run nc")
    await served.user_tools.SetToolConflict(pb.SetToolConflictRequest(conflict=conflict),
                                            metadata=served.metadata("admin"))
    # Seen by the next request: SetToolConflict returns once the map is read again.
    assert "net_check" not in await served.list_names("agent", provider)
    assert "net_check" not in (await served.instructions("agent", provider)).tool_names
    assert "net_check" in await served.list_names("agent", "anthropic")
    # A user tool too, named in either order.
    conflict = pb.ToolConflict(tool_a="native:Grep", tool_b="say_hello", type=pb.CONFLICT_TYPE_EQUIVALENT)
    await served.user_tools.SetToolConflict(pb.SetToolConflictRequest(conflict=conflict),
                                            metadata=served.metadata("admin"))
    assert await served.list_names("agent", provider) == ["disk_report", "uptime_report"]
    # An incompatible pair with a native tool hides nothing.
    conflict = pb.ToolConflict(tool_a="uptime_report", tool_b="native:Read", type=pb.CONFLICT_TYPE_INCOMPATIBLE)
    await served.user_tools.SetToolConflict(pb.SetToolConflictRequest(conflict=conflict),
                                            metadata=served.metadata("admin"))
    assert "uptime_report" in await served.list_names("agent", provider)
    # Removing the pair offers the tool again.
    await served.user_tools.DeleteToolConflict(pb.DeleteToolConflictRequest(tool_a="native:Bash", tool_b="net_check"),
                                               metadata=served.metadata("admin"))
    assert "net_check" in await served.list_names("agent", provider)


async def test_a_page_token_survives_a_change_of_the_conflicts(served: ProviderServer) -> None:
    from toolhost.v1 import user_tool_service_pb2 as pb

    first = await served.server.stub.ListTools(
        tool_service_pb2.ListToolsRequest(provider="claude_code", page_size=1), metadata=served.metadata("agent"))
    assert [t.name for t in first.tools] == ["disk_report"]
    conflict = pb.ToolConflict(tool_a="net_check", tool_b="native:Bash", type=pb.CONFLICT_TYPE_EQUIVALENT)
    await served.user_tools.SetToolConflict(pb.SetToolConflictRequest(conflict=conflict),
                                            metadata=served.metadata("admin"))
    rest = await served.server.stub.ListTools(
        tool_service_pb2.ListToolsRequest(provider="claude_code", page_size=10, page_token=first.next_page_token),
        metadata=served.metadata("agent"))
    assert [t.name for t in rest.tools] == ["say_hello", "uptime_report"]


def _spec(name: str, category: str = "network", alias_of: str = "") -> ToolSpec:
    return ToolSpec(name=name, description=f"{name}.", input_schema={"type": "object"}, runner={"type": "python"},
                    source=ToolSource.CATALOG, origin="test", category=category, alias_of=alias_of)


def test_the_aliases_of_a_tool_equivalent_to_a_native_one_are_hidden_too() -> None:
    # No catalog file can declare an alias, and every built-in alias is a file tool (hidden by its category):
    # the rule is shown on the filter itself.
    natives = {"net_check": frozenset({"native:Bash"}), "fetch": frozenset({"native:WebFetch"})}
    tools = [_spec("net_check"), _spec("nc", alias_of="net_check"), _spec("ping"), _spec("fetch")]
    for provider in CLI_PROVIDERS:
        matches = ToolFilter(provider=provider, natives_equivalent=natives).predicate()
        # native:WebFetch is not one of the CLI agents' own tools: fetch stays.
        assert [t.name for t in tools if matches(t)] == ["ping", "fetch"]
    for provider in API_PROVIDERS:
        matches = ToolFilter(provider=provider, natives_equivalent=natives).predicate()
        assert [t.name for t in tools if matches(t)] == ["net_check", "nc", "ping", "fetch"]


# --- GetInstructions ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", CLI_PROVIDERS + API_PROVIDERS)
async def test_instructions_match_the_golden_file(served: ProviderServer, provider: str) -> None:
    block = await served.instructions("agent", provider)
    check_golden(provider, block.markdown)
    if provider in CLI_PROVIDERS:
        # Exactly the tools ListTools offers the same caller.
        assert list(block.tool_names) == await served.list_names("agent", provider) == CLI_AGENT_TOOLS
        for name in CLI_AGENT_TOOLS:
            assert f"\n### {name}\n" in block.markdown
    else:
        # Only the system prompts: the one user tool that has one.
        assert list(block.tool_names) == ["disk_report"]
        assert DISK_REPORT_PROMPT in block.markdown and "toolhost call" not in block.markdown


async def test_a_cli_block_says_how_to_reach_the_server_and_never_holds_a_token(served: ProviderServer) -> None:
    block = (await served.instructions("agent", "claude_code")).markdown
    for setting in ("TOOLHOST_TARGET", "TOOLHOST_TOKEN_FILE", "TOOLHOST_TLS_CA", "toolhost call NAME key=value"):
        assert setting in block
    for token in (served.tokens.agent, served.tokens.admin, served.tokens.viewer):
        assert token not in block
    system, custom = block.index("## System Tools"), block.index("## Custom Tools")
    # Catalog tools under System Tools, user tools (source USER) under Custom Tools.
    assert system < block.index("### net_check") < block.index("### uptime_report") < custom
    assert custom < block.index("### disk_report") < block.index("### say_hello")
    # A tool's instructions are its system prompt, else its description; then its parameters.
    assert DISK_REPORT_PROMPT in block and "Disk usage by directory." not in block
    assert "Say hello." in block
    assert "- `port` (integer, optional, default 443): The TCP port." in block
    assert '- `mode` (string, optional, default "tcp"): How to connect. One of: "tcp", "tls".' in block
    assert "- `path` (string, required): The directory to measure." in block


async def test_instructions_show_only_what_the_caller_may_see(served: ProviderServer) -> None:
    viewer = await served.instructions("viewer", "claude_code")
    assert list(viewer.tool_names) == ["uptime_report"]
    assert "net_check" not in viewer.markdown and "disk_report" not in viewer.markdown
    admin = await served.instructions("admin", "claude_code")
    assert set(CLI_AGENT_TOOLS) < set(admin.tool_names)
    assert "echo" in admin.tool_names and "echo" not in (await served.instructions("agent", "claude_code")).tool_names


async def test_the_same_tools_give_the_same_block_on_another_server(start_server: ServerFactory,
                                                                    served: ProviderServer, tmp_path: Path) -> None:
    other = await start_provider_server(start_server, tmp_path / "other")
    for provider in KNOWN:
        assert (await other.instructions("agent", provider)) == (await served.instructions("agent", provider))


async def test_the_cli_prints_the_same_block(served: ProviderServer) -> None:
    for provider in ("claude_code", "anthropic"):
        run = await toolhost("--target", served.server.target, "--token-file", str(served.token_files["agent"]),
                             "instructions", "--provider", provider)
        assert run.code == 0, run.err
        assert run.out == (await served.instructions("agent", provider)).markdown


async def test_the_cli_refuses_an_unknown_provider_listing_the_known_ones(served: ProviderServer) -> None:
    run = await toolhost("--target", served.server.target, "--token-file", str(served.token_files["agent"]),
                         "instructions", "--provider", "gemini")
    assert run.code != 0 and run.out == ""
    assert all(name in run.err for name in KNOWN), run.err


def test_an_empty_list_of_tools_still_says_how_to_invoke_for_a_cli_provider_and_nothing_for_an_api_one() -> None:
    cli = write_instructions(provider_named("codex"), [])
    assert "toolhost call" in cli.markdown and cli.tool_names == ()
    assert write_instructions(provider_named("openai"), [_spec("ping")]).markdown == ""


# --- the byte budget --------------------------------------------------------------------------------------------


def _prompted(name: str, prompt_bytes: int, source: ToolSource = ToolSource.USER) -> ToolSpec:
    return ToolSpec(name=name, description=f"{name}.", input_schema={"type": "object"}, runner={"type": "python"},
                    source=source, origin="test", system_prompt=f"Use {name} well. " + "x" * prompt_bytes)


@pytest.mark.parametrize("provider", ["claude_code", "anthropic"])
def test_tools_past_the_budget_are_listed_by_name_under_a_line_that_says_how_many(provider: str) -> None:
    # 40 prompts of 10 KB are 400 KB: a budget of 64 KB holds a few of them, and the names of the rest.
    tools = [_prompted(f"tool_{n:02}", 10_000) for n in range(40)]
    block = write_instructions(provider_named(provider), tools, max_bytes=64 * 1024)
    size = len(block.markdown.encode("utf-8"))
    assert size <= 64 * 1024
    described = [name for name in (t.name for t in tools) if f"## {name}\n" in block.markdown
                 or f"### {name}\n" in block.markdown]
    assert 0 < len(described) < 40 and described == [f"tool_{n:02}" for n in range(len(described))]
    left_out = 40 - len(described)
    assert f"{left_out} tools' instructions left out" in block.markdown
    if provider == "claude_code":
        assert "`toolhost tools get NAME`" in block.markdown
    for name in [t.name for t in tools][len(described):]:
        assert f"\n- `{name}`\n" in block.markdown
    # Every tool is named, in full or by name only; the same input gives the same text, in any order.
    assert block.tool_names == tuple(sorted(t.name for t in tools))
    assert write_instructions(provider_named(provider), reversed(tools), max_bytes=64 * 1024) == block


def test_a_block_under_its_budget_is_the_whole_block() -> None:
    tools = [_prompted(f"tool_{n}", 100) for n in range(3)]
    whole = write_instructions(provider_named("codex"), tools)
    assert write_instructions(provider_named("codex"), tools, max_bytes=len(whole.markdown.encode())) == whole
    assert "left out" not in whole.markdown
    one_byte_less = write_instructions(provider_named("codex"), tools, max_bytes=len(whole.markdown.encode()) - 1)
    assert len(one_byte_less.markdown.encode()) < len(whole.markdown.encode())
    assert "instructions left out" in one_byte_less.markdown and one_byte_less.tool_names == whole.tool_names
    long_ones = [_prompted(f"tool_{n}", 2000) for n in range(2)]
    budget = len(write_instructions(provider_named("codex"), long_ones[:1]).markdown.encode()) + 1000
    one_left_out = write_instructions(provider_named("codex"), long_ones, max_bytes=budget)
    assert "\n1 tool's instructions left out" in one_left_out.markdown
    assert one_left_out.markdown.endswith("\n- `tool_1`\n") and len(one_left_out.markdown.encode()) <= budget


def test_when_even_the_names_do_not_fit_the_last_line_counts_the_rest() -> None:
    tools = [_prompted(f"tool_with_a_long_name_{n:05}", 10) for n in range(5000)]
    block = write_instructions(provider_named("claude_code"), tools, max_bytes=32 * 1024)
    assert len(block.markdown.encode("utf-8")) <= 32 * 1024
    assert "5000 tools' instructions left out" in block.markdown
    named = len(block.tool_names)
    assert 0 < named < 5000
    assert block.markdown.endswith(f"- and {5000 - named} more, not named here: `toolhost tools list` lists every "
                                   "tool.\n")
    assert list(block.tool_names) == [f"tool_with_a_long_name_{n:05}" for n in range(named)]


async def test_get_instructions_stays_under_the_message_limit(start_server: ServerFactory) -> None:
    # Three user tools with 30 KB prompts: 90 KB of instructions, more than a 64 KiB message holds.
    limit = 64 * 1024
    server = await start_server(max_message_bytes=limit, process_user="nobody")
    from toolhost.v1 import user_tool_service_pb2 as pb
    from toolhost.v1 import user_tool_service_pb2_grpc

    stub = user_tool_service_pb2_grpc.UserToolServiceStub(server.channel)
    for n in range(3):
        await stub.CreateUserTool(pb.CreateUserToolRequest(user_tool=pb.UserTool(
            slug=f"wordy_{n}", description="Wordy.", script="true", system_prompt="Talk. " + "y" * 30_000)))
    for provider in ("claude_code", "anthropic"):
        block = await server.stub.GetInstructions(tool_service_pb2.GetInstructionsRequest(provider=provider))
        assert block.ByteSize() < limit
        assert "tools' instructions left out" in block.markdown
        assert {"wordy_0", "wordy_1", "wordy_2"} <= set(block.tool_names)
        assert all(f"- `wordy_{n}`" in block.markdown for n in range(3))
    run = await toolhost("--target", server.target, "instructions", "--provider", "codex")
    assert run.code == 0, run.err
    assert "tools' instructions left out, to keep this block small; call `toolhost tools get NAME`" in run.out
