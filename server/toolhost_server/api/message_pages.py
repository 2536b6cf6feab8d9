"""How many records of a list fit in one response: the list RPCs (ListUserTools, ListAssets) cut a page short
rather than send a message past the server's max_message_bytes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from google.protobuf.message import Message

# What a repeated message field adds to each element on the wire, at most: its tag and a length varint.
_ELEMENT_FRAMING_BYTES: Final = 6


def page_bytes(max_message_bytes: int) -> int:
    """The most bytes of records a page holds: half the message limit, the rest left for the other fields."""
    return max_message_bytes // 2


def page_within(messages: Sequence[Message], budget_bytes: int) -> int:
    """How many of `messages`, from the first, a page of at most `budget_bytes` holds: at least one, so that a
    page always moves the list on (each kind of record is bounded far below the message limit)."""
    used = 0
    for count, message in enumerate(messages):
        used += message.ByteSize() + _ELEMENT_FRAMING_BYTES
        if used > budget_bytes and count > 0:
            return count
    return len(messages)
