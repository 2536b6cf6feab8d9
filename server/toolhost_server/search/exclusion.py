"""The names the index never walks nor holds (search_exclude): fnmatch patterns on one name each, a trailing "/"
meaning directories only (`.ssh/`), otherwise files and directories alike (`.git`, `*.pem`)."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable


class Exclusions:
    """Compiled search_exclude patterns::

        excluded = Exclusions((".git", "*.pem", ".ssh/"))
        excluded.name("key.pem", is_directory=False)   # True
        excluded.path("src/.ssh/config")               # True: a directory on the way is excluded
    """

    def __init__(self, patterns: Iterable[str]) -> None:
        any_kind: list[str] = []
        directories: list[str] = []
        for pattern in patterns:
            if pattern.endswith("/"):
                directories.append(fnmatch.translate(pattern.rstrip("/")))
            elif pattern:
                any_kind.append(fnmatch.translate(pattern))
        self._any = _union(any_kind)
        self._directories = _union(any_kind + directories)

    def name(self, name: str, *, is_directory: bool) -> bool:
        """Whether the entry `name` (a file, or a directory) is excluded."""
        pattern = self._directories if is_directory else self._any
        return pattern is not None and pattern.match(name) is not None

    def path(self, relative: str, *, is_directory: bool) -> bool:
        """Whether the relative path `relative` is excluded: by its own name, or by a directory on its way."""
        parts = [part for part in relative.split("/") if part not in ("", ".")]
        if not parts:
            return False
        return (any(self.name(part, is_directory=True) for part in parts[:-1])
                or self.name(parts[-1], is_directory=is_directory))


def _union(sources: list[str]) -> re.Pattern[str] | None:
    # fnmatch's translations are anchored with \Z; case matters, as names do on Linux.
    return re.compile("|".join(f"(?:{source})" for source in sources)) if sources else None
