"""Reads a file's lines from its end backwards, in blocks, so that the last lines of a file of many gigabytes
cost what they cost in a small one: the blocks that hold them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

BLOCK_SIZE = 64 * 1024
MAX_LINE_BYTES = 64 * 1024


@dataclass(slots=True)
class ReadStats:
    """What reading cost: blocks read and their bytes (the tests hold the file reader to it)."""

    blocks: int = 0
    bytes: int = 0

    def add(self, other: ReadStats) -> None:
        self.blocks += other.blocks
        self.bytes += other.bytes


def reverse_lines(
    fd: int,
    end: int,
    stats: ReadStats,
    *,
    block_size: int = BLOCK_SIZE,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> Iterator[tuple[int, bytes]]:
    """Yield (offset, line) for each line that ends before `end` in the open file `fd`, the last line first,
    without its newline.

    A last line without a newline is being written: it is left for a later read. A line longer than
    `max_line_bytes` is cut to its first `max_line_bytes` (read again from its start once found), so memory
    stays bounded whatever the file holds. Reads use pread: other readers of `fd` are not disturbed.
    """
    position = end
    pieces: list[bytes] = []  # the current line's parts, last part first
    held = 0
    overflow = False
    seen_newline = False
    while position > 0:
        size = min(block_size, position)
        position -= size
        block = os.pread(fd, size, position)
        stats.blocks += 1
        stats.bytes += len(block)
        if len(block) < size:  # the file was truncated under us (copytruncate): what is left is read next time
            return
        cut = len(block)
        while True:
            newline = block.rfind(b"\n", 0, cut)
            piece = block[newline + 1:cut]
            if piece and not overflow:
                if held + len(piece) > max_line_bytes:
                    overflow, pieces, held = True, [], 0
                else:
                    pieces.append(piece)
                    held += len(piece)
            if newline < 0:
                break
            start = position + newline + 1
            if seen_newline:
                yield start, _line(fd, start, pieces, overflow, max_line_bytes, stats)
            seen_newline = True  # what came after the file's last newline is an unfinished line: dropped
            pieces, held, overflow = [], 0, False
            cut = newline
    if seen_newline and (pieces or overflow):
        yield 0, _line(fd, 0, pieces, overflow, max_line_bytes, stats)


def _line(fd: int, start: int, pieces: list[bytes], overflow: bool, limit: int, stats: ReadStats) -> bytes:
    if not overflow:
        return b"".join(reversed(pieces))
    head = os.pread(fd, limit, start)
    stats.blocks += 1
    stats.bytes += len(head)
    return head
