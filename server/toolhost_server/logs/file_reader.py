"""Log files as a LogReader: paths or globs, read from their end backwards, followed across rotation.

Rotation is noticed by inode: when a path names another file than the one held open, the old file stays open
(and read) for a grace period, so the lines a writer added to it just before or after the rename are not
lost; a glob that matches the rotated file by its new name reads it once, not twice. A file truncated in
place (copytruncate) is simply shorter: reading always starts from its current end.
"""

from __future__ import annotations

import glob
import heapq
import os
import threading
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass

from .line_parser import DEFAULT_LINE_PATTERN, LineParser
from .query import LogQuery, ReadResult
from .reader import LogReader
from .record import LogRecord
from .reverse_lines import BLOCK_SIZE, MAX_LINE_BYTES, ReadStats, reverse_lines

FILE_SOURCE = "file"
# A rotated file stays open this long after its path moved on: a writer may still be finishing lines in it.
ROTATED_GRACE_SECONDS = 60.0
MAX_ROTATED_OPEN = 16
# A query whose filter matches nothing would read whole files; it stops here and says so in its notes.
DEFAULT_MAX_SCAN_BYTES = 256 * 1024 * 1024
# Lines that are no record of their own (a traceback) join the record before them, up to this many.
MAX_CONTINUATION_LINES = 200


@dataclass(slots=True)
class _OpenFile:
    path: str
    fd: int
    device: int
    inode: int
    retired_at: float = 0.0


class FileLogReader(LogReader):
    """Reads the files that `patterns` (paths or globs) name; each line is a JSON object or matches
    `line_pattern` (see line_parser). Records carry `fields["file"]` and sort by (time, inode, offset).

    `last_stats` holds what the last read cost (blocks and bytes), for operators and tests.
    """

    source = FILE_SOURCE

    def __init__(
        self,
        patterns: Sequence[str],
        line_pattern: str = DEFAULT_LINE_PATTERN,
        *,
        block_size: int = BLOCK_SIZE,
        max_line_bytes: int = MAX_LINE_BYTES,
        max_scan_bytes: int = DEFAULT_MAX_SCAN_BYTES,
    ) -> None:
        self.patterns = tuple(patterns)
        self._parser = LineParser(line_pattern)
        self._block_size = block_size
        self._max_line_bytes = max_line_bytes
        self._max_scan_bytes = max_scan_bytes
        self._open: dict[str, _OpenFile] = {}
        self._rotated: list[_OpenFile] = []
        # One read at a time: a read must not see the files it reads closed by another one's rotation check.
        self._lock = threading.Lock()
        self.last_stats = ReadStats()

    def unavailable_reason(self) -> str | None:
        if not self._matching_paths():
            directories = [p for p in self.patterns if not glob.has_magic(p) and os.path.isdir(p)]
            if directories:
                return (f"{', '.join(directories)} is a directory, not a log file (give a file or a glob such as "
                        "dir/*.log)")
            return f"no file matches {', '.join(self.patterns)}"
        return None

    def read(self, query: LogQuery) -> ReadResult:
        with self._lock:
            files = self._current_files()
            stats = ReadStats()
            try:
                records, notes = self._collect(files, query, stats)
            finally:
                self.last_stats = stats
            return ReadResult(records, notes)

    def close(self) -> None:
        with self._lock:
            for held in [*self._open.values(), *self._rotated]:
                os.close(held.fd)
            self._open.clear()
            self._rotated.clear()

    def _matching_paths(self) -> list[str]:
        paths: list[str] = []
        for pattern in self.patterns:
            found = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
            paths += [path for path in found if os.path.isfile(path) and path not in paths]
        return paths

    def _current_files(self) -> list[_OpenFile]:
        """The files to read now: what the patterns name (opened, or kept open) and the rotated ones still in
        their grace period, each inode once."""
        now = time.monotonic()
        seen: set[str] = set()
        for path in self._matching_paths():
            try:
                status = os.stat(path)
            except OSError:
                continue
            seen.add(path)
            held = self._open.get(path)
            if held is not None and (held.device, held.inode) == (status.st_dev, status.st_ino):
                continue
            if held is not None:
                self._retire(held, now)
            try:
                fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except OSError:
                self._open.pop(path, None)
                continue
            opened = os.fstat(fd)
            self._open[path] = _OpenFile(path, fd, opened.st_dev, opened.st_ino)
        for path in [p for p in self._open if p not in seen]:
            self._retire(self._open.pop(path), now)
        for old in [f for f in self._rotated if now - f.retired_at > ROTATED_GRACE_SECONDS]:
            self._rotated.remove(old)
            os.close(old.fd)
        unique: dict[tuple[int, int], _OpenFile] = {}
        for held in [*self._open.values(), *self._rotated]:
            unique.setdefault((held.device, held.inode), held)
        return list(unique.values())

    def _retire(self, held: _OpenFile, now: float) -> None:
        held.retired_at = now
        self._rotated.append(held)
        while len(self._rotated) > MAX_ROTATED_OPEN:
            os.close(self._rotated.pop(0).fd)

    def _collect(
        self, files: list[_OpenFile], query: LogQuery, stats: ReadStats
    ) -> tuple[list[LogRecord], tuple[str, ...]]:
        oldest = query.oldest_time()
        streams = [self._records(held, stats) for held in files]
        found: list[LogRecord] = []
        notes: tuple[str, ...] = ()
        # Each file is in time order, so the merge is too: the first record older than the query's lower bound
        # means every later one is older still.
        for record in heapq.merge(*streams, key=LogRecord.sort_key, reverse=True):
            if oldest is not None and record.time < oldest:
                break
            if query.admits(record):
                found.append(record)
                if len(found) >= query.limit:
                    break
            if stats.bytes > self._max_scan_bytes:
                notes = (f"the file reader stopped after reading {stats.bytes // (1024 * 1024)} MiB; narrow the "
                         "time range (since/until) to search further back",)
                break
        for stream in streams:
            stream.close()
        return found, notes

    def _records(self, held: _OpenFile, stats: ReadStats) -> Generator[LogRecord, None, None]:
        """The file's records, newest first; lines that are no record join the record before them."""
        try:
            end = os.fstat(held.fd).st_size
        except OSError:
            return
        continuation: list[str] = []
        for offset, raw in reverse_lines(held.fd, end, stats, block_size=self._block_size,
                                         max_line_bytes=self._max_line_bytes):
            line = raw.decode("utf-8", "replace").rstrip("\r")
            parsed = self._parser.parse(line)
            if parsed is None:
                if len(continuation) < MAX_CONTINUATION_LINES:
                    continuation.append(line)
                continue
            message = parsed.message
            if continuation:
                message = "\n".join([message, *reversed(continuation)])
                continuation = []
            yield LogRecord(
                time=parsed.time, level=parsed.level, logger=parsed.logger, message=message,
                trace_id=parsed.trace_id, span_id=parsed.span_id, source=FILE_SOURCE,
                fields={**parsed.fields, "file": held.path}, position=(held.inode, offset))
