"""The bearer token `/metrics` requires when `metrics_token_file` is set: read at start, read again when the
file changes (a Kubernetes Secret update, a rotation by hand), compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
import logging
from pathlib import Path

from ..auth.file_changes import FileChanges
from ..auth.tokens import token_problem

logger = logging.getLogger("toolhost.http")


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "replace")).digest()


class MetricsToken:
    """The token of the file at `path`: its text without surrounding whitespace (the trailing newline of
    `echo`), a token as the auth file's (at least 32 characters, no spaces). An edit that leaves no usable
    token keeps the last good one, and says so in the log.

    Used from the event loop only: a change is noticed at the next request by a stat(), no watcher thread.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._changes = FileChanges([path])
        self._expected = self._read()  # OSError or ValueError: /metrics must not start unguarded

    def accepts(self, authorization: str) -> bool:
        """Whether an `Authorization` header value is `Bearer <the token>`."""
        self._reload_if_changed()
        scheme, _, token = authorization.strip().partition(" ")
        # Digests of equal length compared in constant time: the comparison tells neither the token's length
        # nor how much of it a guess got right.
        return scheme.lower() == "bearer" and hmac.compare_digest(_digest(token.strip()), self._expected)

    def _read(self) -> bytes:
        try:
            token = self.path.read_bytes().decode("utf-8").strip()
        except UnicodeDecodeError:
            raise ValueError(f"{self.path} is not UTF-8 text") from None
        problem = token_problem(token)
        if problem is not None:
            raise ValueError(f"{self.path}: {problem}")
        return _digest(token)

    def _reload_if_changed(self) -> None:
        if not self._changes.changed():
            return
        self._changes.mark_seen()
        try:
            self._expected = self._read()
        except (OSError, ValueError) as exc:
            logger.error("metrics_token_file changed but holds no usable token, keeping the last good one: %s",
                         exc)
            return
        logger.info("metrics token reloaded from %s", self.path)


def load_metrics_token(path: str) -> MetricsToken | None:
    """The token of `metrics_token_file`, or None when it is empty (no token); OSError naming the setting when
    the file holds none."""
    if not path:
        return None
    try:
        return MetricsToken(Path(path))
    except OSError as exc:
        raise OSError(f"cannot read metrics_token_file {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise OSError(f"cannot use metrics_token_file: {exc}") from None
