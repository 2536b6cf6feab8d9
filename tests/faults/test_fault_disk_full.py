"""Fault injection: the filesystem of the data directory full under a server writing its SQLite store.

Proves that calls go on while the store cannot write; that the store's errors are reported, logged and counted
(toolhost_store_write_errors_total in /metrics), while the records wait in memory; and that once there is space
again nothing is corrupt (PRAGMA integrity_check says ok), writes resume, and every call's audit row is there,
once. The full disk is a small tmpfs mounted on the data directory, filled with a file; where mounting is refused
(no root, or no CAP_SYS_ADMIN) the test says so in a warning and lowers RLIMIT_FSIZE of the server process to the
size its files have instead (a write past it fails, as on a full disk), raising it again to free the "space".
"""

from __future__ import annotations

import asyncio
import errno
import resource
import shutil
import sqlite3
import subprocess
import tempfile
import warnings
from collections import Counter
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import grpc
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from toolhost.v1 import tool_service_pb2, tool_service_pb2_grpc

from helpers.log_drain import draining, logged
from helpers.servers import ServerProcess
from helpers.waiting import within

pytestmark = [pytest.mark.slow, pytest.mark.server]

TMPFS_SIZE = "4m"
AUDIT_ERRORS = ("toolhost_store_write_errors_total", (("table", "audit_records"),))


class FullDisk:
    """Makes the data directory's filesystem full (`fill`) and frees it again (`free`)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    def attach(self, pid: int) -> None:
        """The server runs with that pid, on `data_dir`."""

    def fill(self) -> None:
        raise NotImplementedError

    def free(self) -> None:
        raise NotImplementedError


class FullTmpfs(FullDisk):
    """A tmpfs of TMPFS_SIZE mounted on the data directory; filling it writes a file until ENOSPC."""

    def fill(self) -> None:
        chunk = b"\0" * 65536
        with open(self.data_dir / "filler", "wb", buffering=0) as filler:
            for size in (len(chunk), 4096, 1):  # down to the last byte the pages left hold
                try:
                    while True:
                        filler.write(chunk[:size])
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise

    def free(self) -> None:
        (self.data_dir / "filler").unlink()


class FileSizeLimit(FullDisk):
    """RLIMIT_FSIZE of the server process, lowered to the size of its largest file in the data directory."""

    def attach(self, pid: int) -> None:
        self.pid = pid

    def fill(self) -> None:
        largest = max(path.stat().st_size for path in self.data_dir.iterdir())
        resource.prlimit(self.pid, resource.RLIMIT_FSIZE, (largest, resource.RLIM_INFINITY))

    def free(self) -> None:
        resource.prlimit(self.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


@pytest.fixture
def full_disk() -> Iterator[FullDisk]:
    data_dir = Path(tempfile.mkdtemp(prefix="toolhost-full-"))
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE},mode=0700", "none", str(data_dir)],
                             capture_output=True, text=True, check=False)
    try:
        if mounted.returncode == 0:
            yield FullTmpfs(data_dir)
        else:
            warnings.warn(f"mount -t tmpfs refused ({mounted.stderr.strip() or mounted.returncode}): the full disk "
                          "is RLIMIT_FSIZE on the server process instead", stacklevel=1)
            yield FileSizeLimit(data_dir)
    finally:
        if mounted.returncode == 0:
            subprocess.run(["umount", str(data_dir)], capture_output=True, check=False)
        shutil.rmtree(data_dir, ignore_errors=True)


def audited_call_ids(database: Path) -> Counter[str]:
    with closing(sqlite3.connect(database, timeout=30)) as connection:
        return Counter(dict(connection.execute("SELECT call_id, count(*) FROM audit_records GROUP BY call_id")))


async def until_audited(database: Path, call_ids: list[str], what: str) -> Counter[str]:
    """Read the table until every one of `call_ids` is there: the server's writer announces nothing to the test."""
    async def poll() -> Counter[str]:
        while not set(call_ids) <= set(found := await asyncio.to_thread(audited_call_ids, database)):
            await asyncio.sleep(0.05)
        return found

    return await within(poll(), what)


async def metric(http_port: int, key: tuple[str, tuple[tuple[str, str], ...]]) -> float:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{http_port}") as client:
        text = (await client.get("/metrics")).text
    return next(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
                if (sample.name, tuple(sorted(sample.labels.items()))) == key)


async def echo(stub: tool_service_pb2_grpc.ToolServiceStub, call_id: str) -> tool_service_pb2.CallToolResponse:
    return await stub.CallTool(tool_service_pb2.CallToolRequest(name="echo", arguments_json='{"text": "x"}',
                                                                call_id=call_id), timeout=30)


async def test_a_full_data_directory_is_reported_calls_go_on_and_the_store_resumes_intact(full_disk):
    server = ServerProcess(env={"TOOLHOST_DATA_DIR": str(full_disk.data_dir)})
    await server.start()
    assert server.process is not None
    full_disk.attach(server.process.pid)
    database = full_disk.data_dir / "toolhost.db"
    made: list[str] = []
    try:
        async with draining(server), grpc.aio.insecure_channel(server.target) as channel:
            http_port = int((await logged(server, rb"serving HTTP .* on 127\.0\.0\.1:(\d+)")).group(1))
            stub = tool_service_pb2_grpc.ToolServiceStub(channel)
            made += [f"before-{index}" for index in range(10)]
            assert all([(await echo(stub, call_id)).success for call_id in made])
            await until_audited(database, made, "the rows of the calls before the disk filled")

            full_disk.fill()
            # Calls until the store reports that it cannot write: the records of the first few may still fit in
            # space SQLite holds already (its write-ahead log is reused, not grown, after a checkpoint).
            async def calls_until_the_store_fails() -> None:
                batch = 0
                while await metric(http_port, AUDIT_ERRORS) == 0:
                    ids = [f"full-{batch}-{index}" for index in range(50)]
                    made.extend(ids)
                    responses = await asyncio.gather(*(echo(stub, call_id) for call_id in ids))
                    assert all(response.success for response in responses)
                    batch += 1
                    await asyncio.sleep(0.1)  # the writer flushes every second; nothing announces its attempt

            await within(calls_until_the_store_fails(), "a failed write counted in /metrics")
            await logged(server, rb"cannot write \d+ audit records to the database: cannot write the SQLite database")
            await logged(server, rb"free space on its filesystem")
            assert all([(await echo(stub, f"still-full-{index}")).success for index in range(5)])
            made += [f"still-full-{index}" for index in range(5)]

            full_disk.free()
            stored = await until_audited(database, made, "every call's row once there is space again")
            await logged(server, rb"writing audit records to the database works again")
            assert await metric(http_port, ("toolhost_store_records_dropped_total",
                                            (("reason", "buffer_full"), ("table", "audit_records")))) == 0
        assert all(count == 1 for count in stored.values()), "a row written twice"
        with closing(sqlite3.connect(database, timeout=30)) as connection:
            assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        await server.stop()
