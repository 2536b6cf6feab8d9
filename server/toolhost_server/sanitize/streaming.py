"""Redaction of text that arrives in chunks, so that a secret split across two chunks is still caught.

The end of what has arrived is held back until the next chunk (or `finish`) shows how it continues:

  - the last `hold` characters (4096, or the longest known-value form if longer), so a secret of up to
    that length which starts in the released part also ends in what has arrived, and is matched whole;
  - more when the cut would fall inside a run of non-blank characters: tokens, JWTs, URLs and
    `name=value` pairs are such runs, and a partial one may not be recognisable yet;
  - more when a secret found straddles the cut (a PEM block whose END line has not come yet).

The last CONTEXT characters already released are searched again with what follows (never sent
again): the "Bearer " or "password = " that makes the next token a secret may have gone out already.

Limits: a blank-free run longer than MAX_RUN (a minified JSON document) may be cut anywhere. Held text
is bounded by `max_pending`: past it the oldest part is released, redacted as far as what has arrived
allows, rather than letting memory grow without limit.
"""

from __future__ import annotations

from .base import Span, clipped
from .redactor import Redactor, replace_spans

MIN_HOLD = 4096
MAX_RUN = 16 * 1024
CONTEXT = 256
MAX_PENDING = 1024 * 1024

_BLANKS = " \t\r\n\f\v"


class StreamRedactor:
    """Redacts a stream of text chunks. One per stream; not thread-safe.

        stream = StreamRedactor(call_redactor)
        for chunk in chunks:
            send(stream.feed(chunk))   # may be "" while the end is held back
        send(stream.finish())
        response.redacted = stream.redacted
    """

    def __init__(self, redactor: Redactor, hold: int | None = None, max_pending: int = MAX_PENDING) -> None:
        self._redactor = redactor
        self._hold = max(MIN_HOLD, redactor.longest_trigger) if hold is None else max(hold, 1)
        self._max_pending = max(max_pending, 2 * self._hold)
        self._pending = ""  # arrived, not released
        self._context = ""  # the end of what was released: look-behind for what is pending
        self.redacted = False
        """Whether anything was replaced so far."""

    def feed(self, chunk: str) -> str:
        """The redacted text that can be released now that `chunk` has arrived (possibly empty)."""
        pending = self._pending + chunk
        if len(pending) <= self._hold:
            self._pending = pending
            return ""
        buffer = self._context + pending
        released = len(self._context)
        spans = self._redactor.find_spans(buffer)
        cut = max(_safe_cut(buffer, len(buffer) - self._hold, spans), released)
        if len(buffer) - cut > self._max_pending:
            cut = len(buffer) - self._hold
        self._context = buffer[max(0, cut - CONTEXT):cut]
        self._pending = buffer[cut:]
        return self._replace(buffer[released:cut], _clip(spans, released, cut))

    def flush(self) -> str:
        """Release what has arrived, but for what may still turn out to be part of a secret, for live output.

        Held back: the trailing run of token characters and an ending that begins a known value (see
        Redactor.safe_end), and any secret found that reaches the end or the cut (a PEM block whose END line
        has not come, a `password=` value that may go on). A secret recognised by what precedes it ("Bearer ",
        "password = ") is still caught: the released context is searched again with what follows.
        """
        if not self._pending:
            return ""
        buffer = self._context + self._pending
        released = len(self._context)
        spans = self._redactor.find_spans(buffer)
        cut = self._redactor.safe_end(buffer)
        while True:
            open_spans = [start for start, end in spans if start < cut and (cut < end or end >= len(buffer))]
            if not open_spans:
                break
            cut = min(open_spans)
        if cut <= released:
            return ""
        self._context = buffer[max(0, cut - CONTEXT):cut]
        self._pending = buffer[cut:]
        return self._replace(buffer[released:cut], _clip(spans, released, cut))

    def finish(self, chunk: str = "", cut: bool = False) -> str:
        """The rest of the stream (ending with `chunk`), redacted. The StreamRedactor is empty afterwards.

        `cut` says the stream did not end but was cut off at a size limit: what may be the first part of a
        secret is then dropped from its end (see Redactor.safe_end).
        """
        buffer = self._context + self._pending + chunk
        released = len(self._context)
        self._context = self._pending = ""
        if cut:
            end = max(self._redactor.safe_end(buffer), released)
            buffer = buffer[:end]
        return self._replace(buffer[released:], _clip(self._redactor.find_spans(buffer), released, len(buffer)))

    def _replace(self, text: str, spans: list[Span]) -> str:
        if not spans:
            return text
        self.redacted = True
        return replace_spans(text, spans)


def _clip(spans: list[Span], start: int, end: int) -> list[Span]:
    """The parts of `spans` inside [start, end), relative to `start`."""
    return [clipped(span, start, end) for span in spans if span[0] < end and span[1] > start]


def _safe_cut(buffer: str, cut: int, spans: list[Span]) -> int:
    """The largest position up to `cut` before which nothing can still become (part of) a secret."""
    cut = _run_start(buffer, cut)
    while cut > 0:
        straddling = [start for start, end in spans if start < cut < end]
        if not straddling:
            break
        cut = _run_start(buffer, min(straddling))
    return max(cut, 0)


def _run_start(text: str, position: int) -> int:
    """The start of the run of non-blank characters that `position` falls in (itself at a blank)."""
    if position <= 0 or position >= len(text) or text[position - 1] in _BLANKS or text[position] in _BLANKS:
        return position
    low = max(0, position - MAX_RUN)
    start = max(text.rfind(blank, low, position) for blank in _BLANKS) + 1
    # A run longer than MAX_RUN is no token: cut it where asked.
    return position if start == 0 and low > 0 else max(start, low)
