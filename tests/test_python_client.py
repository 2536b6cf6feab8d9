"""The Python client (toolhost.Client and toolhost.AsyncClient) against a real server with a large catalog.

The server runs on the test's event loop, so every blocking Client call goes through asyncio.to_thread.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import socket
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest

import toolhost
from toolhost.v1 import error_reason_pb2
from toolhost_server.model import ToolSpec

from helpers.catalogs import write_tool
from helpers.servers import RunningServer, ServerFactory
from helpers.waiting import HANG_GUARD_SECONDS, until, within

PLAIN_TOOLS = [f"tool_{i:03d}" for i in range(250)]
NET_TOOLS = [f"net_{i:02d}" for i in range(40)]
PROBE_TOOLS = NET_TOOLS[::2]
# Catalog tools that run functions of toolhost_server.tools.samples with the python runner (which passes
# keyword arguments).
SAMPLE_TOOLS = {
    "nap": ("Sleeps for `delay` seconds.", "nap", "[{name: delay, type: number, required: true}]"),
    "parse_json": ("Parses JSON text.", "parse_json", "[{name: s, type: string, required: true}]"),
    "to_text": ("Writes an integer as text.", "to_text", "[{name: object, type: integer, required: true}]"),
}

T = TypeVar("T")


def write_catalog(directory: Path) -> None:
    for name in PLAIN_TOOLS:
        write_tool(directory, name)
    for name in NET_TOOLS:
        tags = "[net, probe]" if name in PROBE_TOOLS else "[net]"
        write_tool(directory, name, (
            f"name: {name}\ndescription: Network test tool {name}.\ncategory: network\nplatform: linux\n"
            f"tags: {tags}\nrunner: {{type: python, entrypoint: 'toolhost_server.tools.samples:greet'}}\n"
            "parameters:\n  - {name: name, type: string, required: true}\n"))
    for name, (description, function, parameters) in SAMPLE_TOOLS.items():
        write_tool(directory, name, (
            f"name: {name}\ndescription: {description}\n"
            f"runner: {{type: python, entrypoint: 'toolhost_server.tools.samples:{function}'}}\n"
            f"parameters: {parameters}\n"))


@pytest.fixture
async def server(start_server: ServerFactory, tmp_path: Path) -> RunningServer:
    write_catalog(tmp_path / "catalog")
    return await start_server(catalog_dirs=[tmp_path / "catalog"])


def served_names(server: RunningServer, keep: Callable[[ToolSpec], bool] = lambda spec: True) -> list[str]:
    """The names the server serves (built-in tools included), sorted, of the tools `keep` accepts."""
    snapshot = server.toolhost.registry.snapshot
    return [name for name in snapshot.names if keep(snapshot.get(name).spec)]


async def in_thread(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await asyncio.to_thread(function, *args, **kwargs)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# --- listing ----------------------------------------------------------------------------------------------


async def test_sync_list_tools_walks_every_page_and_yields_each_tool_once(server):
    with toolhost.Client(server.target, timeout=HANG_GUARD_SECONDS) as client:
        names = await in_thread(lambda: [t.name for t in client.list_tools(page_size=7)])
    assert len(served_names(server)) > 290
    assert names == served_names(server)


async def test_async_list_tools_walks_every_page_and_yields_each_tool_once(server):
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS) as client:
        names = [t.name async for t in client.list_tools(page_size=13)]
    assert names == served_names(server)


async def test_list_tools_filters_and_views(server):
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS) as client:
        network = [t async for t in client.list_tools(category="network", platform="linux", page_size=9)]
        probes = [t.name async for t in client.list_tools(tags=["net", "probe"])]
        full = [t async for t in client.list_tools(category="network", platform="linux", view="full")]
    assert [t.name for t in network] == served_names(
        server, lambda spec: spec.category == "network" and spec.platform == "linux")
    assert set(NET_TOOLS) <= {t.name for t in network}
    assert probes == served_names(server, lambda spec: {"net", "probe"} <= set(spec.tags)) == PROBE_TOOLS
    basic = next(t for t in network if t.name == NET_TOOLS[0])
    assert basic.category == "network" and basic.source == "catalog" and basic.tags == ("net", "probe")
    assert basic.input_schema is None and basic.parameters == ()
    detailed = next(t for t in full if t.name == NET_TOOLS[0])
    assert detailed.input_schema is not None and detailed.input_schema["required"] == ["name"]
    assert detailed.parameters[0].name == "name" and detailed.parameters[0].required


async def test_list_tools_page_returns_one_page_and_a_token(server):
    with toolhost.Client(server.target) as client:
        first = await in_thread(client.list_tools_page, page_size=10)
        second = await in_thread(client.list_tools_page, page_size=10, page_token=first.next_page_token)
    assert len(first.tools) == 10 and first.next_page_token
    assert first.total_size == len(served_names(server)) and first.generation == 1
    assert [t.name for t in first.tools + second.tools] == served_names(server)[:20]


async def test_a_bad_view_or_page_size_is_refused(server):
    with toolhost.Client(server.target) as client:
        with pytest.raises(ValueError, match="view must be"):
            client.list_tools(view="everything")  # type: ignore[arg-type]
        with pytest.raises(toolhost.InvalidArgumentError) as caught:
            await in_thread(client.list_tools_page, page_size=-1)
    assert caught.value.reason == toolhost.ErrorReason.INVALID_REQUEST
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT


async def test_get_tool_gives_the_input_schema_as_a_dict(server, tmp_path):
    with toolhost.Client(server.target) as client:
        tool = await in_thread(client.get_tool, "tool_007")
        basic = await in_thread(client.get_tool, "tool_007", view="basic")
    assert tool.name == "tool_007" and tool.source == "catalog"
    assert tool.origin == str(tmp_path / "catalog" / "tool_007.yaml")
    assert tool.input_schema is not None
    assert tool.input_schema["properties"]["name"]["type"] == "string"
    assert tool.raw.name == "tool_007"
    assert tool.to_dict()["input_schema"] == tool.input_schema
    assert basic.input_schema is None


# --- calls ------------------------------------------------------------------------------------------------


async def test_sync_call_tool_runs_echo_and_a_catalog_tool(server):
    with toolhost.Client(server.target, timeout=HANG_GUARD_SECONDS) as client:
        echoed = await in_thread(client.call_tool, "echo", {"text": "hi"}, call_id="call-1")
        greeted = await in_thread(lambda: client.call_tool("tool_001", name="Ada"))
    assert echoed.success and echoed.output == "hi" and echoed.tool == "echo" and echoed.call_id == "call-1"
    assert echoed.error is None and echoed.exit_code is None and echoed.structured_output is None
    assert echoed.timestamp.tzinfo == UTC and echoed.generation == 1
    assert greeted.success and greeted.output == "Hello, Ada."
    assert len(greeted.call_id) == 32


async def test_async_call_tool_merges_mapping_and_keywords(server):
    async with toolhost.AsyncClient(server.target) as client:
        result = await client.call_tool("tool_001", {"name": "from mapping"}, name="from keywords")
    assert result.output == "Hello, from keywords."


async def test_integers_travel_exactly_and_structured_output_comes_back_as_python(server):
    big = 2**70 + 1
    async with toolhost.AsyncClient(server.target) as client:
        text = await client.call_tool("to_text", object=big)
        parsed = await client.call_tool("parse_json", s='{"a": [1, 2.5, "x"], "b": null, "c": {"d": true}}')
    assert text.output == str(big)
    assert parsed.structured_output == {"a": [1, 2.5, "x"], "b": None, "c": {"d": True}}
    assert isinstance(parsed.structured_output["a"][0], int)


@pytest.mark.parametrize(("text", "kind"), [("{}", "struct_value"), ("[]", "list_value"), ("false", "bool_value"),
                                             ("0", "number_value")])
async def test_an_empty_or_falsy_structured_output_is_sent_as_that_value(server, text: str, kind: str):
    # An empty {} or [] once went out as a Value with no kind at all, which the TypeScript client refuses.
    async with toolhost.AsyncClient(server.target) as client:
        parsed = await client.call_tool("parse_json", s=text)
    assert parsed.raw.HasField("structured_output")
    assert parsed.raw.structured_output.WhichOneof("kind") == kind
    assert parsed.structured_output == json.loads(text)


async def test_output_format_and_filter_empty_fields_shape_the_result_of_both_clients(server):
    text = '{"a": [1, 2.5, "x"], "b": null, "c": {"d": true, "e": ""}}'
    with toolhost.Client(server.target, timeout=HANG_GUARD_SECONDS) as client:
        pretty = await in_thread(client.call_tool, "parse_json", {"s": text}, output_format="pretty",
                                 filter_empty_fields=True)
        streamed = await in_thread(lambda: list(client.stream_call("parse_json", s=text, output_format="json")))
        with pytest.raises(ValueError, match="output_format must be"):
            client.call_tool("parse_json", s=text, output_format="yaml")  # type: ignore[arg-type]
    async with toolhost.AsyncClient(server.target, timeout=HANG_GUARD_SECONDS) as client:
        own = await client.call_tool("parse_json", s=text, output_format="text", filter_empty_fields=True)
        events = [event async for event in client.stream_call("parse_json", s=text, output_format="pretty")]
    assert pretty.output == '{\n  "a": [\n    1,\n    2.5,\n    "x"\n  ],\n  "c": {\n    "d": true\n  }\n}'
    assert pretty.structured_output == {"a": [1, 2.5, "x"], "c": {"d": True}}
    result = streamed[-1]
    assert isinstance(result, toolhost.ToolResult)
    assert result.output == '{"a":[1,2.5,"x"],"b":null,"c":{"d":true,"e":""}}'
    # "text" keeps the tool's own text (parse_json's is its value as JSON), only the structured output is filtered.
    assert own.output == '{"a": [1, 2.5, "x"], "b": null, "c": {"d": true, "e": ""}}'
    assert own.structured_output == {"a": [1, 2.5, "x"], "c": {"d": True}}
    last = events[-1]
    assert isinstance(last, toolhost.ToolResult) and last.output.startswith('{\n  "a": [')


async def test_a_tool_result_converts_to_a_json_ready_dict(server):
    async with toolhost.AsyncClient(server.target) as client:
        parsed = await client.call_tool("parse_json", s='{"n": 1}', call_id="as-dict")
        failed = await client.call_tool("parse_json", s="not json")
    as_dict = parsed.to_dict()
    assert json.loads(json.dumps(as_dict)) == as_dict  # JSON-ready as it is
    assert set(as_dict) == {f.name for f in dataclasses.fields(toolhost.ToolResult)} - {"raw"}
    assert as_dict["structured_output"] == {"n": 1} and as_dict["call_id"] == "as-dict"
    assert as_dict["error"] is None and as_dict["exit_code"] is None
    assert datetime.fromisoformat(as_dict["timestamp"]) == parsed.timestamp
    assert failed.to_dict()["error"] == {"code": failed.error.code, "message": failed.error.message}
    assert failed.to_dict()["success"] is False


async def test_a_tool_that_fails_is_a_result_not_an_exception(server):
    with toolhost.Client(server.target) as client:
        result = await in_thread(client.call_tool, "parse_json", {"s": "not json"})
    assert not result.success
    assert result.error is not None and result.error.code == "TOOL_EXCEPTION"
    assert result.call_id in result.error.message


@pytest.mark.parametrize("arguments", [{}, {"name": 5}])
async def test_invalid_arguments_raise_with_field_violations(server, arguments):
    with toolhost.Client(server.target) as client, pytest.raises(toolhost.InvalidArgumentError) as caught:
        await in_thread(client.call_tool, "tool_001", arguments)
    error = caught.value
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.reason == "INVALID_ARGUMENTS" == toolhost.ErrorReason.INVALID_ARGUMENTS
    assert [v.field for v in error.field_violations] == ["/name"]
    assert error.field_violations[0].description
    assert isinstance(error, toolhost.ToolhostError)


async def test_async_invalid_arguments_raise_the_same_error(server):
    async with toolhost.AsyncClient(server.target) as client:
        with pytest.raises(toolhost.InvalidArgumentError) as caught:
            await client.call_tool("echo", text="hi", extra=1)
    assert [v.field for v in caught.value.field_violations] == ["/extra"]


async def test_an_unknown_tool_is_not_found_with_a_suggestion(server):
    with toolhost.Client(server.target) as client, pytest.raises(toolhost.NotFoundError) as caught:
        await in_thread(client.call_tool, "parse_jsno", s="{}")
    error = caught.value
    assert error.code == grpc.StatusCode.NOT_FOUND and error.reason == toolhost.ErrorReason.TOOL_NOT_FOUND
    assert "did you mean 'parse_json'" in error.message
    assert error.metadata["tool"] == "parse_jsno"
    async with toolhost.AsyncClient(server.target) as aclient:
        with pytest.raises(toolhost.NotFoundError):
            await aclient.get_tool("parse_jsno")


async def test_a_call_longer_than_the_timeout_raises_deadline_exceeded(server):
    with toolhost.Client(server.target, timeout=0.3) as client, pytest.raises(toolhost.DeadlineExceededError):
        await in_thread(client.call_tool, "nap", delay=5)
    async with toolhost.AsyncClient(server.target) as aclient:
        with pytest.raises(toolhost.DeadlineExceededError) as caught:
            await aclient.call_tool("nap", delay=5, timeout=0.3)
    assert caught.value.code == grpc.StatusCode.DEADLINE_EXCEEDED


async def test_an_unreachable_server_raises_unavailable():
    target = f"127.0.0.1:{closed_port()}"
    with (toolhost.Client(target, timeout=HANG_GUARD_SECONDS) as client,
          pytest.raises(toolhost.UnavailableError) as caught):
        await in_thread(client.reload)
    assert caught.value.reason is None and caught.value.code == grpc.StatusCode.UNAVAILABLE
    async with toolhost.AsyncClient(target, timeout=HANG_GUARD_SECONDS) as aclient:
        with pytest.raises(toolhost.UnavailableError):
            await aclient.get_tool("echo")


def test_error_reasons_match_the_proto_enum():
    names = error_reason_pb2.ErrorReason.DESCRIPTOR.values_by_name
    from_proto = {name.removeprefix("ERROR_REASON_") for name in names}
    assert {reason.value for reason in toolhost.ErrorReason} == from_proto - {"UNSPECIFIED"}
    assert str(toolhost.ErrorReason.TOOL_NOT_FOUND) == "TOOL_NOT_FOUND"


# --- reload and watch -------------------------------------------------------------------------------------


async def test_reload_reports_added_and_removed_tools(server, tmp_path):
    catalog = tmp_path / "catalog"
    with toolhost.Client(server.target) as client:
        write_tool(catalog, "brand_new")
        added = await in_thread(client.reload)
        (catalog / "tool_003.yaml").unlink()
        removed = await in_thread(client.reload)
        unchanged = await in_thread(client.reload)
    assert added.success and added.added == ("brand_new",) and added.removed == () and added.generation == 2
    assert "brand_new" in added.tools and added.count == len(added.tools)
    assert added.catalog_dirs == (str(catalog),)
    assert [e for e in added.errors if e.file.startswith(str(catalog))] == []
    assert removed.removed == ("tool_003",) and removed.generation == 3
    assert unchanged.generation == 3 and not (unchanged.added or unchanged.removed or unchanged.changed)


async def test_reload_reports_bad_files_with_their_line(server, tmp_path):
    catalog = tmp_path / "catalog"
    write_tool(catalog, "typo", "name: typo\ndescription: A typo.\ntimeout_second: 5\n")
    async with toolhost.AsyncClient(server.target) as client:
        result = await client.reload()
    errors = [e for e in result.errors if e.file == str(catalog / "typo.yaml")]
    assert result.success and len(errors) == 1
    assert errors[0].line == 3 and "timeout_seconds" in errors[0].reason
    assert str(errors[0]).startswith(f"{catalog / 'typo.yaml'}:3: ")


async def test_async_watch_tools_yields_the_current_generation_then_changes(server, tmp_path):
    async with toolhost.AsyncClient(server.target) as client:
        watch = client.watch_tools()
        first = await within(anext(watch), "the current generation")
        assert first.generation == 1 and first.count == len(served_names(server))
        assert sorted(first.added) == served_names(server)
        write_tool(tmp_path / "catalog", "watched")
        await client.reload()
        second = await within(anext(watch), "the reload's generation")
        assert (second.generation, second.added, second.removed) == (2, ("watched",), ())
        assert second.count == first.count + 1
        await watch.aclose()
        assert [event async for event in watch] == []


async def test_async_client_close_ends_a_waiting_watch(server):
    client = toolhost.AsyncClient(server.target)
    watch = client.watch_tools()
    await within(anext(watch), "the current generation")
    rest = asyncio.create_task(_collect(watch))
    await until(lambda: awaits(rest, "read"), "the collecting task waiting for the next message")
    await client.close()
    assert await within(rest, "the end of the watch") == []


async def _collect(watch: toolhost.AsyncToolWatch) -> list[toolhost.GenerationEvent]:
    return [event async for event in watch]


def awaits(task: asyncio.Task[Any], name: str) -> bool:
    """Whether `task` is suspended in a coroutine called `name` (somewhere down its chain of awaits)."""
    awaited: Any = task.get_coro()
    while awaited is not None:
        code = getattr(awaited, "cr_code", None)
        if code is not None and code.co_name == name:
            return True
        awaited = getattr(awaited, "cr_await", None)
    return False


def blocked_in_next(thread: threading.Thread) -> bool:
    """Whether `thread` waits inside a ServerStream's __next__ (for the next message of a blocking stream)."""
    frame = sys._current_frames().get(thread.ident or -1)
    names = []
    while frame is not None:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    return "__next__" in names and names[0] == "wait"


class Reader(threading.Thread):
    """Reads a blocking stream to its end in a thread of its own; `result` is what it read."""

    def __init__(self, stream: Any) -> None:
        super().__init__(daemon=True)
        self._stream = stream
        self.result: list[Any] | None = None
        self.done = asyncio.Event()
        self._loop = asyncio.get_running_loop()

    def run(self) -> None:
        try:
            self.result = list(self._stream)
        finally:
            self._loop.call_soon_threadsafe(self.done.set)


async def test_sync_watch_tools_sees_a_reload_from_another_client_and_stops_on_close(server, tmp_path):
    with toolhost.Client(server.target) as client:
        watch = client.watch_tools()
        first = await in_thread(next, watch)
        assert first.generation == 1 and len(first.added) == len(served_names(server))
        write_tool(tmp_path / "catalog", "watched")
        async with toolhost.AsyncClient(server.target) as other:
            await other.reload()
        second = await within(in_thread(next, watch), "the reload's generation")
        assert (second.generation, second.added) == (2, ("watched",))
        # A reader blocked in next() ends cleanly when the stream is closed from another thread.
        reader = Reader(watch)
        reader.start()
        await until(lambda: blocked_in_next(reader), "the reader blocked in next()")
        watch.close()
        await within(reader.done.wait(), "the reader's end")
        assert reader.result == []


async def test_sync_client_close_ends_a_waiting_watch(server):
    client = toolhost.Client(server.target)
    watch = client.watch_tools()
    await in_thread(next, watch)
    reader = Reader(watch)
    reader.start()
    await until(lambda: blocked_in_next(reader), "the reader blocked in next()")
    await in_thread(client.close)
    await within(reader.done.wait(), "the reader's end")
    assert reader.result == []


async def test_a_given_channel_is_used_and_left_open(server):
    channel = grpc.insecure_channel(server.target)
    try:
        with toolhost.Client(channel=channel, metadata={"x-test": "1"}) as client:
            assert (await in_thread(client.get_tool, "echo")).name == "echo"
        with toolhost.Client(channel=channel) as again:
            assert (await in_thread(again.call_tool, "echo", text="still open")).output == "still open"
    finally:
        channel.close()


async def test_the_receive_limit_applies_to_responses(server):
    # The default (64 MiB) takes a full page of 1000 tools with schemas; a tiny limit shows that it is applied.
    client = toolhost.Client(server.target, max_receive_message_bytes=1000)
    with client, pytest.raises(toolhost.ResourceExhaustedError):
        await in_thread(client.list_tools_page, view="full", page_size=1000)
    async with toolhost.AsyncClient(server.target) as aclient:
        page = await aclient.list_tools_page(view="full", page_size=1000)
    assert len(page.tools) == len(served_names(server)) and page.raw.ByteSize() > 1000


def readme_example() -> str:
    """The first Python block of the client's README."""
    readme = Path(__file__).resolve().parent.parent / "clients" / "python" / "README.md"
    return readme.read_text().split("```python\n")[1].split("```")[0]


async def test_the_readme_example_runs(start_server):
    # The bundled catalog and built-ins are what `toolhost serve` offers with no flags, as the README assumes.
    server = await start_server()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", readme_example(), env={**os.environ, "TOOLHOST_TARGET": server.target},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await within(process.communicate(), "the README example ending")
    assert process.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert "['text']" in lines and "True hello" in lines and "INVALID_ARGUMENTS" in lines
    assert "/text required argument is missing" in lines
    assert any(line.startswith("Hello, Ada!") for line in lines)
