"""Logs without a server: the JSON line format, the memory ring, the file reader (huge files, rotation, text
lines), the database reader on SQLite and PostgreSQL, and the inspector's merge, filters, pages and summary."""

from __future__ import annotations

import asyncio
import gc
import io
import json
import logging
import os
import sys
import threading
import time
import weakref
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

from toolhost_server.errors import InvalidPageTokenError, InvalidRequestError
from toolhost_server.logs.buffered_stream import BufferedStreamHandler
from toolhost_server.logs.database import INSTANCE, DatabaseLogHandler, DatabaseLogReader
from toolhost_server.logs.file_reader import FileLogReader
from toolhost_server.logs.formatting import JsonLogFormatter, default_log_format
from toolhost_server.logs.inspector import LogInspector
from toolhost_server.logs.memory import MemoryLogReader, MemoryRingHandler
from toolhost_server.logs.query import LogFilter, LogQuery, ReadResult
from toolhost_server.logs.record import LogRecord, format_time
from toolhost_server.logs.reverse_lines import BLOCK_SIZE
from toolhost_server.sanitize import RedactingLogFilter, Redactor
from toolhost_server.serve import configure_logging
from toolhost_server.store.database import Store
from toolhost_server.store.engine import sqlite_file_url
from toolhost_server.store.log_table import LogTable

from helpers.waiting import HANG_GUARD_SECONDS, within
from postgres_cluster import DATABASES

BASE = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def json_line(moment: datetime, message: str, level: str = "INFO", **extra: object) -> str:
    return json.dumps({"time": moment.isoformat(), "level": level, "logger": "app", "message": message, **extra}) + "\n"


def emit(handler: logging.Handler, moment: datetime, message: str, level: int = logging.INFO,
         name: str = "app", **extra: object) -> None:
    """Hand the handler a record made at `moment` (the stdlib stamps records with the current time)."""
    record = logging.LogRecord(name, level, __file__, 1, message, None, None)
    record.created = moment.timestamp()
    for key, value in extra.items():
        setattr(record, key, value)
    handler.handle(record)


# --- the line format ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("created", [1747643787.5480855, 1700000000.9999996, 1700000000.0000004, 1700000000.0,
                                     1699999999.9999995, time.time()])
def test_a_json_line_shows_the_time_the_ring_shows_for_the_same_record(created):
    # The formatter formats the date once per second and rounds the microseconds itself; the ring converts the
    # record through datetime.fromtimestamp. One record must show one time in both, at a second's edge too.
    record = logging.LogRecord("test.logs.time", logging.INFO, __file__, 1, "at a time", None, None)
    record.created = created
    line = json.loads(JsonLogFormatter().format(record))
    assert line["time"] == format_time(datetime.fromtimestamp(created, UTC))


def test_json_lines_carry_time_level_logger_message_trace_ids_and_extra_fields():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonLogFormatter())
    logger = logging.getLogger("test.logs.json")
    logger.addHandler(handler)
    logger.propagate = False
    tracer = TracerProvider().get_tracer("test")
    try:
        with tracer.start_as_current_span("call") as span:
            logger.warning("inside %s", "a span", extra={"audit": {"tool": "echo", "argument_keys": ["text"]}})
        try:
            raise ValueError("boom")
        except ValueError:
            logger.exception("outside")
    finally:
        logger.removeHandler(handler)
    inside, outside = (json.loads(line) for line in stream.getvalue().splitlines())
    context = span.get_span_context()
    assert inside["trace_id"] == f"{context.trace_id:032x}" and inside["span_id"] == f"{context.span_id:016x}"
    assert (inside["level"], inside["logger"], inside["message"]) == ("WARNING", "test.logs.json", "inside a span")
    assert inside["audit"] == {"tool": "echo", "argument_keys": ["text"]}
    assert inside["time"].endswith("Z") and datetime.fromisoformat(inside["time"]).tzinfo is not None
    assert list(inside)[:6] == ["time", "level", "logger", "message", "trace_id", "span_id"]
    assert (outside["trace_id"], outside["span_id"]) == ("", "")
    assert outside["level"] == "ERROR" and "ValueError: boom" in outside["exception"]


def test_an_extra_field_never_replaces_the_traceback_nor_loses_the_line():
    try:
        raise ValueError("the real failure")
    except ValueError:
        record = logging.LogRecord("app", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    # An empty name, and a value json cannot encode as it is (a tuple key): the walk's path.
    setattr(record, "", "empty")
    record.exception = "not the traceback"
    record.detail = {("a", "b"): 1}
    line = json.loads(JsonLogFormatter().format(record))
    assert "ValueError: the real failure" in line["exception"]
    assert line[""] == "empty" and line["detail"] == {"('a', 'b')": 1}


def test_a_full_batch_of_lines_is_written_by_the_thread_that_logs_it():
    # A blocked stream then holds up the logging threads, as a plain StreamHandler would, instead of memory.
    stream = io.StringIO()
    handler = BufferedStreamHandler(stream, flush_seconds=3600, max_lines=3)
    try:
        for index in range(3):
            handler.handle(logging.LogRecord("app", logging.INFO, __file__, 1, f"line {index}", None, None))
        assert stream.getvalue().splitlines() == ["line 0", "line 1", "line 2"]
    finally:
        handler.close()


def test_the_format_is_text_on_a_terminal_and_json_elsewhere():
    primary, secondary = os.openpty()
    with open(secondary, "w") as terminal:
        assert default_log_format(terminal) == "text"
    os.close(primary)
    assert default_log_format(io.StringIO()) == "json"


def test_configured_json_logging_redacts_before_formatting(capsys):
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    try:
        configure_logging("INFO", Redactor(), log_format="json")
        logging.getLogger("test.logs.redact").info("connecting with password=hunter2-secret-value")
        for handler in root.handlers:
            handler.flush()  # the stderr handler writes in batches
    finally:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
    [line] = [json.loads(line) for line in capsys.readouterr().err.splitlines() if "connecting" in line]
    assert "hunter2" not in line["message"] and "[REDACTED]" in line["message"]


class WriteSignallingStream(io.StringIO):
    """A stream that notes which threads wrote to it and lets a test wait for a write."""

    def __init__(self) -> None:
        super().__init__()
        self.writers: list[str] = []
        self.written = threading.Event()

    def write(self, text: str) -> int:
        self.writers.append(threading.current_thread().name)
        count = super().write(text)
        self.written.set()
        return count


def test_the_stderr_handler_writes_in_batches_and_warnings_at_once():
    stream = WriteSignallingStream()
    # The writer thread's period is longer than the test: what it shows was written by the emitting thread.
    handler = BufferedStreamHandler(stream, flush_seconds=3600)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger = logging.getLogger("test.logs.buffered")
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    try:
        logger.info("first")
        logger.info("second")
        assert stream.getvalue() == ""  # waiting for the writer thread
        logger.warning("trouble")  # written before emit returns, after what waited
        assert stream.getvalue() == "INFO first\nINFO second\nWARNING trouble\n"
        logger.info("last")
        handler.close()  # what logging.shutdown does at exit
        assert stream.getvalue().endswith("WARNING trouble\nINFO last\n")
        assert "log-writer" not in stream.writers
    finally:
        logger.removeHandler(handler)
        logger.propagate = True


def test_the_stderr_handlers_thread_writes_what_waits():
    stream = WriteSignallingStream()
    handler = BufferedStreamHandler(stream, flush_seconds=0.01)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    try:
        handler.handle(logging.LogRecord("app", logging.INFO, __file__, 1, "waiting", None, None))
        assert stream.written.wait(HANG_GUARD_SECONDS), "the writer thread never wrote the waiting line"
        assert stream.getvalue() == "INFO waiting\n" and stream.writers == ["log-writer"]
    finally:
        handler.close()


# --- the memory ring ----------------------------------------------------------------------------------------


def test_the_memory_ring_keeps_the_newest_records_up_to_its_capacity():
    ring = MemoryRingHandler(capacity=5)
    for index in range(12):
        emit(ring, BASE + timedelta(seconds=index), f"record {index}")
    assert [r.message for r in ring.records()] == [f"record {i}" for i in range(7, 12)]
    result = MemoryLogReader(ring).read(LogQuery(limit=3))
    assert [r.message for r in result.records] == ["record 11", "record 10", "record 9"]
    assert {r.source for r in result.records} == {"memory"}


def test_the_memory_ring_keeps_the_newest_records_within_its_byte_bound():
    ring = MemoryRingHandler(capacity=1000, max_bytes=50_000)
    for index in range(100):
        emit(ring, BASE + timedelta(seconds=index), f"record {index:03} " + "x" * 2000)
    held = ring.records()
    # The byte bound decided, not the count: the newest records, as many as fit and no fewer.
    assert 0 < len(held) < 100
    assert [r.message[:10] for r in held] == [f"record {i:03}" for i in range(100 - len(held), 100)]
    assert len(held) * 2000 <= ring.held_bytes <= 50_000
    assert ring.held_bytes + ring.held_bytes / len(held) > 50_000
    ring.resize(1000, 25_000)  # shrinking keeps the newest
    assert [r.message[:10] for r in ring.records()] == [r.message[:10] for r in held[-len(ring.records()):]]
    assert ring.held_bytes <= 25_000 and 0 < len(ring.records()) < len(held)


def test_the_memory_ring_counts_arguments_and_extra_fields_in_a_records_size():
    ring = MemoryRingHandler(capacity=10, max_bytes=10_000_000)
    emit(ring, BASE, "plain")
    plain = ring.held_bytes
    emit(ring, BASE, "keys", audit={"argument_keys": [f"{i:02}" + "k" * 62 for i in range(64)]}, _extras_final=True)
    with_keys = ring.held_bytes - plain
    record = logging.LogRecord("app", logging.INFO, __file__, 1, "value %s", ("v" * 10_000,), None)
    ring.handle(record)
    with_argument = ring.held_bytes - plain - with_keys
    assert with_keys >= 64 * 64 + plain and with_argument >= 10_000 + plain


def test_a_record_larger_than_the_byte_bound_leaves_a_notice_and_the_other_records_in_the_ring():
    # Kept, it would push every other record out and still break the bound.
    ring = MemoryRingHandler(capacity=100, max_bytes=20_000)
    for second in range(3):
        emit(ring, BASE + timedelta(seconds=second), f"small {second}")
    emit(ring, BASE + timedelta(seconds=3), "huge " + "y" * 50_000, logging.WARNING, name="app.huge")
    emit(ring, BASE + timedelta(seconds=4), "small 4")
    records = ring.records()
    assert [r.message for r in records[:3]] + [records[4].message] == ["small 0", "small 1", "small 2", "small 4"]
    notice = records[3]
    assert (notice.time, notice.level, notice.logger) == (BASE + timedelta(seconds=3), "WARNING", "app.huge")
    assert "larger than log_memory_bytes" in notice.message and "yyyy" not in notice.message
    assert notice.fields["dropped_record_bytes"] > 50_000
    assert ring.held_bytes <= 20_000


class Payload:
    """A caller's object, logged as an argument or held by a failing frame."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return f"payload {self.name}"


class Failure(ValueError):
    """An exception that can be referenced weakly (the built-in ones cannot)."""


def fail_holding_a_payload(held: list[weakref.ref[Payload]]) -> None:
    payload = Payload("of the failing frame")  # alive, once this returns, only through the traceback
    held.append(weakref.ref(payload))
    raise Failure("failed while holding a payload")


def test_the_memory_ring_keeps_no_exception_frame_or_argument_of_the_caller_alive() -> None:
    # The ring holds thousands of records: one kept as the stdlib record would keep its traceback's frames (every
    # local of the failing code) or the caller's argument objects alive until it turns over.
    ring = MemoryRingHandler(capacity=10)
    logger = logging.getLogger("test.logs.ring_references")
    logger.addHandler(ring)
    logger.propagate = False  # pytest's capture handlers on the root would hold the records too
    frame_locals: list[weakref.ref[Payload]] = []
    try:
        try:
            fail_holding_a_payload(frame_locals)
        except Failure as exc:
            exception = weakref.ref(exc)
            logger.exception("the call failed")
        argument = Payload("as an argument")
        logged_argument = weakref.ref(argument)
        logger.warning("handed %s", argument)
        del argument
    finally:
        logger.removeHandler(ring)
        logger.propagate = True
    gc.collect()
    assert exception() is None, "the ring keeps the exception alive"
    assert frame_locals[0]() is None, "the ring keeps the failing frame's locals alive"
    assert logged_argument() is None, "the ring keeps the logged argument alive"
    failed, handed = ring.records()
    assert failed.message == "the call failed"
    assert "Failure: failed while holding a payload" in failed.fields["exception"]
    assert "fail_holding_a_payload" in failed.fields["exception"]  # the traceback's text outlives its frames
    assert handed.message == "handed payload as an argument"


def test_the_memory_ring_shows_what_was_logged_not_what_the_callers_objects_became_since() -> None:
    # The ring may keep a record unconverted until it is read, but only one that holds nothing the caller can
    # still change: an extra dict filled in later, or an object logged as the message, would otherwise show a
    # secret the redaction never saw.
    ring = MemoryRingHandler(capacity=10)
    ring.addFilter(RedactingLogFilter(Redactor()))
    logger = logging.getLogger("test.logs.ring_changes")
    logger.addHandler(ring)
    logger.propagate = False
    state = {"user": "bob"}

    class Status:
        text = "all quiet"

        def __str__(self) -> str:
            return self.text

    status = Status()
    try:
        logger.warning("state", extra={"state": state})
        logger.warning(status)
    finally:
        logger.removeHandler(ring)
        logger.propagate = True
    state["password"] = "hunter2-secret"
    status.text = "password=hunter2-secret"
    with_state, with_status = ring.records()
    assert with_state.fields["state"] == {"user": "bob"}
    assert with_status.message == "all quiet"


# --- the file reader ----------------------------------------------------------------------------------------

TAIL_LINES = 20


def write_log(path: Path, filler_bytes: int) -> list[str]:
    """A log of about `filler_bytes` of old records (written a MiB at a time), then TAIL_LINES newer ones."""
    block_line = json_line(BASE, "filler " + "x" * 200)
    block = (block_line * (1024 * 1024 // len(block_line))).encode()
    with path.open("wb") as handle:
        for _ in range(filler_bytes // len(block)):
            handle.write(block)
        tail = [f"tail record {i}" for i in range(TAIL_LINES)]
        for index, message in enumerate(tail):
            handle.write(json_line(BASE + timedelta(minutes=1, seconds=index), message).encode())
    return tail


def test_the_last_lines_of_a_file_of_hundreds_of_megabytes_cost_what_they_cost_in_a_small_one(tmp_path):
    huge, small = tmp_path / "huge.log", tmp_path / "small.log"
    tail = write_log(huge, 300 * 1024 * 1024)
    write_log(small, 1024 * 1024)
    assert huge.stat().st_size > 300 * 1000 * 1000

    costs = {}
    for path in (huge, small):
        reader = FileLogReader([str(path)])
        try:
            result = reader.read(LogQuery(limit=10))
            costs[path.name] = reader.last_stats
        finally:
            reader.close()
        assert [r.message for r in result.records] == list(reversed(tail))[:10]
        assert all(r.fields["file"] == str(path) and r.source == "file" for r in result.records)
    assert costs["huge.log"] == costs["small.log"]
    assert costs["huge.log"].blocks == 1 and costs["huge.log"].bytes == BLOCK_SIZE

    # A time bound stops the backwards read as soon as records get older than it, matches or not.
    reader = FileLogReader([str(huge)])
    try:
        result = reader.read(LogQuery(LogFilter(since=BASE + timedelta(seconds=30), text="no such text")))
        assert result.records == [] and reader.last_stats.bytes <= 2 * BLOCK_SIZE
    finally:
        reader.close()


def test_a_search_without_a_time_bound_stops_at_the_scan_limit_and_says_so(tmp_path):
    path = tmp_path / "app.log"
    write_log(path, 4 * 1024 * 1024)
    reader = FileLogReader([str(path)], max_scan_bytes=1024 * 1024)
    try:
        result = reader.read(LogQuery(LogFilter(text="no such text")))
    finally:
        reader.close()
    assert result.records == []
    assert "stopped after reading 1 MiB" in result.notes[0]
    assert reader.last_stats.bytes <= 1024 * 1024 + 2 * BLOCK_SIZE


def test_text_lines_are_parsed_by_a_regex_with_named_groups_and_continuation_lines_join_their_record(tmp_path):
    path = tmp_path / "app.log"
    path.write_text(
        "[2024-05-01T12:00:00Z] warn checkout: slow response user=ada\n"
        "[2024-05-01T12:00:01Z] error checkout: payment failed\n"
        "Traceback (most recent call last):\n"
        "  File \"pay.py\", line 3\n"
        "RuntimeError: card declined\n"
        "[2024-05-01T12:00:02Z] fatal checkout: giving up\n"
        "[2024-05-01T12:00:03Z] info checkout: half a line being written")
    pattern = (r"^\[(?P<time>[^\]]+)\] (?P<level>\w+) (?P<logger>\w+): (?P<message>.*?)"
               r"(?: user=(?P<user>\S+))?$")
    reader = FileLogReader([str(tmp_path / "*.log")], pattern)
    try:
        records = reader.read(LogQuery()).records
    finally:
        reader.close()
    # The last line has no newline yet: it is being written, and is read once it is whole.
    assert [(r.level, r.message) for r in records] == [
        ("CRITICAL", "giving up"),
        ("ERROR", "payment failed\nTraceback (most recent call last):\n  File \"pay.py\", line 3\n"
                  "RuntimeError: card declined"),
        ("WARNING", "slow response"),
    ]
    assert records[2].fields["user"] == "ada" and records[2].logger == "checkout"
    assert records[0].time == datetime(2024, 5, 1, 12, 0, 2, tzinfo=UTC)


def test_a_line_longer_than_the_limit_is_cut_and_memory_stays_bounded(tmp_path):
    path = tmp_path / "app.log"
    path.write_text(f"2024-05-01 12:00:00,000 INFO app: {'y' * 500_000}\n2024-05-01 12:00:01,000 INFO app: after\n")
    reader = FileLogReader([str(path)], max_line_bytes=4096)
    try:
        records = reader.read(LogQuery()).records
    finally:
        reader.close()
    assert [r.message[:5] for r in records] == ["after", "yyyyy"]
    assert len(records[1].message) < 4096


async def collect(stream: AsyncIterator[LogRecord], count: int) -> list[LogRecord]:
    found: list[LogRecord] = []

    async def take() -> None:
        async for record in stream:
            found.append(record)
            if len(found) == count:
                return

    await within(take(), f"{count} more followed records (got {found})")
    return found


class CountingFileReader(FileLogReader):
    """A file reader that counts its reads, so that a test can wait for a follower's next polls."""

    def __init__(self, paths: list[str]) -> None:
        super().__init__(paths)
        self.reads = 0
        self._read = threading.Condition()

    def read(self, query: LogQuery) -> ReadResult:
        result = super().read(query)
        with self._read:
            self.reads += 1
            self._read.notify_all()
        return result

    async def wait_reads(self, count: int) -> None:
        """Until `count` more reads than now have ended."""
        with self._read:
            target = self.reads + count

        def wait() -> bool:
            with self._read:
                return self._read.wait_for(lambda: self.reads >= target, HANG_GUARD_SECONDS)

        assert await asyncio.to_thread(wait), f"the follower did not poll {count} more times"


async def test_following_a_file_goes_on_across_rotation_without_losing_or_repeating_lines(tmp_path):
    path = tmp_path / "app.log"
    writer = path.open("a")
    now = datetime.now(UTC)

    def write(message: str, offset: float) -> None:
        writer.write(json_line(now + timedelta(seconds=offset), message))
        writer.flush()

    write("before 1", -2)
    write("before 2", -1)
    # Only the path: the rotated file is then read through the handle kept open on it.
    reader = CountingFileReader([str(path)])
    # A glob that also matches the rotated file by its new name, and has read the file before it was rotated.
    both = FileLogReader([str(tmp_path / "app.log*")])
    assert len(both.read(LogQuery()).records) == 2
    inspector = LogInspector([reader], poll_seconds=0.05)
    follower = inspector.follow(LogFilter(), backlog=1)
    try:
        first = await collect(follower, 1)
        write("after 1", 0.1)
        second = await collect(follower, 1)
        # Rotation: the file is renamed, the writer finishes a line in it, then writes to a new file.
        path.rename(tmp_path / "app.log.1")
        write("late in the old file", 0.2)
        writer.close()
        writer = path.open("a")
        write("new file 1", 0.3)
        write("new file 2", 0.4)
        rest = await collect(follower, 3)
        # A few more polls while the follower is being read: anything they brought again would come next.
        pending = asyncio.ensure_future(collect(follower, 1))
        await reader.wait_reads(3)
        write("new file 3", 0.5)
        last = await pending
    finally:
        await follower.aclose()
        writer.close()
        inspector.close()
    messages = [r.message for r in first + second + rest + last]
    assert messages == ["before 2", "after 1", "late in the old file", "new file 1", "new file 2", "new file 3"]

    # It holds the old file open under its old name, and finds it under its new one: each record comes once.
    try:
        assert [r.message for r in both.read(LogQuery()).records] == list(reversed(["before 1", *messages]))
    finally:
        both.close()


# --- the database reader ----------------------------------------------------------------------------------


@pytest.fixture(params=DATABASES)
def log_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        store = Store(sqlite_file_url(tmp_path / "data" / "toolhost.db"))
    else:
        store = Store(request.getfixturevalue("postgres_url"))
    yield store
    store.close()


async def test_the_database_handler_writes_in_batches_and_the_reader_queries_with_filters(log_store):
    table = LogTable(log_store)
    handler = DatabaseLogHandler(table, Redactor(), batch_size=4, flush_seconds=0.05)
    handler.start()
    logger = logging.getLogger("test.logs.database")
    logger.setLevel(logging.DEBUG)
    try:
        for index in range(10):
            emit(handler, BASE + timedelta(seconds=index), f"row {index} password=hunter2-secret",
                 logging.ERROR if index % 3 == 0 else logging.INFO, name="test.logs.database",
                 trace_id="ab" * 16 if index == 4 else "", audit={"tool": "echo"})
        # The writer's own complaints are not written back to the database.
        emit(handler, BASE, "writing log records failed", logging.ERROR, name="toolhost.logs.database")
    finally:
        await handler.close_async()
    assert handler.writer.failed == 0 and handler.writer.dropped == 0

    reader = DatabaseLogReader(table)
    newest = (await asyncio.to_thread(reader.read, LogQuery(limit=3))).records
    assert [r.message.split(" password")[0] for r in newest] == ["row 9", "row 8", "row 7"]
    assert all("hunter2" not in r.message for r in newest)
    assert newest[0].source == "database" and newest[0].fields["instance"] == INSTANCE
    assert newest[0].fields["audit"] == {"tool": "echo"} and newest[0].time == BASE + timedelta(seconds=9)

    errors = (await asyncio.to_thread(reader.read, LogQuery(LogFilter(min_level="ERROR")))).records
    assert [r.message[:5] for r in errors] == ["row 9", "row 6", "row 3", "row 0"]
    traced = (await asyncio.to_thread(reader.read, LogQuery(LogFilter(trace_id="ab" * 16)))).records
    assert [r.message[:5] for r in traced] == ["row 4"]
    window = LogFilter(since=BASE + timedelta(seconds=2), until=BASE + timedelta(seconds=4), text="ROW")
    assert [r.message[:5] for r in (await asyncio.to_thread(reader.read, LogQuery(window))).records] == [
        "row 4", "row 3", "row 2"]

    # Pages through the inspector: keyset tokens over the table give every row once.
    inspector = LogInspector([reader])
    seen, token = [], ""
    while True:
        page = await inspector.query(LogFilter(), page_size=4, page_token=token)
        seen += [r.message[:5] for r in page.records]
        token = page.next_page_token
        if not token:
            break
    assert seen == [f"row {i}" for i in reversed(range(10))]

    # This process's rows from the time its memory ring starts are the ring's to show.
    own_from = DatabaseLogReader(table, lambda: BASE + timedelta(seconds=5))
    assert [r.message[:5] for r in (await asyncio.to_thread(own_from.read, LogQuery())).records] == [
        f"row {i}" for i in reversed(range(5))]


def test_an_unreachable_database_makes_the_reader_unavailable_with_the_reason(tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    reader = DatabaseLogReader(LogTable(Store(sqlite_file_url(blocker / "toolhost.db"))))
    page = asyncio.run(LogInspector([reader]).query(LogFilter()))
    assert page.records == [] and "cannot create the data directory" in page.summary.unavailable["database"]


# --- the inspector --------------------------------------------------------------------------------------------


@pytest.fixture
def two_sources(tmp_path: Path) -> LogInspector:
    """A memory ring and a log file whose records interleave in time, and a file reader whose files are gone."""
    ring = MemoryRingHandler(100)
    for second in range(0, 10, 2):  # memory: even seconds
        emit(ring, BASE + timedelta(seconds=second), f"memory {second}",
             logging.WARNING if second == 4 else logging.INFO)
    with (tmp_path / "app.log").open("w") as handle:  # file: odd seconds
        for second in range(1, 10, 2):
            handle.write(json_line(BASE + timedelta(seconds=second), f"file {second}",
                                   "ERROR" if second == 7 else "DEBUG",
                                   trace_id="cd" * 16 if second == 3 else ""))
    readers = [MemoryLogReader(ring), FileLogReader([str(tmp_path / "app.log")])]
    return LogInspector(readers)


async def test_the_inspector_merges_every_reader_newest_first(two_sources):
    page = await two_sources.query(LogFilter())
    assert [r.message for r in page.records] == [
        f"{'memory' if s % 2 == 0 else 'file'} {s}" for s in reversed(range(10))]
    assert page.next_page_token == ""
    assert page.summary.sources == ("memory", "file") and page.summary.unavailable == {}
    assert page.summary.level_counts == {"DEBUG": 4, "INFO": 4, "WARNING": 1, "ERROR": 1}
    assert page.summary.source_counts == {"file": 5, "memory": 5}


@pytest.mark.parametrize(("log_filter", "expected"), [
    (LogFilter(min_level="WARNING"), ["file 7", "memory 4"]),
    (LogFilter(text="MEMORY 8"), ["memory 8"]),
    (LogFilter(trace_id="cd" * 16), ["file 3"]),
    (LogFilter(source="file", since=BASE + timedelta(seconds=4)), ["file 9", "file 7", "file 5"]),
    (LogFilter(since=BASE + timedelta(seconds=2), until=BASE + timedelta(seconds=4)),
     ["memory 4", "file 3", "memory 2"]),
])
async def test_the_inspector_filters(two_sources, log_filter, expected):
    page = await two_sources.query(log_filter)
    assert [r.message for r in page.records] == expected


async def test_pages_continue_with_older_records_and_are_bound_to_their_filter(two_sources):
    first = await two_sources.query(LogFilter(min_level="DEBUG"), page_size=4)
    assert [r.message for r in first.records] == ["file 9", "memory 8", "file 7", "memory 6"]
    assert first.summary.level_counts == {"DEBUG": 1, "INFO": 2, "ERROR": 1}
    second = await two_sources.query(LogFilter(min_level="DEBUG"), page_size=4, page_token=first.next_page_token)
    third = await two_sources.query(LogFilter(min_level="DEBUG"), page_size=4, page_token=second.next_page_token)
    assert [r.message for r in second.records + third.records] == [
        "file 5", "memory 4", "file 3", "memory 2", "file 1", "memory 0"]
    assert third.next_page_token == ""
    with pytest.raises(InvalidPageTokenError, match="different filter"):
        await two_sources.query(LogFilter(min_level="INFO"), page_size=4, page_token=first.next_page_token)
    with pytest.raises(InvalidPageTokenError, match="not one this server issued"):
        await two_sources.query(LogFilter(), page_token="garbage")
    with pytest.raises(InvalidRequestError, match="page_size"):
        await two_sources.query(LogFilter(), page_size=-1)
    with pytest.raises(InvalidRequestError, match="since is after until"):
        await two_sources.query(LogFilter(since=BASE, until=BASE - timedelta(seconds=1)))


async def test_an_unavailable_reader_is_named_with_its_reason_and_the_others_still_answer(two_sources, tmp_path):
    inspector = LogInspector([*two_sources.readers, FileLogReader([str(tmp_path / "gone" / "*.log")])])
    page = await inspector.query(LogFilter(), page_size=3)
    assert [r.message for r in page.records] == ["file 9", "memory 8", "file 7"]
    [(source, reason)] = page.summary.unavailable.items()
    assert source == "file" and reason == f"no file matches {tmp_path / 'gone' / '*.log'}"
    # A directory where a file should be (chmod cannot make a file unreadable to root, so this stands in).
    (tmp_path / "logs.d").mkdir()
    inspector = LogInspector([*two_sources.readers, FileLogReader([str(tmp_path / "logs.d")])])
    page = await inspector.query(LogFilter(), page_size=3)
    assert page.summary.unavailable == {"file": f"{tmp_path / 'logs.d'} is a directory, not a log file (give a file "
                                                "or a glob such as dir/*.log)"}
    assert len(page.records) == 3

