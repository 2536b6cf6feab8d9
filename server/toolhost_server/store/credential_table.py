"""The credentials table: each key of each credential encrypted with the store key, bound to its row.

Names, keys and values are checked when written (and values again when read, in case a row was written by
something else): a value too short to redact safely is refused with a message that names the credential.
Listing and deleting need no key; reading and writing do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import delete, select
from sqlalchemy.dialects import postgresql, sqlite

from ..credentials.names import check_credential_key, check_credential_name, check_credential_value
from .cipher import ValueCipher
from .database import Store
from .errors import StoreDecryptionError
from .keys import no_store_key_error
from .schema import credentials


@dataclass(frozen=True, slots=True)
class StoredKey:
    """One stored key of a credential, without its value."""

    name: str
    key: str
    updated_at: datetime


class CredentialTable:
    """Reads and writes encrypted credentials. Blocking (it queries the database).

        table = CredentialTable(store, ValueCipher(require_store_key(config.store_key_file)))
        table.put("winrm", "password", value)
        table.get("winrm")          # {"password": ...} or None
        table.list_keys()           # [StoredKey(name="winrm", key="password", updated_at=...)]
        table.delete("winrm")       # 1 (rows deleted)
    """

    def __init__(self, store: Store, cipher: ValueCipher | None) -> None:
        self.store = store
        self._cipher = cipher

    def put(self, name: str, key: str, value: str) -> None:
        """Store `value` under name and key, replacing what was there."""
        check_credential_name(name)
        check_credential_key(key)
        check_credential_value(name, key, value, "value to store in the database")
        row = {"name": name, "key": key, "value": self._need_cipher().encrypt(value, _context(name, key)),
               "updated_at": datetime.now(UTC)}
        with self.store.begin() as connection:
            insert = postgresql.insert if self.store.dialect == "postgresql" else sqlite.insert
            statement = insert(credentials).values(row)
            connection.execute(statement.on_conflict_do_update(
                index_elements=[credentials.c.name, credentials.c.key],
                set_={"value": statement.excluded.value, "updated_at": statement.excluded.updated_at}))

    def get(self, name: str) -> Mapping[str, str] | None:
        """Every key of credential `name` with its value, or None when it has none."""
        check_credential_name(name)
        with self.store.begin() as connection:
            rows = connection.execute(
                select(credentials.c.key, credentials.c.value).where(credentials.c.name == name)).all()
        if not rows:
            return None
        cipher = self._need_cipher()
        values = {}
        for key, blob in rows:
            try:
                value = cipher.decrypt(blob, _context(name, key))
            except StoreDecryptionError as exc:
                raise StoreDecryptionError(f"credential {name!r} key {key!r} in {self.store.description}: {exc}") \
                    from None
            check_credential_value(name, key, value, f"in {self.store.description}")
            values[key] = value
        return values

    def list_keys(self) -> list[StoredKey]:
        """Every stored key, by name then key; values are not read."""
        with self.store.begin() as connection:
            rows = connection.execute(
                select(credentials.c.name, credentials.c.key, credentials.c.updated_at)
                .order_by(credentials.c.name, credentials.c.key)).all()
        return [StoredKey(name, key, _aware(updated_at)) for name, key, updated_at in rows]

    def delete(self, name: str, key: str | None = None) -> int:
        """Delete one key of a credential, or all of them; the number of keys deleted."""
        statement = delete(credentials).where(credentials.c.name == name)
        if key is not None:
            statement = statement.where(credentials.c.key == key)
        with self.store.begin() as connection:
            return connection.execute(statement).rowcount

    def _need_cipher(self) -> ValueCipher:
        if self._cipher is None:
            raise no_store_key_error()
        return self._cipher


def _context(name: str, key: str) -> tuple[str, str, str]:
    # What the ciphertext is bound to: moving it to another name or key makes it fail to decrypt.
    return (credentials.name, name, key)


def _aware(moment: datetime) -> datetime:
    # SQLite returns naive datetimes even for DateTime(timezone=True); every value was written in UTC.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
