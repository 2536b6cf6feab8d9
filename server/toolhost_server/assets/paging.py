"""Page tokens of the asset lists (ListAssets, asset_search): opaque, and bound to the filter they were made for.

A token holds the lower-cased name the next page starts after (AssetTable.page's keyset) and a digest of the
filter: used with another filter it is refused (InvalidPageTokenError) rather than continuing a different list
from the middle. Assets are sorted by name, so a token stays valid while assets come and go.

    token = encode_page_token(where, after)      # "" when `after` is "" (the last page)
    after = decode_page_token(token, where)      # "" for an empty token (the first page)
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Final

from ..errors import InvalidPageTokenError, InvalidRequestError
from .model import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, NAME_PATTERN, AssetFilter

# A token this server makes is under 300 characters (a name of at most 128 and a digest); a longer one is forged.
_MAX_TOKEN_CHARS: Final = 1024


def filter_digest(where: AssetFilter) -> str:
    """What a token remembers of its filter: the values exactly as given (a client continues a list with the
    same request), hashed so that the token does not echo them."""
    values = [where.os, where.platform, where.site, where.tag, where.name]
    return hashlib.sha256(json.dumps(values).encode()).hexdigest()[:24]


def encode_page_token(where: AssetFilter, after: str) -> str:
    if not after:
        return ""
    raw = json.dumps({"a": after, "f": filter_digest(where)}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_page_token(token: str, where: AssetFilter) -> str:
    """The `after` of AssetTable.page a token continues from; InvalidPageTokenError for a token this server did
    not make, or made for another filter."""
    if not token:
        return ""
    try:
        if len(token) > _MAX_TOKEN_CHARS:
            raise ValueError("too long")
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        after, digest = data["a"], data["f"]
    # RecursionError: a forged token of deeply nested JSON. Bad base64 and bad UTF-8 are ValueErrors.
    except (ValueError, KeyError, TypeError, RecursionError):
        raise InvalidPageTokenError("page_token is not one this server issued; start again with an empty "
                                    "page_token") from None
    # A lower-cased name, as the inventory allows them: a forged position (a NUL, which PostgreSQL refuses
    # outright, or any character no name holds) never reaches the database.
    if not isinstance(after, str) or not NAME_PATTERN.fullmatch(after) or after != after.lower():
        raise InvalidPageTokenError("page_token is not one this server issued; start again with an empty "
                                    "page_token")
    if digest != filter_digest(where):
        raise InvalidPageTokenError("page_token belongs to a list with other filters: send the same os, platform, "
                                    "site, tag and name as for the first page, or start again with an empty "
                                    "page_token")
    return after


def page_size_of(requested: int) -> int:
    """AIP-158: 0 means DEFAULT_PAGE_SIZE, more than MAX_PAGE_SIZE is clamped, negative is refused."""
    if requested < 0:
        raise InvalidRequestError(f"page_size must not be negative (got {requested}); use 0 for the default of "
                                  f"{DEFAULT_PAGE_SIZE}, at most {MAX_PAGE_SIZE}")
    return min(requested or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
