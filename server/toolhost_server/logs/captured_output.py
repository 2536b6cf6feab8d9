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
import warnings
from types import TracebackType
from typing import Any, TextIO

logger = logging.getLogger("toolhost.output")

# A line longer than this is logged in parts, so that text without a newline cannot grow memory without bound.
MAX_LINE_CHARS = 64 * 1024


class LoggingStream(io.TextIOBase):
    """Stands in for sys.stdout or sys.stderr: each complete line written becomes one record of `log` at
    `level`; a partial line waits for its end, or for flush(). Thread-safe.

    A record written while this stream is already writing one in the same thread (a handler that fails and
    reports it on sys.stderr) goes to `fallback`, the real stream, instead of looping back into logging."""

    def __init__(self, log: logging.Logger, level: int, fallback: TextIO) -> None:
        super().__init__()
        self._log = log
        self._level = level
        self._fallback = fallback
        self._pending = ""
        self._lock = threading.Lock()
        self._writing = threading.local()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        if getattr(self._writing, "active", False):
            self._fallback.write(text)
            return len(text)
        with self._lock:
            lines = (self._pending + text).split("\n")
            self._pending = lines.pop()
            if len(self._pending) > MAX_LINE_CHARS:
                lines.append(self._pending)
                self._pending = ""
        self._emit(lines)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, ""
        self._emit([pending])

    def _emit(self, lines: list[str]) -> None:
        self._writing.active = True
        try:
            for line in lines:
                if line.strip():
                    self._log.log(self._level, "%s", line)
        finally:
            self._writing.active = False


class OutputCapture:
    """The process's hooks and streams while the capture is installed; `uninstall` puts the old ones back."""

    def __init__(self) -> None:
        self._saved: dict[str, Any] = {}

    @classmethod
    def install(cls) -> OutputCapture:
        capture = cls()
        capture._saved = {"stdout": sys.stdout, "stderr": sys.stderr, "excepthook": threading.excepthook,
                          "unraisablehook": sys.unraisablehook, "showwarning": warnings.showwarning}
        logging.captureWarnings(True)  # warnings.warn -> the "py.warnings" logger
        threading.excepthook = _log_thread_exception
        sys.unraisablehook = _log_unraisable
        sys.stdout = LoggingStream(logging.getLogger("toolhost.stdout"), logging.INFO, capture._saved["stdout"])
        sys.stderr = LoggingStream(logging.getLogger("toolhost.stderr"), logging.WARNING, capture._saved["stderr"])
        return capture

    def uninstall(self) -> None:
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, LoggingStream):
                stream.flush()
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


