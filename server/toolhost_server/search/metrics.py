"""The search index on /metrics: files per root and each root's state, read from the service at each scrape."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from .service import RootStatus

STATES = ("building", "ready", "degraded")


class SearchIndexCollector(Collector):
    """toolhost_search_index_files{root} and toolhost_search_index_state{root,state} (1 for the current state,
    0 for the others, so that a dashboard can plot each)."""

    def __init__(self, status: Callable[[], Sequence[RootStatus]]) -> None:
        self._status = status

    def collect(self) -> Iterator[Metric]:
        files = GaugeMetricFamily("toolhost_search_index_files", "Files in the search index, by search root",
                                  labels=["root"])
        state = GaugeMetricFamily(
            "toolhost_search_index_state", "Each search root's index state: building (first build running; "
            "searches walk the tree), ready, degraded (not watched for changes, e.g. inotify's watches ran out: "
            "changes show after the next rescan); 1 for the current one", labels=["root", "state"])
        for root in self._status():
            files.add_metric([root.path], root.files)
            for name in STATES:
                state.add_metric([root.path, name], 1 if root.state == name else 0)
        yield from (files, state)
