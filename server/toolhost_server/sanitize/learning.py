"""The server-wide redactor that also knows every credential value the server holds or has resolved so far.

Log records and spans belong to no single call's redactor: a tool's log line is formatted by a handler that
cannot know which call wrote it. So the values the credential sources hold at start are learned here, and so is
each value a call resolves (a rotated Secret's new one) the first time; every record from then on is redacted
with them. Values are never forgotten: a value that was a secret once stays hidden.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from .redactor import Redactor


class LearningRedactor:
    """Holds the current Redactor: the base one plus every value learned. Reading `current` is lock-free."""

    def __init__(self, base: Redactor) -> None:
        self._base = base
        self._values: set[str] = set()
        self._lock = threading.Lock()
        self.current = base

    def learn(self, values: Iterable[str]) -> Redactor:
        """Add `values` (already checked safe to match) and return the redactor that hides them all."""
        new = [value for value in values if value not in self._values]
        if not new:
            return self.current
        with self._lock:
            self._values.update(new)
            # Sorted, so that the same set of values always builds the same redactor.
            self.current = self._base.with_values(sorted(self._values))
        return self.current


def current_redactor(source: Redactor | LearningRedactor) -> Redactor:
    """The redactor to use now: a LearningRedactor's current one (with every value learned so far), or
    `source` itself."""
    return source.current if isinstance(source, LearningRedactor) else source
