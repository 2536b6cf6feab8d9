"""The CredentialSource contract: where the values of a named credential come from."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True, slots=True)
class Availability:
    """Whether a source can be asked now, and why (or why not), for logs and error messages."""

    available: bool
    reason: str

    def __bool__(self) -> bool:
        return self.available


class CredentialSourceError(Exception):
    """A source cannot tell whether it holds a credential, or holds an unusable one (an unreadable file, an
    unreachable database, a wrong store key, a value too short to redact). The message names the credential
    and the source, never a value."""


class CredentialSource(ABC):
    """A place credentials are read from: the environment, a directory of files, the database.

    - `source` names the kind of place in messages; `describe()` says which one exactly.
    - `is_available()` is cheap and never blocks; an unavailable source is skipped, its reason reported.
    - `lookup(name)` returns every key of credential `name` with its value, or None when the source does not
      hold it. Values are checked (`check_credential_value`) before they are returned; what cannot be used
      raises CredentialSourceError. `lookup` may block: async code calls `lookup_async`, which runs it in a
      thread unless the source sets `blocking = False`.
    - `names()` lists the credentials the source holds, so that their values are hidden from the start; a
      source that cannot list them keeps the default (none).

    A source holding fixed values:

        class FixedSource(CredentialSource):
            source = "fixed"
            blocking = False

            def __init__(self, bundles: Mapping[str, Mapping[str, str]]) -> None:
                self._bundles = bundles

            def is_available(self) -> Availability:
                return Availability(True, "values given in code")

            def lookup(self, name: str) -> Mapping[str, str] | None:
                return self._bundles.get(name)
    """

    source: ClassVar[str]
    blocking: ClassVar[bool] = True

    @abstractmethod
    def is_available(self) -> Availability:
        """Whether lookups can be made, with the reason."""

    @abstractmethod
    def lookup(self, name: str) -> Mapping[str, str] | None:
        """The keys and values of credential `name`, or None when this source does not hold it."""

    def names(self) -> Sequence[str]:
        """The names of the credentials this source holds now, so that the server can hide their values from the
        start. May block like `lookup`; raises CredentialSourceError when the source cannot be listed. A source
        that cannot list what it holds returns none (its values are then hidden once a call resolves them)."""
        return ()

    async def lookup_async(self, name: str) -> Mapping[str, str] | None:
        if not self.blocking:
            return self.lookup(name)
        return await asyncio.to_thread(self.lookup, name)

    def describe(self) -> str:
        """Where this source reads, for people (no secrets)."""
        return self.source

    def close(self) -> None:
        """Release what the source holds (database connections); lookups may reopen it."""
        return None  # most sources hold nothing between lookups
