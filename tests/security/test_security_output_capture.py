"""Security review finding 6 (issue 16): secrets from Python tools reached the server's stderr and stdout
unredacted through `warnings.warn`, exceptions in threads, `print` and `sys.stderr.write`. A real `toolhost serve`
runs tools that do each; its stdout and stderr are read whole after it stops.

The tools are the functions below: the server imports this module by name (its directory is on PYTHONPATH), so
the module imports nothing of the test suite.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import re
import signal
import sys
import threading
import warnings
from pathlib import Path

import grpc
import pytest

from toolhost.v1 import tool_service_pb2, tool_service_pb2_grpc

KEY_ID = "AKIAIOSFODNN7EXAMPLE"  # recognised by its shape
HERE = Path(__file__).resolve().parent
LISTENING = re.compile(rb"serving gRPC on 127\.0\.0\.1:(\d+)")


def print_it() -> str:
    print(f"the key is {KEY_ID}")
    print("a partial line with", KEY_ID, end="")  # no newline: written when the stream is flushed
    return "printed"


def write_stderr() -> str:
    sys.stderr.write(f"stderr has {KEY_ID}\n")
    return "written"


def warn_it() -> str:
    warnings.warn(f"deprecated key {KEY_ID}", UserWarning, stacklevel=1)
    return "warned"


def raise_in_thread() -> str:
    def fail() -> None:
        raise ValueError(f"thread failed with {KEY_ID}")

    thread = threading.Thread(target=fail, name="tool-worker")
    thread.start()
    thread.join()
    return "raised"


class _Unraisable:
    def __del__(self) -> None:
        raise RuntimeError(f"finalizer failed with {KEY_ID}")


def unraisable() -> str:
    _Unraisable()
    gc.collect()
    return "collected"


TOOLS = ("print_it", "write_stderr", "warn_it", "raise_in_thread", "unraisable")


@pytest.mark.server
async def test_what_python_tools_print_warn_or_raise_in_threads_is_logged_redacted(tmp_path):
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    for name in TOOLS:
        (catalog / f"{name}.yaml").write_text(
            f"name: {name}\ndescription: Misbehaves.\n"
            f"runner: {{type: python, entrypoint: 'test_security_output_capture:{name}'}}\n")
    env = {**os.environ, "PYTHONPATH": str(HERE), "TOOLHOST_DATA_DIR": str(tmp_path / "data"),
           "TOOLHOST_HTTP_ADDRESS": "127.0.0.1:0", "TOOLHOST_LOG_FORMAT": "json",
           "TOOLHOST_PYTHON_ENTRYPOINT_MODULES": "test_security_output_capture"}
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "toolhost_server.cli", "serve", "--grpc-address", "127.0.0.1:0",
        "--catalog-dir", str(catalog), "--watch-catalog", "false", env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert server.stderr is not None and server.stdout is not None
    seen = b""
    while (found := LISTENING.search(seen)) is None:
        line = await server.stderr.readline()
        assert line, f"the server exited before listening:\n{seen.decode()}"
        seen += line
    async with grpc.aio.insecure_channel(f"127.0.0.1:{int(found.group(1))}") as channel:
        stub = tool_service_pb2_grpc.ToolServiceStub(channel)
        for name in TOOLS:
            response = await stub.CallTool(tool_service_pb2.CallToolRequest(name=name))
            assert response.success, (name, response.error)
    server.send_signal(signal.SIGTERM)
    rest_of_stderr, stdout = await asyncio.gather(server.stderr.read(), server.stdout.read())
    assert await server.wait() == 0
    stderr = (seen + rest_of_stderr).decode()

    assert KEY_ID not in stdout.decode() and KEY_ID not in stderr
    records = [json.loads(line) for line in stderr.splitlines()]  # every line one JSON object
    by_logger: dict[str, list[str]] = {}
    for record in records:
        by_logger.setdefault(record["logger"], []).append(record["message"] + record.get("exception", ""))
    assert "the key is [REDACTED]" in by_logger["toolhost.stdout"]
    assert "a partial line with [REDACTED]" in by_logger["toolhost.stdout"]
    assert "stderr has [REDACTED]" in by_logger["toolhost.stderr"]
    assert any("deprecated key [REDACTED]" in message for message in by_logger["py.warnings"])
    output = by_logger["toolhost.output"]
    assert any("uncaught exception in thread tool-worker" in m and "[REDACTED]" in m for m in output), output
    assert any("_Unraisable" in m and "finalizer failed with [REDACTED]" in m for m in output), output


def test_lines_written_by_threads_at_once_stay_whole_and_long_ones_are_logged_in_parts():
    from toolhost_server.logs.captured_output import MAX_LINE_CHARS, LoggingStream

    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    log = logging.getLogger(f"toolhost.test.capture.{id(records)}")
    log.addHandler(Keep())
    log.propagate = False
    log.setLevel(logging.INFO)
    stream = LoggingStream(log, logging.INFO, sys.__stderr__)

    def printing(name: str) -> None:
        for index in range(200):
            stream.write(f"{name} line")  # print() writes a line and its end separately
            stream.write(f" {index}\n")

    threads = [threading.Thread(target=printing, args=(f"tool{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(records) == sorted(f"tool{n} line {index}" for n in range(4) for index in range(200))

    records.clear()
    stream.write("x" * (MAX_LINE_CHARS * 2 + 5))  # past the limit: logged at once, in parts
    stream.write("y")  # a partial line, logged when the capture ends
    stream.flush_all()
    assert [len(record) for record in records] == [MAX_LINE_CHARS, MAX_LINE_CHARS, 5, 1]
