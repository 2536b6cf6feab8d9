"""The file search service: the index of the search roots, kept current, and the three questions the file search
tools ask of it (files by words, by kind, by modification time).

Started with the server, it answers at once: the index is built in a background thread (progress in the log
and on /metrics), then kept current by a file watcher per root and a full rescan every search_rescan_seconds.
Until a root's first build has finished, a question about it walks the scope instead, within a time budget,
and says `partial` when the budget ran out first. Every answer leaves out files deleted since they were
indexed, and files search_exclude names.

Tests and tools wait for the index's own events: `generation` grows after each change applied (a build, a
rescan, a burst of watched changes, a watcher ready or failed), and `changed(after)` waits for it to grow.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..daemon_threads import run_in_daemon_thread
from ..sanitize import Redactor, current_redactor
from ..workspaces.paths import FileStateError, PathSanitizer
from .exclusion import Exclusions
from .extraction import FileRecord, extract, signature_of
from .index_store import FILE_NAME, IndexStore, StoredFile
from .kinds import OTHER
from .tree import Located, WalkCounts, locate, walk_files
from .watching import RootWatcher
from .words import WordMatcher, query_tokens

if TYPE_CHECKING:
    from ..config import Config
    from ..sanitize import LearningRedactor

logger = logging.getLogger("toolhost.search")

BATCH_FILES = 500  # files written per transaction while building
PROGRESS_FILES = 10_000  # a progress line in the log every so many files...
PROGRESS_SECONDS = 10.0  # ...or so many seconds, whichever comes first
FALLBACK_BUDGET_SECONDS = 1.0  # how long a question walks a root not yet indexed


@dataclass(frozen=True, slots=True)
class SearchRoot:
    """A configured search root: its path as configured (absolute), and the sanitizer confined to it."""

    path: str
    paths: PathSanitizer


@dataclass(frozen=True, slots=True)
class IndexedFile:
    path: str  # absolute path as under the configured root (never resolved outside it)
    name: str
    size: int
    modified: float  # epoch seconds
    kind: str
    mime: str


@dataclass(frozen=True, slots=True)
class SearchAnswer:
    results: list[IndexedFile]  # ranked (search) or newest first (recent) or by path (by_kind)
    partial: bool  # the first build is not done and the walk ran out of its time budget
    indexed_at: datetime | None  # when the index last finished a full build or rescan (UTC), None before


@dataclass(frozen=True, slots=True)
class RootStatus:
    """A root's index, as the component inspector and /metrics show it. `state`: building (no full build yet:
    questions walk the tree), ready, or degraded (built, but not watched: changes show at the next rescan)."""

    path: str
    state: str
    files: int
    indexed_at: datetime | None
    watching: bool
    degraded_reason: str


@dataclass(slots=True)
class _RootState:
    root: SearchRoot
    built: bool = False  # a full build finished in this run: the index answers every question
    metadata_built: bool = False  # a full build finished once (perhaps in an earlier run): kinds and times
    files: int = 0
    indexed_at: datetime | None = None
    watching: bool = False
    degraded_reason: str = ""
    watcher: RootWatcher | None = None

    def status(self) -> RootStatus:
        state = "building" if not self.built else "degraded" if self.degraded_reason else "ready"
        return RootStatus(self.root.path, state, self.files, self.indexed_at, self.watching, self.degraded_reason)


class SearchService:
    """The index of `roots` in `data_dir`, and the questions asked of it::

        service = SearchService.from_config(config, toolhost.redactor)
        await service.start()
        answer = await service.search(["quarterly", "rep"], "/srv/docs", limit=100)
        await service.close()
    """

    def __init__(self, roots: Sequence[str], *, data_dir: Path, exclude: Sequence[str], max_text_bytes: int,
                 rescan_seconds: float, redactor: Redactor | LearningRedactor, debounce_ms: int = 300,
                 watch: bool = True) -> None:
        self.roots = tuple(SearchRoot(os.path.normpath(path), PathSanitizer(path)) for path in roots)
        self.data_dir = data_dir
        self.exclusions = Exclusions(exclude)
        self.max_text_bytes = max_text_bytes
        self.rescan_seconds = rescan_seconds
        self.debounce_ms = debounce_ms
        self.watch = watch
        self.fallback_budget_seconds = FALLBACK_BUDGET_SECONDS
        self.generation = 0
        self._redactor = redactor
        self._indexed_with: Redactor | None = None  # the redactor the text in the index went through
        self._states = {root.path: _RootState(root) for root in self.roots}
        self._store: IndexStore | None = None
        self._stopping = threading.Event()
        self._scan_thread = threading.Lock()  # held by the thread that scans
        self._scan_lock = asyncio.Lock()
        self._rescan_now = asyncio.Event()
        self._advanced = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._degraded_logged: set[str] = set()

    @classmethod
    def from_config(cls, config: Config, redactor: Redactor | LearningRedactor) -> SearchService | None:
        """The service of config.search_roots, or None when there are none (the search tools are then not
        served)."""
        if not config.search_roots:
            return None
        return cls(config.search_roots, data_dir=config.effective_data_dir(), exclude=config.search_exclude,
                   max_text_bytes=config.search_index_max_text_bytes, rescan_seconds=config.search_rescan_seconds,
                   redactor=redactor, debounce_ms=config.watch_debounce_ms)

    # Life.

    async def start(self, *, maintain: bool = True) -> None:
        """Open the index and start building it in the background; returns at once. Without `maintain`, the
        index is opened as an earlier run left it, and neither built nor watched."""
        self._loop = asyncio.get_running_loop()
        self._store = await asyncio.to_thread(self._open_store)
        for state in self._states.values():
            state.indexed_at = await asyncio.to_thread(self._store.indexed_at, state.root.path)
            state.metadata_built = state.indexed_at is not None
            state.files = await asyncio.to_thread(self._store.count, state.root.path)
        if maintain:
            self._task = asyncio.create_task(self._maintain(), name="search-index")

    def _open_store(self) -> IndexStore:
        path = self.data_dir / FILE_NAME
        try:
            store = IndexStore(path)
        except Exception as exc:  # sqlite3.DatabaseError and kin: the index is a cache, built again
            logger.warning("search index %s cannot be used (%s); building it again from scratch", path, exc)
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{path}{suffix}")
            store = IndexStore(path)
        store.keep_only_roots([root.path for root in self.roots])
        return store

    async def close(self) -> None:
        self._stopping.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for state in self._states.values():
            if state.watcher is not None:
                await asyncio.to_thread(state.watcher.stop)
        # A scan thread still running notices _stopping at its next file; the store stays open until it has.
        if await asyncio.to_thread(self._scan_thread.acquire, True, 30.0):
            self._scan_thread.release()
        if self._store is not None:
            self._store.close()

    # State and events.

    def status(self) -> tuple[RootStatus, ...]:
        """Each root's state (for the component inspector and /metrics)."""
        return tuple(state.status() for state in self._states.values())

    async def changed(self, after: int) -> int:
        """Wait until `generation` is greater than `after`; the new generation."""
        while self.generation <= after:
            await self._advanced.wait()
        return self.generation

    def _advance(self) -> None:
        """Another change applied: wake whoever waits (called on the event loop)."""
        self.generation += 1
        self._advanced.set()
        self._advanced = asyncio.Event()

    def _advance_from_thread(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self._loop.call_soon_threadsafe(self._advance)

    def mark_degraded(self, root: str, reason: str) -> None:
        """The root is no longer watched (inotify's watches ran out, or the watcher failed): said in the log once
        per root, shown by status(), and the rescan keeps the index current meanwhile. Thread-safe."""
        state = self._states[root]
        state.watching = False
        state.degraded_reason = reason
        if root not in self._degraded_logged:
            self._degraded_logged.add(root)
            logger.warning("search index: %s is no longer watched for changes (%s); changes there show in "
                           "searches after the next rescan (every %g s). If inotify's watches ran out, raise "
                           "fs.inotify.max_user_watches", root, reason, self.rescan_seconds)
        self._advance_from_thread()

    # Building and keeping current.

    async def _maintain(self) -> None:
        try:
            # Watching first: what changes while the build walks is applied too, not left for the rescan.
            if self.watch:
                for state in self._states.values():
                    self._start_watching(state)
            for state in self._states.values():
                async with self._scan_lock:
                    await self._scan(state, "build")
            while not self._stopping.is_set():
                await self._wait_for_rescan()
                for state in self._states.values():
                    async with self._scan_lock:
                        await self._scan(state, "rescan")
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("search index: the builder stopped; searches walk the tree from now on")

    async def _wait_for_rescan(self) -> None:
        try:
            async with asyncio.timeout(self.rescan_seconds):
                await self._rescan_now.wait()
        except TimeoutError:
            pass
        self._rescan_now.clear()

    async def rescan(self) -> None:
        """Rescan every root now (as the periodic rescan does), and return once done."""
        for state in self._states.values():
            async with self._scan_lock:
                await self._scan(state, "rescan")

    async def _scan(self, state: _RootState, what: str) -> None:
        redactor = current_redactor(self._redactor)
        # Text indexed with fewer secrets known than now is read again: a value learned since must not stay
        # findable. The first build of each run reads every text for the same reason.
        force_text = redactor is not self._indexed_with or not state.built
        done = await run_in_daemon_thread(self._scan_blocking, state, what, redactor, force_text,
                                          name=f"search-index {what}")
        if done:
            state.built = state.metadata_built = True
            if all(s.built for s in self._states.values()):
                self._indexed_with = redactor
        self._advance()

    def _scan_blocking(self, state: _RootState, what: str, redactor: Redactor, force_text: bool) -> bool:
        """Walk the root, index what changed, forget what is gone; whether the walk finished."""
        with self._scan_thread:
            return self._scan_holding_lock(state, what, redactor, force_text)

    def _scan_holding_lock(self, state: _RootState, what: str, redactor: Redactor, force_text: bool) -> bool:
        if self._stopping.is_set():
            return False
        store = self._require_store()
        root = state.root
        started = time.monotonic()
        try:
            opened = root.paths.open(".", kind="directory")
        except (FileStateError, OSError) as exc:
            logger.warning("search index: cannot open the root %s (%s); trying again at the next rescan",
                           root.path, getattr(exc, "message", exc))
            return False
        known = store.signatures(root.path)
        seen: set[str] = set()
        batch: list[FileRecord] = []
        counts = WalkCounts()
        indexed = 0
        last_report = started
        with opened:
            for found in walk_files(opened.fd, self.exclusions, counts=counts, should_stop=self._stopping.is_set):
                path = _join(root.path, found.relative)
                seen.add(path)
                if not force_text and known.get(path) == signature_of(found.stat):
                    continue
                record = extract(found.directory_fd, found.name, found.stat, root=root.path, path=path,
                                 max_text_bytes=self.max_text_bytes, redactor=redactor)
                if record is not None:
                    batch.append(record)
                if len(batch) >= BATCH_FILES:
                    store.put(batch)
                    indexed += len(batch)
                    batch.clear()
                    if what == "build":
                        state.files = max(state.files, len(seen))
                now = time.monotonic()
                if len(seen) % PROGRESS_FILES == 0 or now - last_report >= PROGRESS_SECONDS:
                    last_report = now
                    logger.info("search index: %s of %s: %d files walked, %d indexed so far (%.0f s)", what,
                                root.path, len(seen), indexed + len(batch), now - started)
            store.put(batch)
            indexed += len(batch)
            if self._stopping.is_set():
                return False
            removed = store.remove(self._gone(opened.fd, root.path, set(known) - seen))
        state.files = store.count(root.path)
        now_utc = datetime.now(UTC)
        store.mark_indexed(root.path, now_utc)
        state.indexed_at = now_utc
        skipped = (f"; {counts.unreadable_directories} unreadable directories" if counts.unreadable_directories
                   else "") + (f"; {counts.undecodable_names} names not UTF-8 skipped" if counts.undecodable_names
                               else "") + (f"; {counts.too_deep} directories too deep" if counts.too_deep else "")
        logger.info("search index: %s of %s done in %.1f s: %d files, %d (re)indexed, %d removed, index %.1f MB%s",
                    what, root.path, time.monotonic() - started, state.files, indexed, removed,
                    store.size_bytes() / 1e6, skipped)
        return True

    def _gone(self, root_fd: int, root_path: str, unseen: set[str]) -> list[str]:
        """Of the indexed paths the walk did not see, those really gone (or now excluded): one the walk missed
        because it appeared after the walk passed is kept."""
        gone = []
        for path in unseen:
            relative = path[len(root_path.rstrip("/")) + 1:]
            located = locate(root_fd, relative)
            if located is None:
                gone.append(path)
                continue
            with located:
                if (not stat.S_ISREG(located.stat.st_mode)
                        or self.exclusions.path(relative, is_directory=False)):
                    gone.append(path)
        return gone

    def _start_watching(self, state: _RootState) -> None:
        root = state.root.path

        def ready() -> None:
            state.watching = True
            self._advance_from_thread()

        state.watcher = RootWatcher(root, self.debounce_ms, on_ready=ready,
                                    on_changes=lambda paths: self._apply_changes(state, paths),
                                    on_failure=lambda reason: self.mark_degraded(root, reason))
        state.watcher.start()

    def _apply_changes(self, state: _RootState, paths: set[str]) -> None:
        """Index again each changed path (a file, or a directory's whole subtree) and forget the gone ones, as
        the tree is now. Runs in the root's watcher thread."""
        store = self._require_store()
        root = state.root
        redactor = current_redactor(self._redactor)
        prefix = root.path.rstrip("/") + "/"
        try:
            opened = root.paths.open(".", kind="directory")
        except (FileStateError, OSError):
            return  # the root itself is gone: the rescan says so
        records: list[FileRecord] = []
        gone: list[str] = []
        with opened:
            for path in sorted(paths):
                if not path.startswith(prefix):
                    continue
                relative = path[len(prefix):]
                located = locate(opened.fd, relative)
                if located is None:
                    gone.append(path)
                    continue
                with located:
                    self._reindex(located, relative, path, root.path, redactor, records, gone)
                if len(records) >= BATCH_FILES:
                    store.put(records)
                    records.clear()
        store.put(records)
        store.remove(gone)
        state.files = store.count(root.path)
        self._advance_from_thread()

    def _reindex(self, located: Located, relative: str, path: str, root: str, redactor: Redactor,
                 records: list[FileRecord], gone: list[str]) -> None:
        store = self._require_store()
        mode = located.stat.st_mode
        if stat.S_ISREG(mode) and not self.exclusions.path(relative, is_directory=False):
            if store.signature(path) != signature_of(located.stat) or redactor is not self._indexed_with:
                record = extract(located.directory_fd, located.name, located.stat, root=root, path=path,
                                 max_text_bytes=self.max_text_bytes, redactor=redactor)
                if record is not None:
                    records.append(record)
            return
        if not stat.S_ISDIR(mode) or self.exclusions.path(relative, is_directory=True):
            gone.append(path)  # now a symlink, a special file, or excluded: nothing of it stays
            return
        try:  # a directory created or moved in: its files, those made before the watch on it included
            fd = os.open(located.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                         dir_fd=located.directory_fd)
        except OSError:
            return
        try:
            for found in walk_files(fd, self.exclusions, prefix=f"{relative}/", should_stop=self._stopping.is_set):
                found_path = _join(root, found.relative)
                if store.signature(found_path) == signature_of(found.stat) and redactor is self._indexed_with:
                    continue
                record = extract(found.directory_fd, found.name, found.stat, root=root, path=found_path,
                                 max_text_bytes=self.max_text_bytes, redactor=redactor)
                if record is not None:
                    records.append(record)
        finally:
            os.close(fd)

    def _require_store(self) -> IndexStore:
        if self._store is None:
            raise RuntimeError("the search service is not started")
        return self._store

    # Questions.

    def root_of(self, path: str) -> SearchRoot | None:
        """The root an absolute path lies under, by components (the deepest, should roots nest)."""
        parts = [part for part in path.split("/") if part not in ("", ".")]
        best: SearchRoot | None = None
        for root in self.roots:
            root_parts = [part for part in root.path.split("/") if part]
            if parts[:len(root_parts)] == root_parts and (best is None or len(root.path) > len(best.path)):
                best = root
        return best

    async def search(self, words: Sequence[str], scope: str, limit: int) -> SearchAnswer:
        """Files under `scope` whose name or text holds every word as a word prefix, best first. Words
        without a letter or digit are ignored; none left: no results."""
        tokens = query_tokens(words)
        if not tokens:
            return SearchAnswer([], False, None)
        return await asyncio.to_thread(self._answer, scope, limit, "text", tokens)

    async def by_kind(self, kind: str, scope: str, limit: int) -> SearchAnswer:
        """Files under `scope` of `kind` (one of kinds.KINDS), by path."""
        return await asyncio.to_thread(self._answer, scope, limit, "metadata", kind)

    async def recent(self, scope: str, since: datetime, limit: int) -> SearchAnswer:
        """Files under `scope` modified at or after `since`, newest first."""
        return await asyncio.to_thread(self._answer, scope, limit, "metadata", since.timestamp())

    def _answer(self, scope: str, limit: int, needs: str, question: object) -> SearchAnswer:
        root = self.root_of(scope)
        if root is None:
            return SearchAnswer([], False, None)
        state = self._states[root.path]
        limit = max(1, limit)
        with root.paths.open(scope, argument="scope", kind="directory") as opened:
            # The scope as it lies under the root, through any symlink inside: the paths the index holds.
            scope_path = root.path if opened.relative == "." else _join(root.path, opened.relative)
            scope_relative = "" if opened.relative == "." else opened.relative + "/"
            if scope_relative and self.exclusions.path(scope_relative, is_directory=True):
                return SearchAnswer([], False, state.indexed_at)  # inside an excluded directory: never indexed
            indexed = state.built if needs == "text" else state.metadata_built
            if indexed and self._store is not None:
                with root.paths.open(".", kind="directory") as root_fd:
                    results = self._from_index(root_fd.fd, root.path, scope_path, limit, question)
                return SearchAnswer(results, False, state.indexed_at)
            results, partial = self._walk(opened.fd, scope_path, scope_relative, limit, question)
            return SearchAnswer(results, partial, state.indexed_at)

    def _from_index(self, root_fd: int, root: str, scope: str, limit: int, question: object) -> list[IndexedFile]:
        """Pages of the index's answer, each file checked to be there still, until `limit` are found."""
        store = self._require_store()
        results: list[IndexedFile] = []
        offset = 0
        page = limit + 16
        prefix = root.rstrip("/") + "/"
        while len(results) < limit:
            if isinstance(question, list):
                rows = store.search(question, scope, limit=page, offset=offset)
            elif isinstance(question, str):
                rows = store.by_kind(question, scope, limit=page, offset=offset)
            else:
                assert isinstance(question, float)
                rows = store.recent(scope, question, limit=page, offset=offset)
            for row in rows:
                current = self._still_there(root_fd, row, row.path[len(prefix):])
                if current is not None:
                    results.append(current)
                    if len(results) == limit:
                        break
            if len(rows) < page:
                break
            offset += page
            page *= 2
        return results

    def _still_there(self, root_fd: int, row: StoredFile, relative: str) -> IndexedFile | None:
        """The file of `row` as it is now, or None when it is gone, no longer a file, or excluded since."""
        if self.exclusions.path(relative, is_directory=False):
            return None
        located = locate(root_fd, relative)
        if located is None:
            return None
        with located:
            st = located.stat
        if not stat.S_ISREG(st.st_mode):
            return None
        return IndexedFile(row.path, row.name, st.st_size, st.st_mtime, row.kind, row.mime)

    def _walk(self, scope_fd: int, scope_path: str, scope_relative: str, limit: int,
              question: object) -> tuple[list[IndexedFile], bool]:
        """The answer without the index: the scope walked until the time budget runs out (then partial)."""
        deadline = time.monotonic() + self.fallback_budget_seconds
        stopped = False

        def out_of_time() -> bool:
            nonlocal stopped
            stopped = stopped or time.monotonic() >= deadline or self._stopping.is_set()
            return stopped

        redactor = current_redactor(self._redactor)
        matcher = WordMatcher(question) if isinstance(question, list) else None
        found: list[tuple[tuple[object, ...], IndexedFile]] = []
        for walked in walk_files(scope_fd, self.exclusions, prefix=scope_relative, should_stop=out_of_time):
            path = _join(scope_path, walked.relative[len(scope_relative):])
            st = walked.stat
            if isinstance(question, float):
                if st.st_mtime >= question:
                    kind, mime = OTHER, ""
                    record = extract(walked.directory_fd, walked.name, st, root="", path=path,
                                     max_text_bytes=0, redactor=redactor, with_text=False)
                    if record is not None:
                        kind, mime = record.kind, record.mime
                    found.append(((-st.st_mtime, path), IndexedFile(path, walked.name, st.st_size, st.st_mtime,
                                                                   kind, mime)))
                continue
            record = extract(walked.directory_fd, walked.name, st, root="", path=path,
                             max_text_bytes=self.max_text_bytes, redactor=redactor, with_text=matcher is not None)
            if record is None:
                continue
            file = IndexedFile(path, walked.name, st.st_size, st.st_mtime, record.kind, record.mime)
            if matcher is not None:
                if matcher.matches(walked.name, record.text or ""):
                    found.append(((-matcher.count_in(walked.name), path), file))
            elif record.kind == question:
                found.append(((path,), file))
        found.sort(key=lambda item: item[0])
        return [file for _, file in found[:limit]], stopped


def _join(root: str, relative: str) -> str:
    return f"{root.rstrip('/')}/{relative}" if relative else root
