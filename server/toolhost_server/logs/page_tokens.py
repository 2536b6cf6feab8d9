"""AIP-158 page tokens of log queries: the sort key of the last record returned, bound to the filter.

Keyset tokens (not offsets) stay right while new records arrive: the next page continues just before the last
record the caller saw, however many came in since.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

from ..errors import InvalidPageTokenError
from .record import SortKey

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
# Positions are sequence numbers, row ids, inodes and offsets: what a 64-bit signed integer column holds. A forged
# token's larger ones would make the database reader fail on them.
_MAX_POSITION = 2**63 - 1


def encode_page_token(last: SortKey, digest: str) -> str:
    moment, source, position = last
    micros = (moment - _EPOCH) // _MICROSECOND
    raw = json.dumps({"t": micros, "s": source, "p": list(position), "f": digest}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_page_token(token: str, digest: str) -> SortKey:
    """The sort key a token continues after; InvalidPageTokenError for one this server did not issue for the
    same filter."""
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        micros, source, position, token_digest = data["t"], data["s"], data["p"], data["f"]
        if not (isinstance(micros, int) and isinstance(source, str) and isinstance(position, list)
                and all(type(p) is int and 0 <= p <= _MAX_POSITION for p in position)):
            raise TypeError
        moment = _EPOCH + micros * _MICROSECOND
    # RecursionError: a forged token of deeply nested JSON.
    except (ValueError, KeyError, TypeError, OverflowError, OSError, RecursionError):
        raise InvalidPageTokenError("page_token is not one this server issued; start again with an empty "
                                    "page_token") from None
    if token_digest != digest:
        raise InvalidPageTokenError("page_token belongs to a different filter; use the same level, text, "
                                    "trace_id and source as the first page, or start again")
    return moment, source, tuple(position)
