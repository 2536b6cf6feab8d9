"""What code in the server's process writes outside `logging`, brought into it, so it is redacted and formatted
like every other record: `warnings.warn`, exceptions that end a thread or cannot be raised (`__del__`, a
callback), and text written to `sys.stdout` and `sys.stderr` (a Python tool's `print`).

Without this a Python tool that prints a secret, or warns with one in the message, puts it on the server's
stdout or stderr as it is, past the redactor, and breaks the one-JSON-object-per-line log besides.

    capture = OutputCapture.install()    # after configure_logging: its handler keeps the real stderr
    ...
    capture.uninstall()
"""

from __future__ import annotations

import io
import logging
import sys
import threading
from types import TracebackType
from typing import Any, TextIO

logger = logging.getLogger("toolhost.output")

# A line longer than this is logged in parts, so that text without a newline cannot grow memory without bound.
MAX_LINE_CHARS = 64 * 1024


class LoggingStream(io.TextIOBase):
    """Stands in for sys.stdout or sys.stderr: each complete line written becomes one record of `log` at
    `level`. A partial line waits for its end, or for flush(), in a buffer of the writing thread's own (tools
    run in worker threads: `print` is two writes, and two tools printing at once must not mix their lines);
    a line longer than MAX_LINE_CHARS is logged in parts.

    A record written while this stream is already writing one in the same thread (a handler that fails and
    reports it on sys.stderr) goes to `fallback`, the real stream, instead of looping back into logging."""

    def __init__(self, log: logging.Logger, level: int, fallback: TextIO) -> None:
        super().__init__()
        self._log = log
        self._level = level
        self._fallback = fallback
        self._thread = threading.local()  # whether this thread is writing a record now
        # Each thread's partial line: its parts and their length. Keyed by thread, so that uninstalling can
        # flush every thread's; a thread only ever touches its own entry.
        self._pending: dict[int, tuple[list[str], list[int]]] = {}

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        state = self._thread
        if getattr(state, "writing", False):
            self._fallback.write(text)
            return len(text)
        parts, size = self._pending.setdefault(threading.get_ident(), ([], [0]))
        *complete, rest = text.split("\n")
        lines = []
        if complete:
            lines.append("".join((*parts, complete[0])))
            lines.extend(complete[1:])
            parts.clear()
            size[0] = 0
        if rest:
            parts.append(rest)
            size[0] += len(rest)
            if size[0] > MAX_LINE_CHARS:
                lines.append("".join(parts))
                parts.clear()
                size[0] = 0
        self._emit(lines)
        return len(text)

    def flush(self) -> None:
        """Log this thread's partial line."""
        self._flush(threading.get_ident())

    def flush_all(self) -> None:
        """Log every thread's partial line (the capture ends)."""
        for thread in list(self._pending):
            self._flush(thread)

    def _flush(self, thread: int) -> None:
        pending = self._pending.pop(thread, None)
        if pending is not None and pending[0]:
            self._emit(["".join(pending[0])])

    def _emit(self, lines: list[str]) -> None:
        self._thread.writing = True
        try:
            for line in lines:
                for start in range(0, len(line), MAX_LINE_CHARS):
                    part = line[start:start + MAX_LINE_CHARS]
                    if part.strip():
                        self._log.log(self._level, "%s", part)
        finally:
            self._thread.writing = False


class OutputCapture:
    """The process's hooks and streams while the capture is installed; `uninstall` puts the old ones back."""

    def __init__(self) -> None:
        self._saved: dict[str, Any] = {}

    @classmethod
    def install(cls) -> OutputCapture:
        capture = cls()
        capture._saved = {"stdout": sys.stdout, "stderr": sys.stderr, "excepthook": threading.excepthook,
                          "unraisablehook": sys.unraisablehook}
        logging.captureWarnings(True)  # warnings.warn -> the "py.warnings" logger
        threading.excepthook = _log_thread_exception
        sys.unraisablehook = _log_unraisable
        sys.stdout = LoggingStream(logging.getLogger("toolhost.stdout"), logging.INFO, capture._saved["stdout"])
        sys.stderr = LoggingStream(logging.getLogger("toolhost.stderr"), logging.WARNING, capture._saved["stderr"])
        return capture

    def uninstall(self) -> None:
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, LoggingStream):
                stream.flush_all()
        sys.stdout, sys.stderr = self._saved["stdout"], self._saved["stderr"]
        threading.excepthook = self._saved["excepthook"]
        sys.unraisablehook = self._saved["unraisablehook"]
        logging.captureWarnings(False)


def _log_thread_exception(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return  # what threading's own hook ignores too
    name = args.thread.name if args.thread is not None else "unknown"
    logger.error("uncaught exception in thread %s", name, exc_info=_exc_info(args.exc_type, args.exc_value,
                                                                            args.exc_traceback))


def _log_unraisable(unraisable: Any) -> None:
    # The object's repr could hold anything a tool made: its qualified name (a __del__ method, a callback) or
    # its type only, which code chose; the redactor sees the traceback anyway.
    where = unraisable.err_msg or "Exception ignored in"
    thing = unraisable.object
    logger.error("%s %s", where, getattr(thing, "__qualname__", type(thing).__name__), exc_info=_exc_info(
        unraisable.exc_type, unraisable.exc_value, unraisable.exc_traceback))


def _exc_info(kind: type[BaseException] | None, value: BaseException | None,
              traceback: TracebackType | None) -> tuple[Any, Any, Any] | bool:
    return (kind, value, traceback) if kind is not None else False


