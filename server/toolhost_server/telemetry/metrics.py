"""Prometheus metrics: the registry's (seed 004's names), each tool's calls, and each RPC.

Every Toolhost has its own CollectorRegistry rather than prometheus_client's global one, so that several
servers in one process (the tests) count separately, and `/metrics` shows exactly this server.

    metrics = ToolhostMetrics()
    metrics.observe_reload(report)                         # after each reload
    metrics.call_started(tool) / metrics.call_released(tool)   # as calls are admitted and released
    metrics.call_finished(tool, outcome, seconds, truncated, redacted)
    metrics.observe_rpc(method, code, seconds)             # from the gRPC layer
    metrics.observe_store_writer("audit_records", writer.stats)   # read at each scrape
    metrics.observe_export_queue(tracing.export_queue.stats)     # read at each scrape
    metrics.observe_log_ring(lambda: ring.held_bytes)            # read at each scrape
    metrics.render()                                       # the text exposition format, for /metrics
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..reloading import ReloadReport

if TYPE_CHECKING:
    from ..batching import BatchWriterStats
    from .tracing import ExportQueueStats

CONTENT_TYPE = CONTENT_TYPE_LATEST
# Tool calls range from a millisecond (echo) to minutes (a traceroute that times out).
_CALL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_RPC_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class ToolhostMetrics:
    """The metrics of one server. Thread-safe (prometheus_client's metrics are)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        # Seed 004's registry metrics; prometheus_client adds the `_total` suffix of counters.
        self.tools_loaded = Counter("ai_tools_loaded", "Total number of tools loaded into the registry",
                                    registry=registry)
        self.reloads = Counter("ai_tools_reload", "Total number of registry reload operations", registry=registry)
        self.reload_errors = Counter("ai_tools_reload_errors", "Total number of registry reload errors",
                                     registry=registry)
        self.tools_count = Gauge("ai_tools_count", "Current number of tools in the registry", registry=registry)
        self.calls = Counter("toolhost_tool_calls", "Tool calls, by tool and outcome (OK or the error code)",
                             ["tool", "outcome"], registry=registry)
        self.call_seconds = Histogram("toolhost_tool_call_duration_seconds", "How long tool calls took",
                                      ["tool"], buckets=_CALL_BUCKETS, registry=registry)
        self.in_flight = Gauge("toolhost_tool_calls_in_flight", "Tool calls running now", ["tool"],
                               registry=registry)
        self.truncations = Counter("toolhost_tool_output_truncations",
                                   "Calls whose output was cut at the output limit", ["tool"], registry=registry)
        self.redactions = Counter("toolhost_tool_output_redactions",
                                  "Calls whose result had secrets replaced", ["tool"], registry=registry)
        self.rpcs = Counter("toolhost_rpc_requests", "gRPC requests, by method and status code",
                            ["method", "code"], registry=registry)
        self.rpc_seconds = Histogram("toolhost_rpc_duration_seconds",
                                     "How long gRPC requests took, by method and status code", ["method", "code"],
                                     buckets=_RPC_BUCKETS, registry=registry)
        # Read from their owners at each scrape: the counts live where the records and spans wait.
        self._buffers = _BufferCollector()
        registry.register(self._buffers)
        # Labelled children by label values: prometheus_client's labels() validates and locks on every lookup,
        # which cost more than the rest of a call's metrics. Tools and RPC codes are few; the maps stay small.
        self._children: dict[tuple[Any, ...], Any] = {}

    def _child(self, metric: Any, *values: str) -> Any:
        key = (id(metric), *values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def call_started(self, tool: str) -> None:
        self._child(self.in_flight, tool).inc()

    def call_released(self, tool: str) -> None:
        self._child(self.in_flight, tool).dec()

    def observe_reload(self, report: ReloadReport) -> None:
        self.reloads.inc()
        if not report.success or report.problems:
            self.reload_errors.inc()
        if report.success:
            self.tools_loaded.inc(len(report.added) + len(report.changed))
            self.tools_count.set(len(report.tools))

    def call_finished(self, tool: str, outcome: str, seconds: float, truncated: bool, redacted: bool) -> None:
        """One call of a served tool ended: `outcome` is OK, the tool's error code or the refusal's reason."""
        self._child(self.calls, tool, outcome).inc()
        self._child(self.call_seconds, tool).observe(seconds)
        if truncated:
            self._child(self.truncations, tool).inc()
        if redacted:
            self._child(self.redactions, tool).inc()

    def observe_rpc(self, method: str, code: str, seconds: float) -> None:
        self._child(self.rpcs, method, code).inc()
        self._child(self.rpc_seconds, method, code).observe(seconds)

    def observe_store_writer(self, table: str, stats: Callable[[], BatchWriterStats]) -> None:
        """Report what waits for the store's `table` and what was lost, as `stats()` tells at each scrape."""
        self._buffers.store_writers[table] = stats

    def observe_export_queue(self, stats: Callable[[], ExportQueueStats]) -> None:
        """Report the spans waiting for the OTLP exporter and those dropped, as `stats()` tells at each scrape."""
        self._buffers.export_queue = stats

    def observe_log_ring(self, held_bytes: Callable[[], int]) -> None:
        """Report the estimated bytes of the log records the memory ring holds, as `held_bytes()` tells at each
        scrape: a long-running server's check that the ring stays within log_memory_bytes."""
        self._buffers.log_ring_bytes = held_bytes

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _BufferCollector(Collector):
    """The store's write buffers, the span export queue and the log ring, read from their owners when scraped."""

    def __init__(self) -> None:
        self.store_writers: dict[str, Callable[[], BatchWriterStats]] = {}
        self.export_queue: Callable[[], ExportQueueStats] | None = None
        self.log_ring_bytes: Callable[[], int] | None = None

    def collect(self) -> Iterator[Metric]:
        dropped = CounterMetricFamily(
            "toolhost_store_records_dropped", "Audit and log records never written to the store, by table and "
            "reason: buffer_full (beyond store_buffer_bytes while the database was down or slow), rejected (the "
            "database refused the row), shutdown (the database was still unavailable when the server stopped)",
            labels=["table", "reason"])
        errors = CounterMetricFamily(
            "toolhost_store_write_errors", "Batch writes to the store that failed and were kept for a retry",
            labels=["table"])
        duplicates = CounterMetricFamily(
            "toolhost_store_records_possibly_duplicated", "Records written again after the connection broke during "
            "their commit: each may be stored twice", labels=["table"])
        buffered = GaugeMetricFamily(
            "toolhost_store_buffered_bytes", "Estimated bytes of records waiting to be written to the store",
            labels=["table"])
        for table, stats_of in sorted(self.store_writers.items()):
            stats = stats_of()
            for reason, count in (("buffer_full", stats.dropped), ("rejected", stats.rejected),
                                  ("shutdown", stats.abandoned)):
                dropped.add_metric([table, reason], count)
            errors.add_metric([table], stats.write_errors)
            duplicates.add_metric([table], stats.uncertain)
            buffered.add_metric([table], stats.waiting_bytes)
        spans_dropped = CounterMetricFamily(
            "toolhost_spans_dropped", "Spans dropped because OTEL_BSP_MAX_QUEUE_SIZE spans already waited for export "
            "(the OTLP collector slow, down or not answering)")
        spans_queued = GaugeMetricFamily("toolhost_span_export_queue_spans", "Spans waiting for export")
        if self.export_queue is not None:
            queue = self.export_queue()
            spans_dropped.add_metric([], queue.dropped)
            spans_queued.add_metric([], queue.queued)
        ring_bytes = GaugeMetricFamily(
            "toolhost_log_ring_bytes", "Estimated bytes of the server's recent log records held in memory for the "
            "log inspector (at most log_memory_bytes)")
        if self.log_ring_bytes is not None:
            ring_bytes.add_metric([], self.log_ring_bytes())
        yield from (dropped, errors, duplicates, buffered, spans_dropped, spans_queued, ring_bytes)
