"""Hot reload: WatchTools, calls racing reloads, and the file watcher on a ConfigMap-style symlink swap."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import grpc

from toolhost.v1 import tool_service_pb2

from helpers.catalogs import make_configmap, versioned_tool, write_tool
from helpers.gates import gated_tool, new_gate
from helpers.waiting import until, within

RELOAD = tool_service_pb2.ReloadRequest()


async def test_watch_sends_the_current_generation_then_each_change(start_server, tmp_path):
    write_tool(tmp_path, "first")
    server = await start_server(catalog_dirs=[tmp_path])
    stream = server.stub.WatchTools(tool_service_pb2.WatchToolsRequest())
    initial = await stream.read()
    assert initial.generation == 1 and "first" in initial.added and initial.count == len(initial.added)
    write_tool(tmp_path, "second")
    await server.stub.Reload(RELOAD)
    await server.stub.Reload(RELOAD)  # no change: no message
    (tmp_path / "first.yaml").unlink()
    await server.stub.Reload(RELOAD)
    change = await within(stream.read(), "the message of generation 2")
    assert (change.generation, list(change.added), list(change.removed)) == (2, ["second"], [])
    change = await within(stream.read(), "the message of generation 3")
    assert (change.generation, list(change.added), list(change.removed)) == (3, [], ["first"])
    stream.cancel()


async def test_watch_streams_end_when_the_registry_closes(start_server, tmp_path):
    server = await start_server()
    stream = server.stub.WatchTools(tool_service_pb2.WatchToolsRequest())
    await stream.read()
    server.toolhost.registry.close()
    assert await within(stream.read(), "the end of the stream") is grpc.aio.EOF
    assert await stream.code() == grpc.StatusCode.OK


async def test_calls_racing_reloads_each_see_one_generation(start_server, tmp_path):
    write_tool(tmp_path, "versioned", versioned_tool(0))
    server = await start_server(catalog_dirs=[tmp_path])
    version_of_generation = {server.toolhost.registry.snapshot.generation: 0}

    async def one_call() -> tool_service_pb2.CallToolResponse:
        return await server.stub.CallTool(tool_service_pb2.CallToolRequest(name="versioned"))

    responses = []
    for version in range(1, 21):
        # Calls sent with each reload: each may run on the generation before it or the one it makes, never on
        # a mixture, and never on an older one (the previous reload was answered before they were sent).
        write_tool(tmp_path, "versioned", versioned_tool(version))
        calls = [asyncio.ensure_future(one_call()) for _ in range(5)]
        report = await server.stub.Reload(RELOAD)
        assert report.success and list(report.changed) == ["versioned"]
        version_of_generation[report.generation] = version
        batch = await asyncio.gather(*calls)
        assert {r.generation for r in batch} <= {report.generation - 1, report.generation}
        responses += batch
    assert len(responses) == 100 and all(r.success for r in responses)
    for response in responses:
        assert response.output == f"Hello, v{version_of_generation[response.generation]}."
    assert len(version_of_generation) == 21
    assert len({r.generation for r in responses}) >= 20


async def test_a_call_keeps_the_snapshot_it_started_with(start_server, tmp_path):
    write_tool(tmp_path, "held", gated_tool("held", "v1"))
    server = await start_server(catalog_dirs=[tmp_path])
    first_generation = server.toolhost.registry.snapshot.generation
    gate_name, gate = new_gate()
    call = asyncio.ensure_future(server.stub.CallTool(tool_service_pb2.CallToolRequest(
        name="held", arguments_json=json.dumps({"gate": gate_name}))))
    await within(gate.started.wait(), "the held call starting")
    write_tool(tmp_path, "held", gated_tool("held", "v2"))
    report = await server.stub.Reload(RELOAD)
    assert report.generation == first_generation + 1 and list(report.changed) == ["held"]
    gate.release.set()
    response = await call
    assert (response.output, response.generation) == ("v1", first_generation)
    again_name, again_gate = new_gate()
    again_gate.release.set()
    again = await server.stub.CallTool(tool_service_pb2.CallToolRequest(
        name="held", arguments_json=json.dumps({"gate": again_name})))
    assert (again.output, again.generation) == ("v2", report.generation)


async def wait_for(condition, what: str = "the catalog change to be served") -> None:
    """Poll `condition()` until true: the watcher's reloads announce themselves only in the registry."""
    await until(condition, what, interval=0.05)


async def watcher_is_live(server, directory: Path) -> None:
    """Prove the watcher reacts before a test relies on it: add a file and wait for its tool."""
    write_tool(directory, "watch_probe")
    await wait_for(lambda: "watch_probe" in server.toolhost.registry.snapshot)


async def test_configmap_symlink_swap_triggers_exactly_one_reload(start_server, tmp_path):
    root = tmp_path / "configmap"
    make_configmap(root, 1, {"cm_tool.yaml": versioned_tool(1)})
    server = await start_server(catalog_dirs=[root], watch_catalog=True, watch_debounce_ms=200)
    assert [n for n in server.toolhost.registry.snapshot.names if n == "versioned"] == ["versioned"]
    make_configmap(root, 2, {"cm_tool.yaml": versioned_tool(2), "probe.yaml": versioned_tool(0).replace(
        "name: versioned", "name: watch_probe")})
    await wait_for(lambda: "watch_probe" in server.toolhost.registry.snapshot)
    snapshot = server.toolhost.registry.snapshot
    reloads_before = server.toolhost.reloader.reload_count

    make_configmap(root, 3, {"cm_tool.yaml": versioned_tool(3), "probe.yaml": versioned_tool(0).replace(
        "name: versioned", "name: watch_probe")})
    await wait_for(lambda: server.toolhost.registry.snapshot.generation > snapshot.generation)
    current = server.toolhost.registry.snapshot
    # A later change is reloaded after whatever the swap caused: once it is served, a second reload caused by
    # the swap would have been counted.
    write_tool(root, "after_swap")
    await wait_for(lambda: "after_swap" in server.toolhost.registry.snapshot)
    assert server.toolhost.reloader.reload_count - reloads_before == 2, "the swap caused more than one reload"
    assert current.generation == snapshot.generation + 1
    listed = await server.stub.ListTools(tool_service_pb2.ListToolsRequest(page_size=1000))
    names = [t.name for t in listed.tools]
    assert names.count("versioned") == 1 and names.count("watch_probe") == 1
    assert listed.tools[names.index("versioned")].origin == str(root / "cm_tool.yaml")
    response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(name="versioned"))
    assert response.output == "Hello, v3."


async def test_editing_a_file_in_a_watched_directory_reloads(start_server, tmp_path):
    server = await start_server(catalog_dirs=[tmp_path], watch_catalog=True, watch_debounce_ms=100)
    await watcher_is_live(server, tmp_path)
    write_tool(tmp_path, "appeared")
    await wait_for(lambda: "appeared" in server.toolhost.registry.snapshot)
    response = await server.stub.CallTool(
        tool_service_pb2.CallToolRequest(name="appeared", arguments_json=json.dumps({"name": "x"})))
    assert response.success


async def test_a_replaced_directory_is_watched_again(start_server, tmp_path):
    catalog = tmp_path / "catalog"
    write_tool(catalog, "original")
    server = await start_server(catalog_dirs=[catalog], watch_catalog=True, watch_debounce_ms=100)
    await watcher_is_live(server, catalog)
    staged = tmp_path / "catalog.new"
    write_tool(staged, "replacement")
    shutil.rmtree(catalog)
    staged.rename(catalog)
    await wait_for(lambda: "replacement" in server.toolhost.registry.snapshot)
    assert "original" not in server.toolhost.registry.snapshot
    # The new directory is watched too: a later edit is seen.
    write_tool(catalog, "later")
    await wait_for(lambda: "later" in server.toolhost.registry.snapshot)


def test_a_prepared_generation_is_built_again_when_another_swap_came_between():
    from toolhost_server.registry import Registry, Snapshot

    def tools(*names: str) -> dict:
        return {name: object() for name in names}  # diff only compares objects by identity here

    registry = Registry()
    seen: list[Snapshot] = []
    registry.add_listener(seen.append)
    prepared = registry.prepare(tools("a", "b"))
    assert prepared is not None and registry.snapshot.generation == 0 and seen[-1] is prepared.snapshot
    registry.swap(tools("c"))
    assert registry.snapshot.generation == 1 and registry.snapshot.names == ("c",)
    change = registry.commit(prepared)  # built on generation 0: the registry builds it on generation 1
    assert change is not None and change.generation == 2
    assert (change.added, change.removed) == (("a", "b"), ("c",))
    assert registry.snapshot.names == ("a", "b") and seen[-1] is registry.snapshot


async def test_the_reload_log_names_a_large_catalog_in_short(start_server, tmp_path, caplog):
    for i in range(150):
        write_tool(tmp_path, f"tool_{i:03d}")
    with caplog.at_level("INFO", logger="toolhost.registry"):
        await start_server(catalog_dirs=[tmp_path])
    message = [r.getMessage() for r in caplog.records if "Registry loaded with" in r.getMessage()][-1]
    total = int(message.split("Registry loaded with ", 1)[1].split(" ", 1)[0])
    assert total > 150 and "'tool_000'" in message and "'tool_149'" not in message
    assert message.endswith(f", ... and {total - 100} more]"), message[-80:]
