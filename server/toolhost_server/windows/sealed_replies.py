"""MS-WSMV message encryption (NTLM over HTTP) that requires the host's replies to be encrypted, not only ours.

pywinrm encrypts every request once encryption is set up, but its `Encryption.parse_encrypted_response` passes a
reply through as it came when the reply's Content-Type is not the encrypted one. Anyone on the path could then
answer in clear (a forged listing, fault or exit code) and be believed. With `SealedRepliesEncryption` as the
transport's encryption, every reply to an encrypted request must be `multipart/encrypted` with the session's
protocol and must unwrap (NTLM checks its signature and sequence number) to a message; anything else raises
UnsealedReply, and nothing of that reply is used.
"""

from __future__ import annotations

import email.message
import re
from typing import Final

import requests
from winrm.encryption import Encryption

_ENCRYPTED_MEDIA_TYPE: Final = "multipart/encrypted"
# The most of a hostile Content-Type that a message shows, and the characters it keeps.
_SHOWN_CHARS: Final = 80
_UNSHOWABLE: Final = re.compile(r"[^\x20-\x7e]+")


class UnsealedReply(Exception):
    """A reply to an encrypted request was not encrypted, or did not unwrap; the message says which."""


class SealedRepliesEncryption(Encryption):
    """pywinrm's message encryption, refusing any reply that is not sealed by the session's security context."""

    def parse_encrypted_response(self, response: requests.Response) -> bytes:
        content_type = response.headers.get("Content-Type", "")
        if not self._is_sealed_type(content_type):
            shown = _UNSHOWABLE.sub(" ", content_type)[:_SHOWN_CHARS] or "none"
            raise UnsealedReply(f"answered an encrypted request in clear (HTTP {response.status_code}, "
                                f"Content-Type {shown!r})")
        try:
            message = super().parse_encrypted_response(response)
        # Whatever a malformed or altered body provokes in the MIME split, the length check or NTLM's unwrap.
        except Exception as error:
            raise UnsealedReply(f"sent an encrypted answer that does not unwrap ({type(error).__name__}): it was "
                                "altered on the way, or does not come from the host that authenticated") from None
        if not message:
            raise UnsealedReply("sent an encrypted answer with no encrypted part in it")
        return message

    def _is_sealed_type(self, content_type: str) -> bool:
        # The parent decrypts only when this exact text is in the header, and passes the body through otherwise:
        # this check must be at least as strict as that one, or a reply it takes as clear would get through.
        protocol = self.protocol_string.decode("ascii")
        if f'protocol="{protocol}"' not in content_type:
            return False
        header = email.message.Message()
        header["Content-Type"] = content_type
        return header.get_content_type() == _ENCRYPTED_MEDIA_TYPE
