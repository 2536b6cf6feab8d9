"""The server's stderr log handler: formats each record at once, writes them in batches from a thread.

A write to stderr per record (one system call, and the stream's lock) cost as much as the rest of an audited
CallTool(echo). Here a record becomes its line in the emitting thread (where its span is current and before
anything can change it) and joins a list; a daemon thread writes the list every `flush_seconds`, and the
emitting thread itself when it holds `max_lines` (so a blocked stream holds up logging rather than memory). A
WARNING or worse is written before `emit` returns, with all that waited before it, so that the line explaining a
crash is out before the crash. `flush()` (called by logging.shutdown at exit, and on close) writes what is
waiting; a process killed with SIGKILL loses at most `flush_seconds` (or `max_lines`) of lines.

    handler = BufferedStreamHandler(sys.stderr)
    handler.setFormatter(JsonLogFormatter())
    logging.getLogger().addHandler(handler)
"""

from __future__ import annotations

import logging
import threading
from typing import TextIO


class BufferedStreamHandler(logging.Handler):
    def __init__(self, stream: TextIO, *, flush_seconds: float = 0.05, max_lines: int = 1000) -> None:
        super().__init__()
        self.stream = stream
        self._flush_seconds = flush_seconds
        self._max_lines = max_lines
        self._waiting: list[str] = []
        self._waiting_lock = threading.Lock()
        self._write_lock = threading.Lock()  # keeps the batches of the thread and of flush() in order
        self._wake = threading.Event()
        self._closed = False
        threading.Thread(target=self._write_periodically, name="log-writer", daemon=True).start()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        with self._waiting_lock:
            self._waiting.append(line)
            full = len(self._waiting) >= self._max_lines
        if record.levelno >= logging.WARNING or self._closed or full:
            # A full batch is written here too: while the stream blocks (a full pipe, a stalled collector) the
            # emitting threads wait, as with a plain StreamHandler, instead of piling up lines without bound.
            self.flush()

    def flush(self) -> None:
        with self._write_lock:
            with self._waiting_lock:
                lines, self._waiting = self._waiting, []
            if not lines:
                return
            try:
                self.stream.write("\n".join(lines) + "\n")
                self.stream.flush()
            except (OSError, ValueError):
                pass  # stderr is gone (closed pipe, closed stream): there is nowhere left to report it

    def close(self) -> None:
        self._closed = True
        self.flush()
        self._wake.set()
        super().close()

    def _write_periodically(self) -> None:
        while not self._closed:
            self._wake.wait(self._flush_seconds)
            self._wake.clear()
            self.flush()
