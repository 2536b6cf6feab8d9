"""What can go wrong with the store; every message says how to fix it and never holds a secret.

    StoreError                   base: the store cannot do what was asked
     ├── StoreKeyError           no store key where one is needed, or a malformed one
     ├── StoreUnavailableError   the database cannot be opened or reached (the URL shown without its password)
 │    └── StoreCommitUnknownError  the connection broke during COMMIT: the transaction may or may not be stored
     ├── StoreValueError         the database refused a value: a NUL in text, too long for its column, a constraint
     ├── StoreSchemaError        the database's schema version is newer than this toolhost knows
     └── StoreDecryptionError    a value does not decrypt: written with another key, altered, or moved
"""

from __future__ import annotations


class StoreError(Exception):
    """The store cannot do what was asked; the message says why and how to fix it."""


class StoreKeyError(StoreError):
    """No store key is configured where one is needed, or the configured one is unusable."""


class StoreUnavailableError(StoreError):
    """The database cannot be opened or reached."""


class StoreCommitUnknownError(StoreUnavailableError):
    """The connection to a database server broke while a transaction committed: the server may have stored it
    before the answer was lost. Writing it again may store it twice; not writing it may lose it."""


class StoreValueError(StoreError):
    """The database refused a value written (not the connection): the rest of a batch can still be written."""


class StoreSchemaError(StoreError):
    """The database was migrated by a newer toolhost: this one must not read or write it (a server stops)."""


class StoreDecryptionError(StoreError):
    """A stored value does not decrypt with the configured key."""
