"""Fault injection: the OTLP collector down (nothing listens on its port) or black-holing (it accepts the
connection and never answers).

Proves that calls complete with OK while the exporter cannot deliver a span, and that the exporter's memory stays
bounded: at most OTEL_BSP_MAX_QUEUE_SIZE spans wait for export, the spans beyond are dropped and counted
(toolhost_spans_dropped_total in /metrics), and the spans still alive in the process number no more than that
queue and one export batch. As a control, an exporter that keeps up gets every span and none is counted dropped;
and a queue bound the server cannot keep stops its start with an error naming the variable.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import re
import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from toolhost_server.sanitize import LearningRedactor, Redactor
from toolhost_server.telemetry.tracing import ExportQueue, ExportQueueStats, Tracing, TracingConfigError

from helpers.calls import call

pytestmark = pytest.mark.slow

MAX_QUEUE_SIZE = 32
MAX_EXPORT_BATCH_SIZE = 8
CALLS = 200  # two spans each (the server span and execute_tool): far more than the queue holds


@pytest.fixture
def unreachable_port() -> Iterator[int]:
    """A port bound but not listening: connections to it are refused, as to a collector that is down."""
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        yield bound.getsockname()[1]


class _Swallow(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while self.request.recv(65536):
            pass  # takes what it is sent, never answers


@pytest.fixture
def black_hole_port() -> Iterator[int]:
    """A collector that accepts connections, reads what it is sent, and never answers."""
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Swallow) as server:
        server.daemon_threads = True
        serving = threading.Thread(target=server.serve_forever, name="black-hole", daemon=True)
        serving.start()
        yield server.server_address[1]
        server.shutdown()


@pytest.fixture(params=["down", "black hole"])
def collector_port(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    port: int = request.getfixturevalue("unreachable_port" if request.param == "down" else "black_hole_port")
    for variable in ("OTEL_TRACES_EXPORTER", "OTEL_TRACES_SAMPLER", "OTEL_EXPORTER_OTLP_PROTOCOL",
                     "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", str(MAX_QUEUE_SIZE))
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", str(MAX_EXPORT_BATCH_SIZE))
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
    # Each export gives up after a second: the server's close at the end of the test then waits little for a
    # collector that never answers.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    return port


def live_spans(trace_ids: set[str]) -> int:
    """How many spans of these traces the process still holds, apart from those only a cancelled timer of the
    event loop keeps: asyncio leaves a cancelled timer (a call's deadline) in its heap, with the context it was
    made in, until its time comes or cancelled timers are most of the heap, whichever is first; a periodic timer
    at the heap's head (a store poll) is enough to keep a few there. That is bounded by asyncio, not the export
    queue's concern."""
    gc.collect()
    loop = asyncio.get_running_loop()
    parked = {id(value) for handle in getattr(loop, "_scheduled", ()) if handle.cancelled()
              for value in _context_values(getattr(handle, "_context", None))}
    return sum(1 for obj in gc.get_objects()
               if isinstance(obj, ReadableSpan) and obj.context is not None
               and format(obj.context.trace_id, "032x") in trace_ids and id(obj) not in parked)


def _context_values(context: contextvars.Context | None) -> list[object]:
    """The values a contextvars.Context holds, and the values of the mappings among them (OpenTelemetry keeps
    the current span inside a Context mapping)."""
    if context is None:
        return []
    values: list[object] = []
    for value in context.values():
        values.append(value)
        if isinstance(value, dict):
            values.extend(value.values())
    return values


async def test_calls_complete_and_the_exporter_holds_a_bounded_queue_when_the_collector_cannot_take_spans(
        start_server, collector_port):
    server = await start_server()
    export_queue = server.toolhost.tracing.export_queue
    assert export_queue is not None, "tracing is on, over OTLP"
    responses = []
    for batch in range(CALLS // 20):
        responses += await asyncio.gather(*(call(server, "echo", text="x", call_id=f"c-{batch}-{index}")
                                            for index in range(20)))
    assert all(response.success and response.output == "x" for response in responses)
    trace_ids = {response.trace_id for response in responses}
    assert len(trace_ids) == CALLS  # each call was traced

    stats = export_queue.stats()
    assert stats.capacity == MAX_QUEUE_SIZE
    assert stats.queued <= MAX_QUEUE_SIZE
    assert stats.dropped > 0
    assert live_spans(trace_ids) <= MAX_QUEUE_SIZE + MAX_EXPORT_BATCH_SIZE
    scraped = {sample.name: sample.value
               for family in text_string_to_metric_families(server.toolhost.metrics.render().decode())
               for sample in family.samples}
    assert scraped["toolhost_spans_dropped_total"] >= stats.dropped  # read later: more may have been dropped
    assert scraped["toolhost_span_export_queue_spans"] <= MAX_QUEUE_SIZE


def test_an_exporter_that_keeps_up_gets_every_span_and_none_is_counted_dropped(monkeypatch):
    """The control: the queue's count of waiting spans goes back to zero as spans are exported, so a collector
    that answers never sees its spans dropped, however many pass through the queue over time."""
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", str(MAX_EXPORT_BATCH_SIZE))
    exporter = InMemorySpanExporter()
    export_queue = ExportQueue(exporter, max_queue_size=MAX_QUEUE_SIZE)
    provider = TracerProvider()
    provider.add_span_processor(export_queue)
    tracer = provider.get_tracer("test")
    try:
        for round_number in range(20):
            for index in range(MAX_QUEUE_SIZE):
                tracer.start_span(f"span-{round_number}-{index}").end()
            assert provider.force_flush()
    finally:
        provider.shutdown()
    assert len(exporter.get_finished_spans()) == 20 * MAX_QUEUE_SIZE
    assert export_queue.stats() == ExportQueueStats(queued=0, capacity=MAX_QUEUE_SIZE, dropped=0)


@pytest.mark.parametrize(("queue_size", "message"), [
    ("many", "OTEL_BSP_MAX_QUEUE_SIZE='many': give the number of spans"),
    ("0", "OTEL_BSP_MAX_QUEUE_SIZE='0'"),
    ("64", "set OTEL_BSP_MAX_EXPORT_BATCH_SIZE (default 512) no larger than OTEL_BSP_MAX_QUEUE_SIZE"),
])
def test_a_span_queue_bound_the_server_cannot_keep_is_refused_naming_the_variable(monkeypatch, queue_size, message):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
    monkeypatch.delenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", raising=False)
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", queue_size)
    with pytest.raises(TracingConfigError, match=re.escape(message)):
        Tracing.from_environment(LearningRedactor(Redactor()))
