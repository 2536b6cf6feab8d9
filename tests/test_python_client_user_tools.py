"""The Python clients' UserToolService methods against a real server: Client (in a thread) and AsyncClient."""

from __future__ import annotations

import asyncio
from datetime import UTC

import pytest

import toolhost

from helpers.servers import RunningServer, ServerFactory
from helpers.waiting import HANG_GUARD_SECONDS

SCHEMA = {"type": "object", "properties": {"who": {"type": "string", "maxLength": 8}}, "required": ["who"]}


@pytest.fixture
async def server(start_server: ServerFactory) -> RunningServer:
    # User tools run as nobody: a server whose user tools would run as its own user does not serve them.
    return await start_server(process_user="nobody")


def blocking_walk_through(target: str) -> None:
    with toolhost.Client(target, timeout=HANG_GUARD_SECONDS) as client:
        created = client.create_user_tool("greet_user", description="Greets.", script='echo "hi $TOOL_ARG_WHO"',
                                          input_schema=SCHEMA, tags=["demo"], timeout_seconds=4)
        assert (created.version, created.enabled, created.tags, created.timeout_seconds) == (1, True, ("demo",), 4)
        assert created.input_schema == SCHEMA and created.created_at.tzinfo is UTC
        assert client.call_tool("greet_user", who="ann").output == "hi ann\n"
        with pytest.raises(toolhost.AlreadyExistsError) as caught:
            client.create_user_tool("echo", description="x", script="true")
        assert caught.value.reason == toolhost.ErrorReason.ALREADY_EXISTS

        updated = client.update_user_tool("greet_user", script='echo "bye $TOOL_ARG_WHO"', tags=[])
        assert updated.version == 2 and updated.tags == () and updated.description == "Greets."
        assert updated.timeout_seconds == 4  # not given: unchanged
        assert client.update_user_tool("greet_user", timeout_seconds=0).timeout_seconds is None
        assert client.call_tool("greet_user", who="ann").output == "bye ann\n"

        versions = list(client.list_user_tool_versions("greet_user", page_size=1))
        assert [v.version for v in versions] == [3, 2, 1] and versions[-1].change == "create"
        page = client.list_user_tool_versions_page("greet_user", page_size=2)
        assert len(page.versions) == 2 and page.next_page_token

        restored = client.restore_user_tool_version("greet_user", 1)
        assert restored.version == 4 and restored.script == 'echo "hi $TOOL_ARG_WHO"'
        with pytest.raises(toolhost.NotFoundError) as missing:
            client.restore_user_tool_version("greet_user", 99)
        assert missing.value.reason == toolhost.ErrorReason.RESOURCE_NOT_FOUND

        assert client.get_user_tool("greet_user") == restored
        assert [t.slug for t in client.list_user_tools()] == ["greet_user"]
        assert client.delete_user_tool("greet_user").version == 4
        assert client.list_user_tools_page().user_tools == ()


async def test_the_blocking_client_walks_a_tool_from_creation_to_restore(server):
    await asyncio.to_thread(blocking_walk_through, server.target)


async def test_the_async_client_manages_tools_and_conflicts(server):
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS) as client:
        for slug in ("tool_b", "tool_a"):
            await client.create_user_tool(slug, description="x", script="echo x")
        assert [t.slug async for t in client.list_user_tools(page_size=1)] == ["tool_a", "tool_b"]
        first = await client.list_user_tools_page(page_size=1)
        assert [t.slug for t in first.user_tools] == ["tool_a"] and first.next_page_token

        conflict = await client.set_tool_conflict("tool_b", "tool_a", "incompatible", "keep one")
        assert (conflict.tool_a, conflict.tool_b, conflict.type) == ("tool_a", "tool_b", "incompatible")
        disabled = await client.set_user_tool_enabled("tool_b", False)
        assert disabled.user_tool.enabled is False and disabled.conflicts == ()
        with pytest.raises(toolhost.FailedPreconditionError) as caught:
            await client.set_user_tool_enabled("tool_b", True)
        assert "tool_a" in caught.value.message and "keep one" in caught.value.message

        await client.set_tool_conflict("tool_a", "tool_b", "equivalent", "same")
        enabled = await client.set_user_tool_enabled("tool_b", True)
        assert [c.to_dict() for c in enabled.conflicts] == [
            {"tool_a": "tool_a", "tool_b": "tool_b", "type": "equivalent", "resolution_hint": "same"}]
        every = [c async for c in client.list_tool_conflicts(page_size=2)]
        assert ("tool_a", "tool_b") in [(c.tool_a, c.tool_b) for c in every]
        assert ("bash", "native:Bash", "equivalent") in [(c.tool_a, c.tool_b, c.type) for c in every]
        assert (await client.delete_tool_conflict("tool_b", "tool_a")).type == "equivalent"
        with pytest.raises(toolhost.NotFoundError):
            await client.delete_tool_conflict("tool_b", "tool_a")

        updated = await client.update_user_tool("tool_a", name="Tool A", input_schema=SCHEMA)
        assert updated.name == "Tool A" and updated.input_schema == SCHEMA and updated.script == "echo x"
        versions = [v async for v in client.list_user_tool_versions("tool_a")]
        assert [v.change for v in versions] == ["update", "create"]
        assert (await client.restore_user_tool_version("tool_a", 1)).input_schema == {"type": "object"}
        assert (await client.get_user_tool("tool_a")).version == 3
        await client.delete_user_tool("tool_a")
        with pytest.raises(toolhost.NotFoundError):
            await client.get_user_tool("tool_a")


def test_requests_are_checked_in_the_client():
    client = toolhost.Client("127.0.0.1:1")
    with pytest.raises(ValueError, match="at least one field"):
        client.update_user_tool("x")
    with pytest.raises(TypeError, match="list of names"):
        client.create_user_tool("x", description="x", script="x", tags="one")
    with pytest.raises(ValueError, match="'equivalent' or 'incompatible'"):
        client.set_tool_conflict("a", "b", "same")  # type: ignore[arg-type]
    client.close()


async def test_list_user_tools_follows_pages_cut_short_by_the_message_limit(start_server: ServerFactory):
    # Six 200 KB scripts do not fit in one message of 1 MiB: the server cuts the page, the client follows it.
    server = await start_server(process_user="nobody", max_message_bytes=1024 * 1024)
    script = "echo padding\n" * (200 * 1024 // 13)
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS) as client:
        for n in range(6):
            await client.create_user_tool(f"big_{n}", description="Big.", script=f"# {n}\n{script}")
        first = await client.list_user_tools_page(page_size=1000)
        assert 0 < len(first.user_tools) < 6 and first.next_page_token
        listed = [tool async for tool in client.list_user_tools(page_size=1000)]
    assert [tool.slug for tool in listed] == [f"big_{n}" for n in range(6)]
    assert all(tool.script == f"# {n}\n{script}" for n, tool in enumerate(listed))
