"""The store key: 32 random bytes, written as base64, from TOOLHOST_STORE_KEY or the file `store_key_file` names.

Never from a flag: command lines are visible to every user of the machine (`ps`). Create one with
`toolhost credentials generate-key --output FILE`. The key id (a short hash of the key) is stored with every
value, so a value written with another key is recognised as such instead of failing as "corrupt".
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .errors import StoreKeyError

STORE_KEY_ENV = "TOOLHOST_STORE_KEY"
KEY_BYTES = 32  # AES-256
KEY_ID_BYTES = 4
_HOW_TO_CREATE = "create one with `toolhost credentials generate-key --output FILE`"


@dataclass(frozen=True, slots=True)
class StoreKey:
    """A store key and where it came from. The secret never appears in repr()."""

    secret: bytes = field(repr=False)
    origin: str

    @property
    def key_id(self) -> bytes:
        # A hash, not the key: the id is stored in every value and printed in errors.
        return hashlib.sha256(b"toolhost store key id\0" + self.secret).digest()[:KEY_ID_BYTES]

    @property
    def key_id_text(self) -> str:
        return self.key_id.hex()

    @property
    def text_forms(self) -> tuple[str, ...]:
        """The key as text in the alphabets parse_store_key reads, and as hex: what the server's redactor learns,
        so that the key is hidden wherever it appears (a log line, a file a tool reads, a column default)."""
        standard = base64.b64encode(self.secret).decode("ascii")
        return (standard, base64.urlsafe_b64encode(self.secret).decode("ascii"), self.secret.hex())


def generate_store_key_text() -> str:
    """A new random key as base64 text, as TOOLHOST_STORE_KEY and key files hold it."""
    return base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode("ascii")


def parse_store_key(text: str, origin: str) -> StoreKey:
    """The key in `text` (base64 of 32 bytes; surrounding whitespace ignored). The message names `origin`."""
    compact = "".join(text.split())
    if not compact:
        raise StoreKeyError(f"{origin} is empty; it must hold a base64 store key ({_HOW_TO_CREATE})")
    try:
        # Both alphabets: a key pasted from a URL-safe tool works as well.
        secret = base64.b64decode(compact.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        raise StoreKeyError(f"{origin} is not base64 text; it must hold a base64 store key ({_HOW_TO_CREATE})") \
            from None
    if len(secret) != KEY_BYTES:
        raise StoreKeyError(
            f"{origin} holds {len(secret)} bytes; a store key is {KEY_BYTES} random bytes in base64 "
            f"({_HOW_TO_CREATE})")
    return StoreKey(secret, origin)


def load_store_key(key_file: str = "", environ: Mapping[str, str] | None = None) -> StoreKey | None:
    """The configured key, or None when neither TOOLHOST_STORE_KEY nor `key_file` is set.

    Setting both is refused rather than picking one: the values would be unreadable with the other.
    """
    environ = os.environ if environ is None else environ
    from_env = environ.get(STORE_KEY_ENV, "")
    if from_env and key_file:
        raise StoreKeyError(f"both {STORE_KEY_ENV} and store_key_file ({key_file}) are set; keep one of them")
    if from_env:
        return parse_store_key(from_env, STORE_KEY_ENV)
    if not key_file:
        return None
    try:
        text = Path(key_file).read_text("ascii")
    except UnicodeDecodeError:
        raise StoreKeyError(f"store key file {key_file} is not base64 text ({_HOW_TO_CREATE})") from None
    except OSError as exc:
        raise StoreKeyError(f"cannot read store key file {key_file}: {exc.strerror or exc} (store_key_file; "
                            f"{_HOW_TO_CREATE})") from None
    return parse_store_key(text, f"store key file {key_file}")


def require_store_key(key_file: str = "", environ: Mapping[str, str] | None = None) -> StoreKey:
    """The configured key; StoreKeyError saying how to configure one when there is none."""
    key = load_store_key(key_file, environ)
    if key is None:
        raise no_store_key_error()
    return key


def no_store_key_error() -> StoreKeyError:
    return StoreKeyError(
        f"no store key: values in the database are encrypted with a key given in {STORE_KEY_ENV} or in the "
        f"file named by store_key_file (TOOLHOST_STORE_KEY_FILE); {_HOW_TO_CREATE}")


def write_store_key_file(path: Path, text: str) -> None:
    """Write a new key file readable by its owner only; an existing file is never replaced (its key may be
    the only one that decrypts a database)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="ascii") as handle:
        handle.write(text + "\n")
