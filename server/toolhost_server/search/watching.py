"""Follows one search root's changes with inotify (watchfiles' notifier), in a thread of its own.

watchfiles' RustNotify is used directly rather than through `awatch`: its constructor returns once the watches
are in place, so the service knows from when on a change is seen (and tests can wait for that instead of
guessing), and a failure to set them up (inotify's watch limit reached) is told right there. Changes come
debounced, as a set of paths; what they mean is decided by looking at the tree again, never by the event.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from watchfiles._rust_notify import RustNotify

logger = logging.getLogger("toolhost.search")

_STEP_MS = 50
_TIMEOUT_MS = 5000  # wake up now and then even without changes, to notice a stop request
_POLL_DELAY_MS = 300  # unused: polling is never forced


class RootWatcher:
    """Calls `on_ready()` once the root is watched, then `on_changes(paths)` per debounced burst, from its own
    daemon thread; `on_failure(reason)` when watching cannot start or stops working (then nothing more)."""

    def __init__(self, path: str, debounce_ms: int, *, on_ready: Callable[[], None],
                 on_changes: Callable[[set[str]], None], on_failure: Callable[[str], None]) -> None:
        self.path = path
        self._debounce_ms = debounce_ms
        self._on_ready = on_ready
        self._on_changes = on_changes
        self._on_failure = on_failure
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"search-watch {path}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, wait_seconds: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(wait_seconds)

    def _run(self) -> None:
        try:
            notify = _notifier(self.path)
        except (OSError, RuntimeError) as exc:
            self._on_failure(str(exc))
            return
        with notify:
            self._on_ready()
            while not self._stop.is_set():
                try:
                    changes = notify.watch(self._debounce_ms, _STEP_MS, _TIMEOUT_MS, self._stop)
                except (OSError, RuntimeError) as exc:
                    self._on_failure(str(exc))
                    return
                if changes == "timeout":
                    continue
                if isinstance(changes, str):  # "stop" (or "signal", which only the main thread sees)
                    return
                try:
                    self._on_changes({path for _, path in changes})
                except Exception:  # the watcher must outlive one failed update; the rescan repairs it
                    logger.exception("search index: updating after changes under %s failed", self.path)


def _notifier(path: str) -> RustNotify:
    """A recursive notifier of `path`. Asked first to report every failure to set a watch, since with
    ignore_permission_denied watchfiles also hides the watch limit being reached; a directory the server may
    not read is then tolerated by asking again (nothing below it is indexed anyway)."""
    try:
        return RustNotify([path], False, False, _POLL_DELAY_MS, True, False)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) or "limit" in str(exc):  # watchfiles: "OS file watch limit reached"
            raise
        return RustNotify([path], False, False, _POLL_DELAY_MS, True, True)
