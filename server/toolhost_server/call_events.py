"""What a running call reports before its result: progress, and output chunks as a process writes them.

Runners report raw events to a `CallEvents` sink (bytes, unredacted); `RedactingEvents` decodes and redacts
them per stream and hands finished `Progress` and `OutputChunk` events to the streamed call's consumer.
A plain CallTool passes no sink, and runners then report nothing.
"""

from __future__ import annotations

import asyncio
import codecs
import threading
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Literal, Protocol

from .sanitize import Redactor, StreamRedactor

StreamName = Literal["stdout", "stderr"]


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a tool got, in its own unit; `total` when it knows it."""

    progress: float
    total: float | None = None
    message: str = ""


@dataclass(frozen=True, slots=True)
class OutputChunk:
    """Redacted text a process wrote to one of its streams."""

    stream: StreamName
    text: str


CallEvent = Progress | OutputChunk


class CallEvents(Protocol):
    """Where runners report a call's events. Both methods may be called from any thread."""

    def progress(self, progress: float, total: float | None = None, message: str = "") -> None:
        """The tool's own report of how far it got."""

    def output(self, stream: StreamName, data: bytes) -> None:
        """Bytes the process wrote, in order, at most the output limit per stream."""


class EventBuffer:
    """The events of a streamed call waiting for a slow reader, then its end (`close`).

    Output is bounded by the output limit; progress is not (a tool may report in a tight loop), so a progress
    report that is still waiting behind another one replaces it: the reader gets the latest.
    """

    def __init__(self) -> None:
        self._events: deque[CallEvent] = deque()
        self._closed = False
        self._changed = asyncio.Event()

    def put(self, event: CallEvent) -> None:
        if isinstance(event, Progress) and self._events and isinstance(self._events[-1], Progress):
            self._events[-1] = event
        else:
            self._events.append(event)
        self._changed.set()

    def close(self) -> None:
        self._closed = True
        self._changed.set()

    async def get(self) -> CallEvent | None:
        """The next event, or None once closed and drained."""
        while not self._events and not self._closed:
            self._changed.clear()
            await self._changed.wait()
        return self._events.popleft() if self._events else None


class _TextStream:
    """One output stream: bytes to UTF-8 text (a character split across chunks kept whole), then redacted."""

    def __init__(self, redactor: Redactor) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._redactor = StreamRedactor(redactor)

    def feed(self, data: bytes) -> str:
        # Flushed at once: a caller following a slow process sees each line as it is written.
        return self._redactor.feed(self._decoder.decode(data)) + self._redactor.flush()

    def finish(self, cut: bool) -> str:
        return self._redactor.finish(self._decoder.decode(b"", final=not cut), cut=cut)

    @property
    def redacted(self) -> bool:
        return self._redactor.redacted


class RedactingEvents:
    """A CallEvents sink that redacts with the call's redactor and passes events on to `deliver`.

    `deliver` runs on the event loop's thread whatever thread reported the event (sync Python tools run in
    worker threads). Call `finish` once the runner returned: it releases the text held back to catch secrets
    split across chunks, and cuts a stream that reached the output limit before a secret it may have cut in two.
    """

    def __init__(self, redactor: Redactor, deliver: Callable[[CallEvent], None]) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._redactor = redactor
        self._deliver = deliver
        self._streams: dict[StreamName, _TextStream] = {}
        self.redacted = False
        """Whether a progress message was redacted; streams report theirs through `finish`."""

    def progress(self, progress: float, total: float | None = None, message: str = "") -> None:
        result = self._redactor.redact_text(message)
        self.redacted = self.redacted or result.redacted
        self._on_loop(Progress(float(progress), None if total is None else float(total), result.value))

    def output(self, stream: StreamName, data: bytes) -> None:
        if threading.get_ident() != self._loop_thread:
            self._loop.call_soon_threadsafe(self.output, stream, data)
            return
        text_stream = self._streams.get(stream)
        if text_stream is None:
            text_stream = self._streams[stream] = _TextStream(self._redactor)
        text = text_stream.feed(data)
        if text:
            self._deliver(OutputChunk(stream, text))

    def finish(self, cut_streams: Collection[str]) -> bool:
        """Release what is held back; True when anything streamed was redacted."""
        redacted = self.redacted
        for name, text_stream in self._streams.items():
            text = text_stream.finish(name in cut_streams)
            if text:
                self._deliver(OutputChunk(name, text))
            redacted = redacted or text_stream.redacted
        return redacted

    def _on_loop(self, event: CallEvent) -> None:
        if threading.get_ident() == self._loop_thread:
            self._deliver(event)
        else:
            self._loop.call_soon_threadsafe(self._deliver, event)
