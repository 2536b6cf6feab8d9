"""The tool conflicts table through UserToolService, on SQLite and PostgreSQL: the seeded pairs, adding, replacing
and removing pairs in either order, the rights, refused requests (with the table left as it was), enabling or
creating a tool incompatible with a served one (also two enables at once, on one server or two), conflicts with
tools the caller cannot see, the table's bound and its page order, another replica's change, and the seeded map
while the store is out of reach."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import grpc
import pytest
from sqlalchemy import URL

from toolhost.v1 import tool_service_pb2
from toolhost.v1 import user_tool_service_pb2 as pb
from toolhost_server.auth import hash_token
from toolhost_server.store.database import Store
from toolhost_server.store.engine import parse_database_url
from toolhost_server.user_tools import conflicts as conflicts_module
from toolhost_server.user_tools.conflicts import ToolConflicts

from helpers.auth import Tokens
from helpers.catalogs import write_tool
from helpers.provider_servers import AGENT_TOOLS, CATALOG, ProviderServer, start_provider_server, status_of
from helpers.servers import ServerFactory
from helpers.todos import store_settings
from helpers.waiting import until

SEEDED = sorted(tuple(sorted((tool, f"native:{native}"))) for tool, native in (
    ("bash", "Bash"), ("read", "Read"), ("edit", "Edit"), ("glob", "Glob"), ("grep", "Grep")))
EQUIVALENT, INCOMPATIBLE = pb.CONFLICT_TYPE_EQUIVALENT, pb.CONFLICT_TYPE_INCOMPATIBLE


def auth_with_a_tool_manager(tokens: Tokens) -> str:
    """The agent calls its tools; the viewer's token is a tool manager's (manage_tools, not admin)."""
    return f"""\
roles:
  agent:
    call: {{tools: [{", ".join(AGENT_TOOLS)}]}}
  tool_manager:
    manage_tools: true
  admin:
    admin: true
    call: {{tools: ["*"]}}
tokens:
  - {{name: agent-token, sha256: {hash_token(tokens.agent)}, roles: [agent]}}
  - {{name: manager-token, sha256: {hash_token(tokens.viewer)}, roles: [tool_manager]}}
  - {{name: admin-token, sha256: {hash_token(tokens.admin)}, roles: [admin]}}
"""


@pytest.fixture
async def served(start_server: ServerFactory, tmp_path: Path, database: URL) -> ProviderServer:
    return await start_provider_server(start_server, tmp_path, **store_settings(database, tmp_path))


async def all_conflicts(served: ProviderServer, role: str = "admin", page_size: int = 0) -> list[tuple[str, str,
                                                                                                       int, str]]:
    found: list[tuple[str, str, int, str]] = []
    token = ""
    while True:
        page = await served.user_tools.ListToolConflicts(
            pb.ListToolConflictsRequest(page_size=page_size, page_token=token), metadata=served.metadata(role))
        found += [(c.tool_a, c.tool_b, c.type, c.resolution_hint) for c in page.conflicts]
        token = page.next_page_token
        if not token:
            return found


async def set_conflict(served: ProviderServer, tool_a: str, tool_b: str, kind: int = EQUIVALENT, hint: str = "",
                       role: str = "admin") -> pb.ToolConflict:
    conflict = pb.ToolConflict(tool_a=tool_a, tool_b=tool_b, type=kind, resolution_hint=hint)
    response = await served.user_tools.SetToolConflict(pb.SetToolConflictRequest(conflict=conflict),
                                                       metadata=served.metadata(role))
    return response.conflict


async def delete_conflict(served: ProviderServer, tool_a: str, tool_b: str, role: str = "admin") -> pb.ToolConflict:
    response = await served.user_tools.DeleteToolConflict(
        pb.DeleteToolConflictRequest(tool_a=tool_a, tool_b=tool_b), metadata=served.metadata(role))
    return response.conflict


async def refused(call: object) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call  # type: ignore[misc]
    return status_of(raised.value)


async def test_the_table_starts_with_the_seeded_pairs_sorted_in_canonical_order(served: ProviderServer) -> None:
    conflicts = await all_conflicts(served)
    assert [(a, b) for a, b, _, _ in conflicts] == SEEDED
    assert all(kind == EQUIVALENT and hint for _, _, kind, hint in conflicts)
    # Every page size gives the same list, each pair once.
    for size in (1, 2, 4):
        assert await all_conflicts(served, page_size=size) == conflicts


async def test_set_adds_a_pair_in_canonical_order_and_replaces_it_in_either_order(served: ProviderServer) -> None:
    stored = await set_conflict(served, "zeta_tool", "alpha_tool", INCOMPATIBLE, "disable alpha_tool first")
    assert (stored.tool_a, stored.tool_b, stored.type) == ("alpha_tool", "zeta_tool", INCOMPATIBLE)
    replaced = await set_conflict(served, "alpha_tool", "zeta_tool", EQUIVALENT, "either will do")
    assert (replaced.tool_a, replaced.tool_b, replaced.type) == ("alpha_tool", "zeta_tool", EQUIVALENT)
    # A seeded pair, named the other way round, is replaced too: still one row for it.
    await set_conflict(served, "read", "native:Read", INCOMPATIBLE, "never both")
    conflicts = await all_conflicts(served)
    assert [(a, b) for a, b, _, _ in conflicts] == sorted([*SEEDED, ("alpha_tool", "zeta_tool")])
    assert ("native:Read", "read", INCOMPATIBLE, "never both") in conflicts
    assert ("alpha_tool", "zeta_tool", EQUIVALENT, "either will do") in conflicts


async def test_delete_takes_either_order_then_the_pair_is_not_found(served: ProviderServer) -> None:
    await set_conflict(served, "net_check", "uptime_report", INCOMPATIBLE, "one at a time")
    removed = await delete_conflict(served, "uptime_report", "net_check")
    assert (removed.tool_a, removed.tool_b, removed.type, removed.resolution_hint) == (
        "net_check", "uptime_report", INCOMPATIBLE, "one at a time")
    code, details = await refused(delete_conflict(served, "net_check", "uptime_report"))
    assert code == grpc.StatusCode.NOT_FOUND and "ListToolConflicts" in details
    seeded = await delete_conflict(served, "native:Bash", "bash")
    assert (seeded.tool_a, seeded.tool_b) == ("bash", "native:Bash")
    assert [(a, b) for a, b, _, _ in await all_conflicts(served)] == [p for p in SEEDED if p != ("bash", "native:Bash")]


async def test_a_conflict_without_a_type_and_bad_pages_are_invalid(served: ProviderServer) -> None:
    code, _ = await refused(set_conflict(served, "net_check", "native:Bash", pb.CONFLICT_TYPE_UNSPECIFIED))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    for request in (pb.ListToolConflictsRequest(page_size=-1), pb.ListToolConflictsRequest(page_token="not-mine"),
                    pb.ListToolConflictsRequest(page_token="W1tbW1tbW1tbW10")):
        code, _ = await refused(served.user_tools.ListToolConflicts(request, metadata=served.metadata("admin")))
        assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert [(a, b) for a, b, _, _ in await all_conflicts(served)] == SEEDED


async def test_only_admin_and_manage_tools_may_read_or_change_conflicts_and_every_change_is_audited(
        start_server: ServerFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="toolhost.audit")
    tokens = Tokens.generate()
    served = await start_provider_server(start_server, tmp_path, auth=auth_with_a_tool_manager(tokens),
                                         tokens=tokens)
    for attempt in (all_conflicts(served, "agent"), set_conflict(served, "net_check", "native:Bash", role="agent"),
                    delete_conflict(served, "bash", "native:Bash", role="agent")):
        code, details = await refused(attempt)
        assert code == grpc.StatusCode.PERMISSION_DENIED and "manage_tools" in details
    assert [(a, b) for a, b, _, _ in await all_conflicts(served)] == SEEDED
    # The viewer's token is the tool manager's here.
    await set_conflict(served, "net_check", "native:Bash", role="viewer")
    assert ("native:Bash", "net_check") in [(a, b) for a, b, _, _ in await all_conflicts(served, "viewer")]
    await delete_conflict(served, "net_check", "native:Bash", role="viewer")
    assert [(a, b) for a, b, _, _ in await all_conflicts(served, "viewer")] == SEEDED
    audited = [(r.audit["caller"], r.audit["tool"], r.audit["outcome"]) for r in caplog.records
               if r.name == "toolhost.audit" and hasattr(r, "audit") and r.audit["tool"].count("~") == 1]
    assert audited == [
        ("agent-token", "native:Bash~net_check", "CONFLICT_SET_REFUSED:PERMISSION_DENIED"),
        ("agent-token", "bash~native:Bash", "CONFLICT_DELETED_REFUSED:PERMISSION_DENIED"),
        ("manager-token", "native:Bash~net_check", "CONFLICT_SET"),
        ("manager-token", "native:Bash~net_check", "CONFLICT_DELETED"),
    ]


async def test_enabling_a_tool_incompatible_with_a_served_one_is_refused_with_the_hint(
        served: ProviderServer) -> None:
    conflicts = served.server.toolhost.conflicts
    await set_conflict(served, "say_hello", "disk_report", INCOMPATIBLE, "disable say_hello first")
    await set_conflict(served, "disk_report", "uptime_report", EQUIVALENT, "both report on the host")
    [incompatible] = await conflicts.incompatible_with("disk_report", {"say_hello", "net_check"})
    assert (incompatible.tool_a, incompatible.tool_b) == ("disk_report", "say_hello")
    assert await conflicts.incompatible_with("disk_report", {"net_check"}) == []
    [equivalent] = await conflicts.equivalent_to("disk_report", {"uptime_report"})
    assert equivalent.resolution_hint == "both report on the host"
    admin = served.metadata("admin")
    await served.user_tools.SetUserToolEnabled(pb.SetUserToolEnabledRequest(slug="disk_report", enabled=False),
                                               metadata=admin)
    code, details = await refused(served.user_tools.SetUserToolEnabled(
        pb.SetUserToolEnabledRequest(slug="disk_report", enabled=True), metadata=admin))
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    assert "say_hello" in details and "disable say_hello first" in details
    await delete_conflict(served, "disk_report", "say_hello")
    enabled = await served.user_tools.SetUserToolEnabled(
        pb.SetUserToolEnabledRequest(slug="disk_report", enabled=True), metadata=admin)
    assert [(c.tool_a, c.tool_b, c.type) for c in enabled.conflicts] == [("disk_report", "uptime_report", EQUIVALENT)]


async def test_another_replica_s_change_applies_here_at_the_next_generation(
        start_server: ServerFactory, served: ProviderServer, tmp_path: Path, database: URL,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # No reading again for age during the test: only the new generation may bring the change.
    monkeypatch.setattr(conflicts_module, "REFRESH_SECONDS", 3600.0)
    other = await start_provider_server(start_server, tmp_path / "other", create_user_tools=False,
                                        tokens=served.tokens, **store_settings(database, tmp_path))
    assert "net_check" in await served.list_names("agent", "claude_code")
    await set_conflict(other, "net_check", "native:Bash")
    assert "net_check" not in await other.list_names("agent", "claude_code")
    assert "net_check" in await served.list_names("agent", "claude_code")
    # A new generation here (a catalog change) reads the table again.
    write_tool(tmp_path / "catalog", "uptime_report", CATALOG["uptime_report"].replace("been up.", "been up, in s."))
    await served.server.stub.Reload(tool_service_pb2.ReloadRequest(), metadata=served.metadata("admin"))
    conflicts = served.server.toolhost.conflicts
    # The read runs in the background after the swap, and nothing announces its end but the map it leaves.
    await until(lambda: "net_check" in conflicts.natives_equivalent(), "the other replica's conflict read here")
    assert "net_check" not in await served.list_names("agent", "claude_code")


async def test_another_replica_s_change_applies_here_once_the_map_is_old(
        start_server: ServerFactory, served: ProviderServer, tmp_path: Path, database: URL,
        monkeypatch: pytest.MonkeyPatch) -> None:
    other = await start_provider_server(start_server, tmp_path / "other", create_user_tools=False,
                                        tokens=served.tokens, **store_settings(database, tmp_path))
    await set_conflict(other, "net_check", "native:Bash")
    # Every map is old now: the next ListTools here starts a read, without any new generation.
    monkeypatch.setattr(conflicts_module, "REFRESH_SECONDS", 0.0)
    conflicts = served.server.toolhost.conflicts
    await until(lambda: "net_check" in conflicts.natives_equivalent(), "the other replica's conflict read here")
    assert "net_check" not in await served.list_names("agent", "claude_code")


async def test_the_seeded_pairs_apply_while_the_store_is_out_of_reach() -> None:
    # A port nothing listens on: the read fails at once, and the map keeps the pairs a new database starts with.
    conflicts = ToolConflicts(Store(parse_database_url("postgresql://toolhost:x@127.0.0.1:9/toolhost")))
    await conflicts.start()
    assert dict(conflicts.natives_equivalent()) == {
        "bash": frozenset({"native:Bash"}), "read": frozenset({"native:Read"}), "edit": frozenset({"native:Edit"}),
        "glob": frozenset({"native:Glob"}), "grep": frozenset({"native:Grep"})}
    conflicts.store.close()


def new_tool(slug: str) -> pb.CreateUserToolRequest:
    return pb.CreateUserToolRequest(user_tool=pb.UserTool(slug=slug, description="A new tool.", script="echo new\n"))


async def set_enabled(served: ProviderServer, slug: str, enabled: bool,
                      role: str = "admin") -> pb.SetUserToolEnabledResponse:
    response: pb.SetUserToolEnabledResponse = await served.user_tools.SetUserToolEnabled(
        pb.SetUserToolEnabledRequest(slug=slug, enabled=enabled), metadata=served.metadata(role))
    return response


async def test_creating_a_tool_incompatible_with_an_enabled_one_is_refused_as_enabling_it_is(
        served: ProviderServer) -> None:
    # Delete and create again must not get around "never both enabled".
    await set_conflict(served, "fresh_tool", "say_hello", INCOMPATIBLE, "use say_hello instead")
    admin = served.metadata("admin")
    code, details = await refused(served.user_tools.CreateUserTool(new_tool("fresh_tool"), metadata=admin))
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    assert "cannot create user tool 'fresh_tool'" in details and "'say_hello'" in details
    assert "use say_hello instead" in details
    code, _ = await refused(served.user_tools.GetUserTool(pb.GetUserToolRequest(slug="fresh_tool"), metadata=admin))
    assert code == grpc.StatusCode.NOT_FOUND  # nothing stored
    await set_enabled(served, "say_hello", False)
    created = await served.user_tools.CreateUserTool(new_tool("fresh_tool"), metadata=admin)
    assert created.user_tool.enabled


async def test_two_enables_of_an_incompatible_pair_at_once_let_exactly_one_through(served: ProviderServer) -> None:
    await set_conflict(served, "disk_report", "say_hello", INCOMPATIBLE, "one of them")
    for _ in range(3):
        await set_enabled(served, "disk_report", False)
        await set_enabled(served, "say_hello", False)
        outcomes = await asyncio.gather(set_enabled(served, "disk_report", True),
                                        set_enabled(served, "say_hello", True), return_exceptions=True)
        refusals = [status_of(o) for o in outcomes if isinstance(o, BaseException)]
        assert [code for code, _ in refusals] == [grpc.StatusCode.FAILED_PRECONDITION], outcomes
        served_now = served.server.toolhost.registry.snapshot
        assert ("disk_report" in served_now) != ("say_hello" in served_now)


async def test_two_servers_on_one_database_cannot_both_enable_an_incompatible_pair(
        start_server: ServerFactory, served: ProviderServer, tmp_path: Path, database: URL) -> None:
    other = await start_provider_server(start_server, tmp_path / "other", create_user_tools=False,
                                        tokens=served.tokens, **store_settings(database, tmp_path))
    await set_conflict(served, "disk_report", "say_hello", INCOMPATIBLE, "one of them")
    for _ in range(3):
        await set_enabled(served, "disk_report", False)
        await set_enabled(served, "say_hello", False)
        outcomes = await asyncio.gather(set_enabled(served, "disk_report", True),
                                        set_enabled(other, "say_hello", True), return_exceptions=True)
        assert [status_of(o)[0] for o in outcomes if isinstance(o, BaseException)] == [
            grpc.StatusCode.FAILED_PRECONDITION], outcomes
        stored = [await served.user_tools.GetUserTool(pb.GetUserToolRequest(slug=slug),
                                                      metadata=served.metadata("admin"))
                  for slug in ("disk_report", "say_hello")]
        assert [response.user_tool.enabled for response in stored].count(True) == 1


async def test_a_conflict_with_a_tool_the_caller_cannot_see_is_enforced_without_naming_it(
        start_server: ServerFactory, tmp_path: Path) -> None:
    # The viewer's token is a tool manager's: manage_tools, but no catalog tool to see.
    tokens = Tokens.generate()
    served = await start_provider_server(start_server, tmp_path, auth=auth_with_a_tool_manager(tokens),
                                         tokens=tokens)
    await set_conflict(served, "disk_report", "net_check", INCOMPATIBLE, "net_check does it better")
    await set_conflict(served, "disk_report", "uptime_report", EQUIVALENT, "uptime_report reports too")
    await set_conflict(served, "disk_report", "say_hello", EQUIVALENT, "both are user tools")
    await set_enabled(served, "disk_report", False)

    code, details = await refused(set_enabled(served, "disk_report", True, role="viewer"))
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    assert "a tool you cannot see" in details
    assert "net_check" not in details and "better" not in details
    code, details = await refused(set_enabled(served, "disk_report", True))
    assert "'net_check'" in details and "net_check does it better" in details

    await delete_conflict(served, "disk_report", "net_check")
    # User tools are every manager's to see; the hidden catalog tool's equivalence is not reported.
    enabled = await set_enabled(served, "disk_report", True, role="viewer")
    assert [(c.tool_a, c.tool_b) for c in enabled.conflicts] == [("disk_report", "say_hello")]
    await set_enabled(served, "disk_report", False)
    enabled = await set_enabled(served, "disk_report", True)
    assert [(c.tool_a, c.tool_b) for c in enabled.conflicts] == [("disk_report", "say_hello"),
                                                                  ("disk_report", "uptime_report")]


async def test_the_table_holds_at_most_max_conflicts_pairs(served: ProviderServer,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conflicts_module, "MAX_CONFLICTS", len(SEEDED) + 1)
    await set_conflict(served, "net_check", "uptime_report", EQUIVALENT)
    code, details = await refused(set_conflict(served, "net_check", "file_peek", EQUIVALENT))
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    assert f"holds {len(SEEDED) + 1} pairs" in details and "DeleteToolConflict" in details
    # Replacing a pair adds none: still allowed at the bound.
    replaced = await set_conflict(served, "uptime_report", "net_check", INCOMPATIBLE, "one at a time")
    assert replaced.type == INCOMPATIBLE
    assert len(await all_conflicts(served)) == len(SEEDED) + 1


async def test_pages_follow_code_point_order_whatever_the_database_collation(served: ProviderServer) -> None:
    # Upper case before lower, '_' between them: orders a linguistic collation would give otherwise. Each pair is
    # stored canonical or, like a seeded one, the other way round.
    pairs = [("aB", "native:Zed"), ("a_b", "native:Zed"), ("Ab", "native:Zed"), ("ab", "a.b"), ("a-b", "ab")]
    for tool_a, tool_b in pairs:
        await set_conflict(served, tool_a, tool_b, EQUIVALENT)
    expected = sorted([*SEEDED, *(tuple(sorted(pair)) for pair in pairs)])
    for size in (1, 3, 0):
        assert [(a, b) for a, b, _, _ in await all_conflicts(served, page_size=size)] == expected
