"""A SpanExporter that hides secrets in every span before the exporter it wraps sees it.

Ended spans are read-only, so redaction happens here, in the export path: a span with a secret in its name,
attributes, events, links or status description is replaced by a redacted copy; the others pass as they are.
The redactor is the server's LearningRedactor, read per batch: it knows every credential value resolved so
far, including those of the calls the spans describe (they were learned before the spans ended).

    provider.add_span_processor(BatchSpanProcessor(RedactingSpanExporter(OTLPSpanExporter(), learning)))
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import Link, Status
from opentelemetry.util.types import Attributes

from ..sanitize import LearningRedactor, Redactor, current_redactor


class RedactingSpanExporter(SpanExporter):
    """Redacts spans with `redactor`, then hands them to `exporter`; shutdown and flush pass through."""

    def __init__(self, exporter: SpanExporter, redactor: LearningRedactor | Redactor) -> None:
        self._exporter = exporter
        self._redactor = redactor

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        source = self._redactor
        redactor = current_redactor(source)
        return self._exporter.export([redact_span(span, redactor) for span in spans])

    def shutdown(self) -> None:
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._exporter.force_flush(timeout_millis)


def redact_span(span: ReadableSpan, redactor: Redactor) -> ReadableSpan:
    """`span` itself when it holds no secret, else a copy with every secret replaced by [REDACTED]."""
    if not _may_hold_secret(span, redactor):
        return span
    name = redactor.redact_text(span.name)
    attributes, attributes_redacted = _redact_attributes(span.attributes, redactor)
    events, events_redacted = _redact_events(span.events, redactor)
    links, links_redacted = _redact_links(span.links, redactor)
    status = span.status
    description = redactor.redact_text(status.description or "")
    if description.redacted:
        status = Status(status.status_code, description.value)
    if not (name.redacted or attributes_redacted or events_redacted or links_redacted or description.redacted):
        return span
    return ReadableSpan(
        name=name.value, context=span.context, parent=span.parent, resource=span.resource, attributes=attributes,
        events=events, links=links, kind=span.kind, status=status, start_time=span.start_time,
        end_time=span.end_time, instrumentation_scope=span.instrumentation_scope)


def _may_hold_secret(span: ReadableSpan, redactor: Redactor) -> bool:
    """One scan of all of the span's text at once: most spans hold no secret, and a redactor call per short
    string costs more than the scan. A secret found here is then replaced field by field."""
    texts = [span.name, span.status.description or ""]
    keys: list[str] = []
    every_attributes = (span.attributes, *(event.attributes for event in span.events),
                        *(link.attributes for link in span.links))
    for attributes in every_attributes:
        for key, value in (attributes or {}).items():
            keys.append(key)
            if isinstance(value, str):
                texts.append(value)
            elif isinstance(value, Sequence):
                texts.extend(item for item in value if isinstance(item, str))
    texts.extend(event.name for event in span.events)
    return any(map(redactor.is_secret_key, keys)) or bool(redactor.find_spans("\n".join(texts)))


def _redact_attributes(attributes: Attributes, redactor: Redactor) -> tuple[Attributes, bool]:
    """Values of secret-named keys whole, and every secret inside string values (also in lists of strings)."""
    if not attributes:
        return attributes, False
    result = redactor.redact_value(dict(attributes))
    return (result.value, True) if result.redacted else (attributes, False)


def _redact_events(events: Sequence[Event], redactor: Redactor) -> tuple[Sequence[Event], bool]:
    redacted_events: list[Event] = []
    any_redacted = False
    for event in events:
        name = redactor.redact_text(event.name)
        attributes, attributes_redacted = _redact_attributes(event.attributes, redactor)
        if name.redacted or attributes_redacted:
            any_redacted = True
            event = Event(name.value, attributes, event.timestamp)
        redacted_events.append(event)
    return (redacted_events, True) if any_redacted else (events, False)


def _redact_links(links: Sequence[Link], redactor: Redactor) -> tuple[Sequence[Link], bool]:
    redacted_links: list[Link] = []
    any_redacted = False
    for link in links:
        attributes, attributes_redacted = _redact_attributes(link.attributes, redactor)
        if attributes_redacted:
            any_redacted = True
            link = Link(link.context, attributes)
        redacted_links.append(link)
    return (redacted_links, True) if any_redacted else (links, False)
