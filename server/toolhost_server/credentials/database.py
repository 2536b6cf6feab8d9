"""Credentials from the store's encrypted credentials table (set with `toolhost credentials set`).

Without a store key the source is unavailable (nothing could be decrypted) and SQLAlchemy is not even imported.
With one, a starting server connects to list and read what it holds (every value is hidden from the start, see
CredentialResolver.configured_values); a database that cannot be reached then is logged, and calls try again.
A malformed key or database_url is an error at construction, so the server reports it when it starts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..config import Config
from ..store.errors import StoreError
from ..store.keys import STORE_KEY_ENV, StoreKey, load_store_key
from .base import Availability, CredentialSource, CredentialSourceError
from .names import InvalidCredentialError

if TYPE_CHECKING:
    from ..store.credential_table import CredentialTable


class DatabaseCredentialSource(CredentialSource):
    """Reads credentials from the database `config` names, decrypting them with `key`. Blocking: async code
    calls `lookup_async`, which runs the query in a thread."""

    source = "database"

    def __init__(self, config: Config, key: StoreKey | None) -> None:
        self._key = key
        # Without a key nothing could be decrypted: SQLAlchemy is not even imported. With one, a database_url
        # that cannot work is reported now (StoreUnavailableError); connecting waits for the first use.
        self._table = _credential_table(config, key) if key is not None else None

    @classmethod
    def from_config(cls, config: Config, environ: Mapping[str, str] | None = None) -> DatabaseCredentialSource:
        """The source for `config`'s database and key; StoreError when a key or URL is configured but unusable."""
        return cls(config, load_store_key(config.store_key_file, environ))

    def is_available(self) -> Availability:
        if self._table is None or self._key is None:
            return Availability(
                False, f"no store key ({STORE_KEY_ENV} or store_key_file), so its values cannot be decrypted")
        return Availability(True, f"reads encrypted credentials (store key id {self._key.key_id_text})")

    def describe(self) -> str:
        return "database" if self._table is None else f"database ({self._table.store.description})"

    def key_values(self) -> tuple[str, ...]:
        """The store key's text forms, or none without a key: a secret of this source besides its values."""
        return self._key.text_forms if self._key is not None else ()

    def lookup(self, name: str) -> Mapping[str, str] | None:
        if self._table is None:
            return None
        try:
            return self._table.get(name)
        except (StoreError, InvalidCredentialError) as exc:
            raise CredentialSourceError(str(exc)) from None

    def names(self) -> Sequence[str]:
        if self._table is None:
            return ()
        try:
            return sorted({stored.name for stored in self._table.list_keys()})
        except StoreError as exc:
            raise CredentialSourceError(str(exc)) from None

    def close(self) -> None:
        if self._table is not None:
            self._table.store.close()


def _credential_table(config: Config, key: StoreKey) -> CredentialTable:
    # Imported here: SQLAlchemy takes about 0.3 s to import and the cipher more; only a configured key needs them.
    from ..store.cipher import ValueCipher
    from ..store.credential_table import CredentialTable
    from ..store.database import Store

    return CredentialTable(Store.from_config(config), ValueCipher(key))
