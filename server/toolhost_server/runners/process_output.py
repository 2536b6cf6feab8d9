"""Capturing a child's stdout and stderr within a byte limit, without ever making the child wait on a pipe."""

from __future__ import annotations

import asyncio
import codecs
from typing import Final

from ..call_events import CallEvents

# Enough of stderr's end to quote its last line in a failure message, even when stderr itself was cut.
_TAIL_BYTES: Final = 1024


class CappedStream:
    """The first `limit` bytes of a stream, and how many bytes it carried in all.

    Bytes past the limit are counted and dropped, so memory stays at `limit` plus one read chunk whatever the
    child writes. The last few hundred bytes are also kept, to quote stderr's last line.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._kept = bytearray()
        self._tail = bytearray()
        self.size = 0

    def feed(self, data: bytes) -> bytes:
        """Count `data` in; returns the part of it that was kept (empty past the limit)."""
        self.size += len(data)
        room = self._limit - len(self._kept)
        kept = data[:room] if room > 0 else b""
        self._kept += kept
        self._tail += data[-_TAIL_BYTES:]
        del self._tail[:-_TAIL_BYTES]
        return kept

    @property
    def truncated(self) -> bool:
        return self.size > len(self._kept)

    def text(self) -> str:
        """The kept bytes as UTF-8, invalid sequences replaced; a character cut in two at the limit is dropped."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        return decoder.decode(bytes(self._kept), final=not self.truncated)

    def last_line(self) -> str:
        """The last non-blank line written (of the last 1 KiB at most); "" when there is none. Not shortened
        here: a line cut before redaction could keep most of a secret that redaction would no longer
        recognise; the pipeline shortens failure messages after redacting them."""
        text = bytes(self._tail).decode("utf-8", errors="replace")
        if self.size > len(self._tail) and "\n" not in text.rstrip():
            # The line began before the kept tail: its first word may be the second half of a secret, which
            # nothing could recognise any more. Drop it.
            text = text.lstrip().partition(" ")[2]
        lines = text.strip().splitlines()
        return lines[-1].strip() if lines else ""


class CaptureProtocol(asyncio.SubprocessProtocol):
    """Collects a child's two output streams as asyncio delivers them, and reports when it is done.

    asyncio reads the pipes as fast as data comes (this protocol never pauses them), so a child that writes
    more than the limit runs on unhindered. `exited` resolves when the child has exited (and asyncio reaped it);
    `finished` when, in addition, both pipes have closed, that is when nothing holds them open any more.
    What is kept is also passed to `events` as it arrives, for a streamed call.
    """

    def __init__(self, limit: int, events: CallEvents | None = None) -> None:
        loop = asyncio.get_running_loop()
        self.stdout = CappedStream(limit)
        self.stderr = CappedStream(limit)
        self.exited: asyncio.Future[None] = loop.create_future()
        self.finished: asyncio.Future[None] = loop.create_future()
        self._events = events

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        assert isinstance(data, bytes)  # the transport is never in text mode
        kept = (self.stdout if fd == 1 else self.stderr).feed(data)
        if kept and self._events is not None:
            self._events.output("stdout" if fd == 1 else "stderr", kept)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.finished.done():
            self.finished.set_result(None)
