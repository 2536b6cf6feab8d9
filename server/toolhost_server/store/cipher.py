"""Encryption at rest: AES-256-GCM, each value bound to the row it belongs to.

A stored value is `version (1 byte) | key id (4 bytes) | nonce (12 bytes) | ciphertext and tag`. The header
and the row's context (for a credential: table, name and key) are the associated data, so a value copied
into another row, or a header edited, fails to decrypt. The key id tells "written with another key" apart
from "altered"; it is also what lets a later version decrypt with an older key while re-encrypting with a new.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .errors import StoreDecryptionError
from .keys import KEY_ID_BYTES, STORE_KEY_ENV, StoreKey

FORMAT_VERSION = 1
NONCE_BYTES = 12  # GCM's standard nonce; random per value, so one key must not encrypt 2**32 values
TAG_BYTES = 16
_HEADER_BYTES = 1 + KEY_ID_BYTES
_MINIMUM_BYTES = _HEADER_BYTES + NONCE_BYTES + TAG_BYTES


class ValueCipher:
    """Encrypts and decrypts text values with the store key.

        cipher = ValueCipher(require_store_key(config.store_key_file))
        blob = cipher.encrypt("s3cret-value", ("credentials", "winrm", "password"))
        cipher.decrypt(blob, ("credentials", "winrm", "password"))   # "s3cret-value"
        cipher.decrypt(blob, ("credentials", "winrm", "username"))   # StoreDecryptionError: not its row
    """

    __slots__ = ("_aead", "_key")

    def __init__(self, key: StoreKey) -> None:
        self._key = key
        self._aead = AESGCM(key.secret)

    def __repr__(self) -> str:
        return f"ValueCipher(key_id={self._key.key_id_text})"

    def encrypt(self, plaintext: str, context: Sequence[str]) -> bytes:
        header = bytes([FORMAT_VERSION]) + self._key.key_id
        nonce = os.urandom(NONCE_BYTES)
        return header + nonce + self._aead.encrypt(nonce, plaintext.encode("utf-8"), _associated(header, context))

    def decrypt(self, blob: bytes, context: Sequence[str]) -> str:
        """The text in `blob`; StoreDecryptionError (without the row: the caller names it) when it cannot be."""
        if len(blob) < _MINIMUM_BYTES or blob[0] != FORMAT_VERSION:
            version = blob[0] if blob else "none"
            raise StoreDecryptionError(
                f"the stored value is not in a format this toolhost reads (format {version}, expected "
                f"{FORMAT_VERSION}): it was written by another program or version; set it again")
        header = blob[:_HEADER_BYTES]
        nonce = blob[_HEADER_BYTES:_HEADER_BYTES + NONCE_BYTES]
        sealed = blob[_HEADER_BYTES + NONCE_BYTES:]
        written_with = header[1:].hex()
        if written_with != self._key.key_id_text:
            raise StoreDecryptionError(
                f"the configured store key ({self._key.origin}, key id {self._key.key_id_text}) does not match "
                f"the key the value was written with (key id {written_with}): configure that key in "
                f"{STORE_KEY_ENV} or store_key_file, or set the value again with this one")
        try:
            plaintext = self._aead.decrypt(nonce, sealed, _associated(header, context))
        except InvalidTag:
            raise StoreDecryptionError(
                "the stored value does not decrypt although its key id matches the configured key: it was "
                "altered, or copied from another row; set it again") from None
        return plaintext.decode("utf-8")


def _associated(header: bytes, context: Sequence[str]) -> bytes:
    # JSON keeps ("a", "b:c") and ("a:b", "c") apart, which joining with a separator would not.
    return header + json.dumps(list(context), ensure_ascii=True).encode("ascii")
