"""The log inspector: asks every reader, merges their records newest first, pages, summarises, and follows.

Readers are asked at once, each in a worker thread; one that is unavailable or fails is reported in the
summary with its reason and the others still answer. Pages are AIP-158: `page_size` 0 means 100, at most
1000, and the opaque token continues just before the last record returned (see page_tokens).
"""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
import itertools
import logging
from collections import Counter, deque
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from ..errors import InvalidRequestError
from ..event_waits import wait_set
from ..sanitize import LearningRedactor, Redactor, current_redactor
from .page_tokens import decode_page_token, encode_page_token
from .query import LogFilter, LogQuery, ReadResult
from .reader import LogReader, LogReaderError
from .record import LEVELS, LogRecord, SortKey

logger = logging.getLogger("toolhost.logs")

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
# Following re-reads this far back on every poll: records reach some readers late (the database writer
# flushes once a second, a replica's clock runs behind), and would be skipped if the follower only looked
# past the newest record it sent.
LATE_ARRIVAL_WINDOW = timedelta(seconds=5)
# The most records one poll of a follower takes; a burst beyond that between two polls is thinned.
MAX_RECORDS_PER_POLL = 1000


@dataclass(frozen=True, slots=True)
class LogSummary:
    """About one page: its records counted per level and per source, the readers asked, the ones that could
    not answer (source -> why), and notes such as a reader that stopped before searching everything."""

    level_counts: dict[str, int] = field(default_factory=dict)
    source_counts: dict[str, int] = field(default_factory=dict)
    sources: tuple[str, ...] = ()
    unavailable: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LogPage:
    """Records newest first; `next_page_token` is empty on the last page."""

    records: Sequence[LogRecord]
    next_page_token: str
    summary: LogSummary


@dataclass(frozen=True, slots=True)
class _Answers:
    records: list[LogRecord]
    sources: tuple[str, ...]
    unavailable: dict[str, str]
    notes: tuple[str, ...]


class LogInspector:
    """Queries and follows the logs of every reader it is given::

        inspector = LogInspector([MemoryLogReader(ring), FileLogReader(["/var/log/app/*.log"])])
        page = await inspector.query(LogFilter(min_level="WARNING"), page_size=50)
        async for record in inspector.follow(LogFilter(text="timeout"), backlog=10): ...
    """

    def __init__(self, readers: Sequence[LogReader], *, poll_seconds: float = 0.5,
                 redactor: Redactor | LearningRedactor | None = None) -> None:
        self.readers = tuple(readers)
        self.poll_seconds = poll_seconds
        # Records read from files and the database were written by anything (another replica, an application
        # whose log_files are read): they pass the redactor as they are read, on every surface that shows them.
        # The memory ring's own records were redacted as they were logged.
        self._redactor = redactor
        self._stop_following = asyncio.Event()

    async def query(self, log_filter: LogFilter, page_size: int = 0, page_token: str = "") -> LogPage:
        """One page of the records that pass `log_filter`, newest first."""
        _check_filter(log_filter)
        if page_size < 0:
            raise InvalidRequestError(f"page_size must not be negative (got {page_size}); use 0 for the default "
                                      f"of {DEFAULT_PAGE_SIZE}")
        size = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        digest = log_filter.digest()
        before = decode_page_token(page_token, digest) if page_token else None
        # One more than a page: whether it comes back says whether there is a next page.
        answers = await self._ask(LogQuery(log_filter, size + 1, before=before))
        records = answers.records[:size]
        more = len(answers.records) > size
        return LogPage(
            records=records,
            next_page_token=encode_page_token(records[-1].sort_key(), digest) if more and records else "",
            summary=LogSummary(
                level_counts=_ordered_counts(Counter(r.level for r in records), LEVELS),
                source_counts=dict(sorted(Counter(r.source for r in records).items())),
                sources=answers.sources, unavailable=answers.unavailable, notes=answers.notes))

    async def follow(self, log_filter: LogFilter, backlog: int = 0) -> AsyncGenerator[LogRecord, None]:
        """The newest `backlog` matching records (at most 1000), then each new one as readers find it, oldest
        first; ends when stop_following() is called (the server shuts down), or by cancelling or closing it."""
        _check_filter(log_filter)
        if backlog < 0:
            raise InvalidRequestError(f"backlog must not be negative (got {backlog})")
        started = datetime.now(UTC)
        shown = (await self._ask(LogQuery(log_filter, min(backlog, MAX_PAGE_SIZE)))).records if backlog else []
        # Records of the last moments before following started, which later polls will read again: known.
        known = (await self._ask(LogQuery(log_filter, MAX_RECORDS_PER_POLL,
                                          after=(started - LATE_ARRIVAL_WINDOW, "", ())))).records
        sent: deque[SortKey] = deque()
        sent_keys: set[SortKey] = set()

        def remember(record: LogRecord) -> None:
            sent.append(record.sort_key())
            sent_keys.add(record.sort_key())

        for record in reversed(shown):
            remember(record)
            yield record
        shown_until = shown[0].sort_key() if shown else (started, "", ())
        newest = max(shown_until[0], started)
        for record in reversed(known):
            if record.sort_key() not in sent_keys:
                remember(record)
                if record.sort_key() > shown_until:  # arrived between the two questions
                    newest = max(newest, record.time)
                    yield record
        while not self._stop_following.is_set():
            if await wait_set(self._stop_following, self.poll_seconds):
                return
            floor = newest - LATE_ARRIVAL_WINDOW
            answers = await self._ask(LogQuery(log_filter, MAX_RECORDS_PER_POLL, after=(floor, "", ())))
            for record in reversed(answers.records):
                if record.sort_key() in sent_keys:
                    continue
                remember(record)
                newest = max(newest, record.time)
                yield record
            # Keys older than the window cannot come back: forget them, so memory stays bounded.
            while sent and sent[0][0] < newest - LATE_ARRIVAL_WINDOW:
                sent_keys.discard(sent.popleft())

    def stop_following(self) -> None:
        """End every follow() now and from now on: the server is shutting down."""
        self._stop_following.set()

    def close(self) -> None:
        for reader in self.readers:
            reader.close()

    async def _ask(self, query: LogQuery) -> _Answers:
        readers = [r for r in self.readers if query.filter.admits_source(r.source)]
        results = await asyncio.gather(*(asyncio.to_thread(_read, reader, query) for reader in readers))
        unavailable: dict[str, str] = {}
        found: list[ReadResult] = []
        for reader, result in zip(readers, results, strict=True):
            if isinstance(result, str):
                unavailable[reader.source] = result
            else:
                found.append(result)
        merged = heapq.merge(*(r.records for r in found), key=LogRecord.sort_key, reverse=True)
        records = list(itertools.islice(merged, query.limit))
        if self._redactor is not None:
            redactor = current_redactor(self._redactor)
            records = [record if record.source == "memory" else _redacted(record, redactor) for record in records]
        return _Answers(
            records=records,
            sources=tuple(r.source for r in readers), unavailable=unavailable,
            notes=tuple(note for r in found for note in r.notes))


def _redacted(record: LogRecord, redactor: Redactor) -> LogRecord:
    message = redactor.redact_text(record.message)
    logger_name = redactor.redact_text(record.logger)
    fields = redactor.redact_value(dict(record.fields))
    if not (message.redacted or logger_name.redacted or fields.redacted):
        return record
    return dataclasses.replace(record, message=message.value, logger=logger_name.value, fields=fields.value)


def _read(reader: LogReader, query: LogQuery) -> ReadResult | str:
    """The reader's answer, or why it has none."""
    reason = reader.unavailable_reason()
    if reason is not None:
        return reason
    try:
        return reader.read(query)
    except LogReaderError as exc:
        return str(exc)
    except Exception:
        logger.exception("the %s log reader failed", reader.source)
        return "the reader failed; the server log has the detail"


def _check_filter(log_filter: LogFilter) -> None:
    if log_filter.since and log_filter.until and log_filter.since > log_filter.until:
        raise InvalidRequestError("since is after until: no record can match; swap them")
    if log_filter.min_level and log_filter.min_level not in LEVELS:
        raise InvalidRequestError(f"min_level must be one of {', '.join(LEVELS)}, not {log_filter.min_level!r}")


def _ordered_counts(counts: Counter[str], order: Sequence[str]) -> dict[str, int]:
    return {name: counts[name] for name in order if counts[name]}
