"""StreamCallTool through the real server and the Python client: order, liveness, progress, cancel, redaction."""

from __future__ import annotations

import asyncio
import sys

import pytest

import toolhost
from toolhost_server.call_events import EventBuffer, OutputChunk, Progress

from helpers.catalogs import add_tool, write_tool
from helpers.processes import leftover_processes, marker
from helpers.waiting import eventually

PY = sys.executable
# A JWT-shaped token: recognisable only whole, so it tests secrets split across chunks.
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZ2VudCJ9.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg"


@pytest.fixture
async def server(start_server, tmp_path):
    catalog = tmp_path / "catalog"
    # Prints a line, then waits for the test to create the gate file before printing the second one.
    add_tool(catalog, "gated", {"type": "script", "script": (
        '#!/bin/bash\necho first\necho "to stderr" >&2\n'
        'while [ ! -e "$TOOL_ARG_GATE" ]; do sleep 0.02; done\necho second\n')},
        "  - {name: gate, type: string, required: true}\n")
    add_tool(catalog, "lines", {"type": "process", "argv": [
        PY, "-c", "import sys\nfor i in range(int(sys.argv[1])): print('line %d' % i, flush=i % 7 == 0)", "{count}"]},
        "  - {name: count, type: integer, required: true}\n")
    add_tool(catalog, "sleeper", {"type": "script", "script": (
        '#!/bin/bash\necho started\nexec sleep 1000\n')},
        "  - {name: mark, type: string, required: true}\n")
    # Writes a token in two pieces, a pause between them, so they arrive as separate chunks.
    add_tool(catalog, "split_secret", {"type": "process", "argv": [PY, "-c", (
        "import sys, time\nt = sys.argv[1]\nsys.stdout.write('header\\nAuthorization: Bearer ' + t[:20])\n"
        "sys.stdout.flush(); time.sleep(0.3)\nsys.stdout.write(t[20:] + '\\nafter\\n')\n"), "{token}"]},
        "  - {name: token, type: string, required: true}\n")
    write_tool(catalog, "progress", (
        "name: progress\ndescription: Reports progress.\n"
        "runner: {type: python, entrypoint: 'catalog_functions:ReportsProgress'}\n"
        "parameters:\n  - {name: steps, type: integer, required: true}\n"))
    return await start_server(catalog_dirs=[catalog], kill_grace_seconds=0.2)


async def test_output_arrives_in_order_before_the_process_ends(server, tmp_path):
    gate = tmp_path / "gate"
    events: list[toolhost.StreamEvent] = []
    async with toolhost.AsyncClient(server.target, timeout=30) as client:
        async for event in client.stream_call("gated", gate=str(gate)):
            events.append(event)
            if isinstance(event, toolhost.OutputChunk) and event.stream == "stdout" and not gate.exists():
                # The process is still waiting for this file: the chunk came while it ran.
                assert event.text == "first\n"
                gate.touch()
    chunks = [e for e in events if isinstance(e, toolhost.OutputChunk)]
    assert "".join(c.text for c in chunks if c.stream == "stdout") == "first\nsecond\n"
    assert "".join(c.text for c in chunks if c.stream == "stderr") == "to stderr\n"
    result = events[-1]
    assert isinstance(result, toolhost.ToolResult)
    assert result.success and result.output == "first\nsecond\n" and result.stderr == "to stderr\n"
    assert sum(isinstance(e, toolhost.ToolResult) for e in events) == 1


async def test_many_chunks_concatenate_to_the_result_in_order(server):
    async with toolhost.AsyncClient(server.target, timeout=30) as client:
        events = [e async for e in client.stream_call("lines", count=20000)]
    result = events[-1]
    assert isinstance(result, toolhost.ToolResult) and result.success
    streamed = "".join(e.text for e in events if isinstance(e, toolhost.OutputChunk))
    assert streamed == result.output == "".join(f"line {i}\n" for i in range(20000))
    assert len([e for e in events if isinstance(e, toolhost.OutputChunk)]) > 1


async def test_the_blocking_client_streams_too(server):
    def stream_lines() -> list[toolhost.StreamEvent]:
        with toolhost.Client(server.target, timeout=30) as client, client.stream_call("lines", {"count": 3}) as stream:
            return list(stream)

    events = await asyncio.to_thread(stream_lines)  # the server runs on this test's event loop
    assert "".join(e.text for e in events if isinstance(e, toolhost.OutputChunk)) == "line 0\nline 1\nline 2\n"
    assert isinstance(events[-1], toolhost.ToolResult) and events[-1].success


async def test_a_python_tool_reports_progress_redacted(server):
    async with toolhost.AsyncClient(server.target, timeout=30) as client:
        events = [e async for e in client.stream_call("progress", steps=3)]
    progress = [e for e in events if isinstance(e, toolhost.CallProgress)]
    assert [(p.progress, p.total) for p in progress] == [(1, 3), (2, 3), (3, 3)]
    assert all("hunter2" not in p.message and p.message.startswith(f"step {i + 1} ") for i, p in
               enumerate(progress))
    result = events[-1]
    assert isinstance(result, toolhost.ToolResult)
    assert result.output == "counted to 3" and result.redacted


async def test_cancelling_the_stream_kills_the_tool(server):
    mark = marker()
    async with toolhost.AsyncClient(server.target, timeout=30) as client:
        stream = client.stream_call("sleeper", mark=mark)
        first = await anext(stream)
        assert isinstance(first, toolhost.OutputChunk) and first.text == "started\n"
        # Waited for, not asserted at once: the script is exec'ing sleep now, and while a process execs its
        # environment can read as empty (CI saw it under load).
        await eventually(lambda: bool(leftover_processes(mark)))
        await stream.aclose()
    await eventually(lambda: not leftover_processes(mark))
    await eventually(lambda: server.toolhost.pipeline.in_flight == 0)


async def test_the_deadline_of_a_stream_kills_the_tool(server):
    mark = marker()
    async with toolhost.AsyncClient(server.target) as client:
        with pytest.raises(toolhost.DeadlineExceededError):
            async for _ in client.stream_call("sleeper", mark=mark, timeout=1.0):
                pass
    await eventually(lambda: not leftover_processes(mark))


async def test_a_secret_split_across_chunks_is_redacted(server):
    async with toolhost.AsyncClient(server.target, timeout=30) as client:
        events = [e async for e in client.stream_call("split_secret", token=JWT)]
    streamed = "".join(e.text for e in events if isinstance(e, toolhost.OutputChunk))
    result = events[-1]
    assert isinstance(result, toolhost.ToolResult) and result.success and result.redacted
    for text in (streamed, result.output):
        assert JWT[:20] not in text and JWT[20:] not in text
        assert text.startswith("header\nAuthorization: Bearer [REDACTED]") and text.endswith("\nafter\n")


async def test_errors_before_the_tool_starts_end_the_stream_with_a_status(server):
    async with toolhost.AsyncClient(server.target, timeout=30) as client:
        with pytest.raises(toolhost.NotFoundError, match="no_such_tool"):
            async for _ in client.stream_call("no_such_tool"):
                pass
        with pytest.raises(toolhost.InvalidArgumentError) as caught:
            async for _ in client.stream_call("lines", count="many"):
                pass
    assert [v.field for v in caught.value.field_violations] == ["/count"]


async def test_a_secret_cut_at_the_output_limit_does_not_survive_as_its_first_half(start_server, tmp_path):
    catalog = tmp_path / "catalog"
    # The access key id starts 10 bytes before the limit: the kept part ends with "AKIAIOSFOD".
    add_tool(catalog, "cut", {"type": "process", "argv": [
        PY, "-c", "import sys; sys.stdout.write('x' * 90 + ' AKIAIOSFODNN7EXAMPLE and more')"]})
    server = await start_server(catalog_dirs=[catalog], max_output_bytes=101)
    async with toolhost.AsyncClient(server.target, timeout=30) as client:
        result = await client.call_tool("cut")
        events = [e async for e in client.stream_call("cut")]
    streamed = "".join(e.text for e in events if isinstance(e, toolhost.OutputChunk))
    for text in (result.output, streamed):
        assert "AKIA" not in text
        assert text == "x" * 90 + " "
    assert result.truncated and result.original_size_bytes == 120
    assert isinstance(events[-1], toolhost.ToolResult) and events[-1].output == result.output


async def test_chunks_stop_at_the_output_limit(start_server, tmp_path):
    catalog = tmp_path / "catalog"
    add_tool(catalog, "big", {"type": "process", "argv": [
        PY, "-c", "import sys\nfor _ in range(100): sys.stdout.write('y' * 9999 + '\\n')"]})
    server = await start_server(catalog_dirs=[catalog], max_output_bytes=50_000)
    async with toolhost.AsyncClient(server.target, timeout=30) as client:
        events = [e async for e in client.stream_call("big")]
    streamed = "".join(e.text for e in events if isinstance(e, toolhost.OutputChunk))
    result = events[-1]
    assert isinstance(result, toolhost.ToolResult)
    assert result.truncated and result.original_size_bytes == 1_000_000
    # Cut back to the last whole line: the partial run of y's at the limit could be the start of a token.
    assert streamed == result.output == ("y" * 9999 + "\n") * 5


async def test_a_slow_reader_gets_every_chunk_but_only_the_latest_of_waiting_progress_reports():
    buffer = EventBuffer()
    for step in range(1, 10_001):  # a tool reporting in a tight loop, nobody reading yet
        buffer.put(Progress(step, 10_000))
    buffer.put(OutputChunk("stdout", "a"))
    buffer.put(Progress(1, 2))
    buffer.put(OutputChunk("stdout", "b"))
    buffer.close()
    events = []
    while (event := await buffer.get()) is not None:
        events.append(event)
    assert events == [Progress(10_000, 10_000), OutputChunk("stdout", "a"), Progress(1, 2), OutputChunk("stdout", "b")]
