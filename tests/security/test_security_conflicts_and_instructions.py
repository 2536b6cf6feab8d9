"""Attacks on the provider rules, the conflicts table and the instructions block: hostile provider names and
conflict names (NUL, newlines, path-like, huge, non-ASCII) are refused without echoing them whole and without
changing the table; a caller without the right cannot read or change conflicts; the block handed to an agent
never holds a token, nor any tool its caller may not see."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from toolhost.v1 import user_tool_service_pb2 as pb

from helpers.provider_servers import ProviderServer, start_provider_server, status_of
from helpers.servers import ServerFactory

KNOWN = ["anthropic", "claude_code", "codex", "openai", "openai_compatible"]
SEEDED = sorted(tuple(sorted((tool, f"native:{tool.capitalize()}"))) for tool in ("bash", "read", "edit", "glob",
                                                                                   "grep"))


@pytest.fixture
async def served(start_server: ServerFactory, tmp_path: Path) -> ProviderServer:
    return await start_provider_server(start_server, tmp_path)


async def pairs(served: ProviderServer) -> list[tuple[str, str]]:
    page = await served.user_tools.ListToolConflicts(pb.ListToolConflictsRequest(page_size=1000),
                                                     metadata=served.metadata("admin"))
    return [(c.tool_a, c.tool_b) for c in page.conflicts]


@pytest.mark.parametrize("provider", ["gemini", "Claude_Code", "claude_code ", "cli", "x" * 100_000, "claude\0code",
                                      "claude_code\n", "../claude_code", "\uff43\uff4c\uff41\uff55\uff44\uff45_code"])
async def test_a_hostile_provider_is_refused_listing_the_known_ones_without_echoing_it(
        served: ProviderServer, provider: str) -> None:
    for attempt in (served.list_names("agent", provider), served.instructions("agent", provider)):
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await attempt
        code, details = status_of(raised.value)
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        assert all(name in details for name in KNOWN), details
        assert len(details) < 600


@pytest.mark.parametrize("tool_a, tool_b, hint, expected", [
    ("bash", "bash", "", "two different tools"),
    ("native:Bash", "native:Read", "", "at least one toolhost tool"),
    ("", "bash", "", "not a tool name"),
    ("bash\n", "native:Bash", "", "not a tool name"),
    ("bash", "native:", "", "not a tool name"),
    ("bash", "native:Ba sh", "", "not a tool name"),
    ("bash", "native:Bash\n", "", "not a tool name"),
    ("../etc/passwd", "bash", "", "not a tool name"),
    ("x\0y", "bash", "", "not a tool name"),
    ("é", "bash", "", "not a tool name"),
    ("a" * 129, "bash", "", "not a tool name"),
    ("b" * 100_000, "bash", "", "not a tool name"),
    ("bash", "native:" + "B" * 122, "", "not a tool name"),
    ("bash", "native:Bash", "h" * 1001, "resolution_hint"),
    ("bash", "native:Bash", "a\0b", "resolution_hint"),
])
async def test_hostile_conflicts_are_refused_and_change_nothing(served: ProviderServer, tool_a: str, tool_b: str,
                                                                hint: str, expected: str) -> None:
    conflict = pb.ToolConflict(tool_a=tool_a, tool_b=tool_b, type=pb.CONFLICT_TYPE_INCOMPATIBLE,
                               resolution_hint=hint)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await served.user_tools.SetToolConflict(pb.SetToolConflictRequest(conflict=conflict),
                                                metadata=served.metadata("admin"))
    code, details = status_of(raised.value)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and expected in details, details
    assert len(details) < 600  # a name quoted back is cut
    if not hint:  # deleting the same names is refused too: invalid, or a pair that is not there
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await served.user_tools.DeleteToolConflict(pb.DeleteToolConflictRequest(tool_a=tool_a, tool_b=tool_b),
                                                       metadata=served.metadata("admin"))
        assert raised.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND)
    assert await pairs(served) == SEEDED


async def test_a_caller_without_the_right_can_neither_read_nor_change_conflicts(served: ProviderServer) -> None:
    conflict = pb.ToolConflict(tool_a="net_check", tool_b="native:Bash", type=pb.CONFLICT_TYPE_EQUIVALENT)
    for role in ("agent", "viewer"):
        for attempt in (
                served.user_tools.ListToolConflicts(pb.ListToolConflictsRequest(), metadata=served.metadata(role)),
                served.user_tools.SetToolConflict(pb.SetToolConflictRequest(conflict=conflict),
                                                  metadata=served.metadata(role)),
                served.user_tools.DeleteToolConflict(pb.DeleteToolConflictRequest(tool_a="bash", tool_b="native:Bash"),
                                                     metadata=served.metadata(role))):
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await attempt
            assert raised.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert await pairs(served) == SEEDED
    # Hiding a tool from CLI agents is a change of what they are offered: the agent could not make it.
    assert "net_check" in await served.list_names("agent", "claude_code")


async def test_the_block_never_holds_a_token_nor_a_tool_its_caller_may_not_see(served: ProviderServer) -> None:
    secrets = [served.tokens.agent, served.tokens.viewer, served.tokens.admin]
    secrets += [path.read_text().strip() for path in served.token_files.values()]
    for role in ("agent", "viewer", "admin"):
        for provider in KNOWN:
            block = await served.instructions(role, provider)
            assert not any(secret in block.markdown for secret in secrets)
            assert set(block.tool_names) <= set(await served.list_names(role, provider))
    viewer = await served.instructions("viewer", "claude_code")
    for hidden in ("net_check", "disk_report", "say_hello", "bash"):
        assert f"### {hidden}\n" not in viewer.markdown and f"call {hidden}" not in viewer.markdown
    for hidden in ("net_check", "disk_report", "say_hello"):
        assert hidden not in viewer.markdown
