"""Hiding the secret parts of what the introspection tools show: database URLs' passwords, secret settings.

The server's redactor passes every tool output too; this is the first line, which knows where the secrets are
rather than recognising them by their look.
"""

from __future__ import annotations

import urllib.parse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

REDACTED = "[REDACTED]"
# Rendered in place of a secret, then swapped for REDACTED: SQLAlchemy would percent-escape the brackets.
_PLACEHOLDER = "ToolhostRedactedPlaceholder"
# Query parameters libpq and SQLite read secrets from (a password may sit in `?password=`, not in the userinfo).
_SECRET_QUERY_WORDS = ("pass", "secret", "token", "key", "auth", "cred")


def redacted_url(text: str) -> str:
    """`text`, a database URL, with its password and secret-looking query values replaced by [REDACTED]; user,
    host, port and database kept. Text that is no URL, or one whose password would spill into another part
    (an unescaped `@` or `/` in it), is replaced whole."""
    if not text:
        return text
    # Imported here: SQLAlchemy takes a while to import, and only database URLs need it.
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(text)
    except (ArgumentError, ValueError):
        return REDACTED
    if "@" in f"{url.host or ''}{url.database or ''}" or text.count("@") > 1:
        return REDACTED
    return redacted_parsed_url(url)


def redacted_parsed_url(url: URL, drivername: str | None = None) -> str:
    """A parsed URL as text with its password and secret-looking query values replaced by [REDACTED];
    `drivername` replaces the URL's (database_schema shows postgresql://, not the driver it connects with)."""
    if url.password is not None:
        url = url.set(password=_PLACEHOLDER)
    query = {key: (_PLACEHOLDER if _is_secret_parameter(key) else value) for key, value in url.query.items()}
    url = url.set(query=query, drivername=drivername or url.drivername)
    return url.render_as_string(hide_password=False).replace(_PLACEHOLDER, REDACTED)


def url_secrets(url: URL) -> tuple[str, ...]:
    """The URL's password and secret-looking query values, each as written and URL-encoded: what no output or
    log line may hold."""
    found = [str(url.password)] if url.password else []
    for key, value in url.query.items():
        if _is_secret_parameter(key):
            found.extend([value] if isinstance(value, str) else list(value))
    return tuple(dict.fromkeys(form for value in found if value
                               for form in (value, urllib.parse.quote(value, safe=""))))


def _is_secret_parameter(key: str) -> bool:
    lowered = key.lower()
    return any(word in lowered for word in _SECRET_QUERY_WORDS)
