"""What can go wrong with the store; every message says how to fix it and never holds a secret.

    StoreError                   base: the store cannot do what was asked
     ├── StoreKeyError           no store key where one is needed, or a malformed one
     ├── StoreUnavailableError   the database cannot be opened or reached (the URL shown without its password)
     ├── StoreValueError         the database refused a value: a NUL in text, too long for its column, a constraint
     └── StoreDecryptionError    a value does not decrypt: written with another key, altered, or moved
"""

from __future__ import annotations


class StoreError(Exception):
    """The store cannot do what was asked; the message says why and how to fix it."""


class StoreKeyError(StoreError):
    """No store key is configured where one is needed, or the configured one is unusable."""


class StoreUnavailableError(StoreError):
    """The database cannot be opened or reached."""


class StoreValueError(StoreError):
    """The database refused a value written (not the connection): the rest of a batch can still be written."""


class StoreDecryptionError(StoreError):
    """A stored value does not decrypt with the configured key."""
