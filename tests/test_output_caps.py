"""A process that writes far more than the output limit: cut with the right counts, the server's memory bounded."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import toolhost

from server_process import ServerProcess

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
