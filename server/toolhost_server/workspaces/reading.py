"""Reads a range of a text file's lines from one open fd, in blocks, whatever the file's size: the lines from a
line number on, or from the N-th line before the end (found by reading backwards), cut to what an answer can hold.

A line is what ends in "\\n", and what follows the last "\\n" when that is not empty: "a\\nb" and "a\\nb\\n" both
have two lines. The CR of a CR LF ending is not part of the line (`LinesRead.crlf` says one was seen).

A file of at most `whole_file_bytes` is read whole first: its sha256, its number of lines and that all of it is
UTF-8, so that a range read from it is numbered from its start and comes with the hash a write compares. A larger
file is read only where the range is (and its first 8 KiB, to tell binary files): no sha256, and a range counted
from its end is numbered from its end (-1 is the last line), since counting its lines would read all of it.
"""

from __future__ import annotations

import codecs
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from .paths import FileStateError, quoted

MAX_LINE_CHARS = 2000
BINARY_PROBE_BYTES = 8192  # as git and grep decide a file is binary: a NUL in its start
BLOCK_BYTES = 64 * 1024  # backwards, two blocks hold the last 100 lines of most files
SURVEY_BLOCK_BYTES = 1024 * 1024
# Bytes of a line kept while it is read: enough for MAX_LINE_CHARS characters of up to 4 bytes, and the 4 more
# that make sure a line longer than that is seen to be (an incomplete character at the end is dropped).
_KEPT_LINE_BYTES = MAX_LINE_CHARS * 4 + 4


@dataclass(frozen=True, slots=True)
class Line:
    """One line as shown: its number, its text (at most MAX_LINE_CHARS characters) and, when that was cut, the
    line's whole length in bytes."""

    number: int
    text: str
    cut_from_bytes: int | None = None


@dataclass(slots=True)
class LinesRead:
    """The outcome of a read.

    `next_offset` is the line number to read on from (None: the lines reach the file's end); it counts from the
    end when the lines do (`from_end`). `total_lines` is the file's number of lines when the lines reach its end
    and that number is known. `stopped_for_bytes`: the lines stop early because more would not fit the answer.
    `past_end`: the offset lies beyond the last line (no lines, total_lines known).
    """

    size_bytes: int
    sha256: str | None
    lines: list[Line] = field(default_factory=list)
    next_offset: int | None = None
    total_lines: int | None = None
    from_end: bool = False
    stopped_for_bytes: bool = False
    past_end: bool = False
    crlf: bool = False


# What a line costs of the answer's budget: decides where a read stops.
LineCost = Callable[[Line], int]


def read_lines(fd: int, name: str, *, offset: int, limit: int, budget: int, line_cost: LineCost,
               whole_file_bytes: int) -> LinesRead:
    """The lines of the regular file open as `fd` from line `offset` (1-based; 0 is 1; negative: that many lines
    before the end), at most `limit` of them and as many as fit `budget` by `line_cost` (at least one).

    `name` is the file's path for messages. FileStateError BINARY_FILE for a file with a NUL in its first 8 KiB
    or bytes that are not UTF-8 (anywhere in a file read whole; in the lines read otherwise).
    """
    size = os.fstat(fd).st_size
    if size <= whole_file_bytes:
        survey = _survey(fd, size, name)
        result = LinesRead(size_bytes=survey.size, sha256=survey.sha256)
        total = survey.lines
        first = offset if offset > 0 else 1 if offset == 0 else max(1, total + offset + 1)
        if first > total:
            result.total_lines, result.past_end = total, True
            return result
        start = _skip_lines(fd, first - 1, survey.size)[0]
        _collect(fd, name, start, first, survey.size, limit, budget, line_cost, result)
        if result.next_offset is None:
            result.total_lines = total
        return result

    _refuse_binary_head(fd, size, name)
    result = LinesRead(size_bytes=size, sha256=None)
    if offset >= 0:
        first = max(offset, 1)
        start, skipped = _skip_lines(fd, first - 1, size)
        if skipped < first - 1 or start >= size:  # fewer lines than that
            result.total_lines = skipped + (1 if skipped < first - 1 and _ends_unterminated(fd, size) else 0)
            result.past_end = True
            return result
        _collect(fd, name, start, first, size, limit, budget, line_cost, result)
        if result.next_offset is None:
            result.total_lines = first - 1 + len(result.lines)
        return result

    start, counted = _start_of_last_lines(fd, -offset, size)
    if counted is None:
        result.from_end = True
        _collect(fd, name, start, offset, size, limit, budget, line_cost, result)
    else:  # the file has no more lines than asked for: all of them, numbered from its start
        _collect(fd, name, 0, 1, size, limit, budget, line_cost, result)
        if result.next_offset is None:
            result.total_lines = counted
    return result


@dataclass(frozen=True, slots=True)
class _Survey:
    size: int
    sha256: str
    lines: int


def _survey(fd: int, size: int, name: str) -> _Survey:
    """One pass over the whole file: its hash, its lines, and that it is text."""
    digest = hashlib.sha256()
    decoder = codecs.getincrementaldecoder("utf-8")()
    newlines = 0
    position = 0
    last = b""
    while position < size:
        block = os.pread(fd, min(SURVEY_BLOCK_BYTES, size - position), position)
        if not block:
            break  # truncated meanwhile: what was there is the file read
        if position < BINARY_PROBE_BYTES and b"\0" in block[:BINARY_PROBE_BYTES - position]:
            raise _binary(name, "it has a NUL byte in its first 8 KiB")
        digest.update(block)
        try:
            decoder.decode(block)
        except UnicodeDecodeError as exc:
            raise _binary(name, f"byte {position + exc.start} is not UTF-8") from None
        newlines += block.count(b"\n")
        last = block[-1:]
        position += len(block)
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        raise _binary(name, "it ends inside a UTF-8 character") from None
    lines = newlines + (1 if last not in (b"", b"\n") else 0)
    return _Survey(position, digest.hexdigest(), lines)


def _refuse_binary_head(fd: int, size: int, name: str) -> None:
    head = os.pread(fd, BINARY_PROBE_BYTES, 0)
    if b"\0" in head:
        raise _binary(name, "it has a NUL byte in its first 8 KiB")
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=len(head) >= size)
    except UnicodeDecodeError as exc:
        raise _binary(name, f"byte {exc.start} is not UTF-8") from None


def _binary(name: str, why: str) -> FileStateError:
    return FileStateError("BINARY_FILE", f"{quoted(name)} is not a text file ({why}); read shows UTF-8 text only")


def _ends_unterminated(fd: int, size: int) -> bool:
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


def _skip_lines(fd: int, count: int, end: int) -> tuple[int, int]:
    """(position, skipped): the byte position just after the `count`-th newline, or (end, newlines found) when
    the file has fewer."""
    position = 0
    remaining = count
    while remaining and position < end:
        block = os.pread(fd, min(BLOCK_BYTES, end - position), position)
        if not block:
            break
        found = block.count(b"\n")
        if found < remaining:
            remaining -= found
            position += len(block)
            continue
        # What follows the remaining-th newline of the block, found in C rather than a loop over lines.
        rest = block.split(b"\n", remaining)[-1]
        return position + len(block) - len(rest), count
    return position, count - remaining


def _start_of_last_lines(fd: int, count: int, end: int) -> tuple[int, int | None]:
    """(position, None): where the `count`-th line before the end starts, read backwards in blocks from `end`;
    or (0, lines) when the file has no more than `count` lines, with their number."""
    if end == 0:
        return 0, 0
    # A newline as the last byte ends the last line: it does not start another.
    scan_end = end - 1 if not _ends_unterminated(fd, end) else end
    position = scan_end
    remaining = count  # newlines still to pass: the count-th line before the end starts after the count-th
    while position > 0:
        size = min(BLOCK_BYTES, position)
        position -= size
        block = os.pread(fd, size, position)
        if len(block) < size:
            raise FileStateError("FILE_CHANGED", "the file was truncated while being read; read it again")
        found = block.count(b"\n")
        if found < remaining:
            remaining -= found
            continue
        head = block.rsplit(b"\n", remaining)[0]
        return position + len(head) + 1, None
    return 0, count - remaining + 1


def _collect(fd: int, name: str, start: int, number: int, end: int, limit: int, budget: int,
             line_cost: LineCost, result: LinesRead) -> None:
    """Appends to result.lines the lines from byte `start` (numbered from `number`) up to `end`, stopping at
    `limit` lines or at `budget`, and sets next_offset when lines remain."""
    spent = 0
    pieces: list[bytes] = []
    kept = 0  # bytes of the current line in pieces
    length = 0  # bytes of the current line seen
    position = start
    while position < end:
        block = os.pread(fd, min(BLOCK_BYTES, end - position), position)
        if not block:
            break
        cursor = 0
        while cursor < len(block):
            newline = block.find(b"\n", cursor)
            stop = len(block) if newline < 0 else newline
            if kept < _KEPT_LINE_BYTES:
                piece = block[cursor:min(stop, cursor + _KEPT_LINE_BYTES - kept)]
                pieces.append(piece)
                kept += len(piece)
            length += stop - cursor
            if newline < 0:
                break
            line = _line(name, number, b"".join(pieces), length, result, terminated=True)
            cost = line_cost(line)
            if result.lines and spent + cost > budget:
                result.stopped_for_bytes = True
                result.next_offset = number
                return
            result.lines.append(line)
            spent += cost
            number += 1
            pieces, kept, length = [], 0, 0
            cursor = newline + 1
            if len(result.lines) == limit:
                if position + cursor < end:
                    result.next_offset = number
                return
        position += len(block)
    if length:  # the last line, without a newline
        line = _line(name, number, b"".join(pieces), length, result, terminated=False)
        if result.lines and spent + line_cost(line) > budget:
            result.stopped_for_bytes = True
            result.next_offset = number
            return
        result.lines.append(line)


def _line(name: str, number: int, data: bytes, length: int, result: LinesRead, *, terminated: bool) -> Line:
    """The line `number` from its first bytes `data` (of `length` in all, its newline not counted)."""
    whole = length == len(data)
    if whole and terminated and data.endswith(b"\r"):
        data = data[:-1]
        result.crlf = True
    try:
        # A line kept in part may end inside a character: the incremental decoder leaves that out.
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=whole)
    except UnicodeDecodeError:
        raise _binary(name, f"line {number} is not UTF-8") from None
    if len(text) > MAX_LINE_CHARS:
        return Line(number, text[:MAX_LINE_CHARS], length)
    return Line(number, text)
