"""A process that writes far more than the output limit: cut with the right counts, the server's memory bounded."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import toolhost

from helpers.servers import ServerProcess

FIFTY_MB = 50 * 1024 * 1024
# Writes `size` bytes of lowercase letters in 1 MiB blocks, in lines, and one line to stderr.
FLOOD = (
    "import sys\nsize = int(sys.argv[1])\nblock = (b'abcdefghijklmnopqrstuvwxyz' * 40 + b'\\n') * 1000\n"
    "block = block[:1024 * 1024]\nwritten = 0\n"
    "while written < size:\n    part = block[:size - written]\n    sys.stdout.buffer.write(part)\n"
    "    written += len(part)\nsys.stderr.write('done\\n')\n"
)


def high_water_mark_kib(pid: int) -> int:
    """The peak resident memory of a process so far (VmHWM), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmHWM for process {pid}")


@pytest.mark.server
async def test_a_50_mb_output_is_cut_with_the_right_counts_in_bounded_memory(tmp_path):
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    runner = {"type": "process", "argv": [sys.executable, "-c", FLOOD, "{size}"]}
    (catalog / "flood.yaml").write_text(
        f"name: flood\ndescription: Writes a lot.\nrunner: {json.dumps(runner)}\n"
        "parameters:\n  - {name: size, type: integer, required: true}\n")
    server = ServerProcess("--catalog-dir", str(catalog), "--watch-catalog", "false", "--process-user", "root")
    await server.start()
    try:
        assert server.process is not None
        async with toolhost.AsyncClient(server.target, timeout=120) as client:
            # Warm up: the first call loads what every call needs, so the peak below is the big call's own.
            warm = await client.call_tool("flood", size=2 * 1024 * 1024)
            assert warm.truncated and warm.original_size_bytes == 2 * 1024 * 1024
            before = high_water_mark_kib(server.process.pid)
            result = await client.call_tool("flood", size=FIFTY_MB)
            after = high_water_mark_kib(server.process.pid)
    finally:
        await server.stop()
    assert result.success, result.error
    assert result.truncated and result.original_size_bytes == FIFTY_MB
    # The limit is 1 MiB; the output is cut back to its last whole line (the partial one could hide a token).
    assert len(result.output.encode()) <= 1024 * 1024
    assert result.output.endswith("\n") and len(result.output) > 1024 * 1024 - 1100
    assert result.stderr == "done\n"
    # Holding the whole output would take 50 MB and more; the capture keeps 1 MiB per stream plus a read chunk.
    assert after - before < 20 * 1024, f"peak memory grew by {(after - before) // 1024} MiB"


async def test_a_tool_sets_its_own_limit_and_python_tools_are_cut_too(start_server, tmp_path):
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    runner = {"type": "process", "argv": [sys.executable, "-c", "print('z' * 5000)"]}
    (catalog / "small.yaml").write_text(
        f"name: small\ndescription: Keeps 100 bytes.\nmax_output_bytes: 100\nrunner: {json.dumps(runner)}\n")
    (catalog / "echo_small.yaml").write_text(
        "name: echo_small\ndescription: Echo, 10 bytes kept.\nmax_output_bytes: 10\n"
        "runner: {type: python, entrypoint: 'toolhost_server.tools.echo:Echo'}\n"
        "parameters: [{name: text, type: string, required: true}]\n")
    (catalog / "describe_small.yaml").write_text(
        "name: describe_small\ndescription: Returns its arguments as structured output.\nmax_output_bytes: 40\n"
        "runner: {type: python, entrypoint: 'catalog_functions:describe'}\n"
        "parameters: [{name: text, type: string, required: true}]\n")
    (catalog / "bad_limit.yaml").write_text(
        "name: bad_limit\ndescription: Bad.\nmax_output_bytes: 0\nimplementation: echo\n")
    server = await start_server(catalog_dirs=[catalog])
    async with toolhost.AsyncClient(server.target, timeout=30) as client:
        small = await client.call_tool("small")
        echoed = await client.call_tool("echo_small", text="é" * 8)  # 16 bytes
        described = await client.call_tool("describe_small", text="x" * 100)
        report = await client.reload()
    assert small.truncated and small.original_size_bytes == 5001 and small.output == ""  # one 5000-byte token
    assert echoed.truncated and echoed.original_size_bytes == 16 and echoed.output == "é" * 5
    assert not described.success and described.error is not None and described.error.code == "INVALID_OUTPUT"
    assert "max_output_bytes" in described.error.message
    assert [(e.line, "max_output_bytes" in e.reason) for e in report.errors] == [(3, True)]
