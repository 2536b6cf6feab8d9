"""What the index holds of one file: its metadata, its kind, and for a text file its text, redacted.

The text passes through the server's redactor before it reaches the index (or a fallback walk's matcher), so a
credential in a file is never stored and cannot be found by its first letters. A text cut at the size limit
ends before anything that could be the first part of a secret (Redactor.safe_end), for the same reason.
A file the server may not read is kept by its metadata, its kind told by its name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..sanitize import Redactor
from .kinds import HEAD_BYTES, classify, is_text
from .tree import open_for_reading

_READ_CHUNK = 256 * 1024


@dataclass(frozen=True, slots=True)
class FileRecord:
    """One file as the index stores it; `text` None for a binary or unreadable file."""

    path: str  # absolute, under the root as configured
    root: str
    name: str
    size: int
    modified: float
    changed: float
    kind: str
    mime: str
    signature: str
    text: str | None


def signature_of(st: os.stat_result) -> str:
    """What changes whenever the file may have: identity, size, content time and status time (a chmod that
    makes an unreadable file readable changes the last)."""
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def extract(directory_fd: int, name: str, st: os.stat_result, *, root: str, path: str, max_text_bytes: int,
            redactor: Redactor, with_text: bool = True) -> FileRecord | None:
    """The record of the regular file `name` in the open directory; None when it is gone or replaced since
    `st` was taken. `with_text` false reads only the first bytes, for the kind."""
    text: str | None = None
    try:
        fd = open_for_reading(directory_fd, name, st)
    except FileNotFoundError:
        return None
    except OSError:
        kind, mime = classify(name, b"")  # unreadable: metadata and the name's kind only
    else:
        try:
            head = os.read(fd, HEAD_BYTES)
            kind, mime = classify(name, head)
            if with_text and head and is_text(head):
                text = _text(fd, head, max_text_bytes, redactor)
        except OSError:
            kind, mime = classify(name, b"")
        finally:
            os.close(fd)
    return FileRecord(path=path, root=root, name=name, size=st.st_size, modified=st.st_mtime,
                      changed=st.st_ctime, kind=kind, mime=mime, signature=signature_of(st), text=text)


def _text(fd: int, head: bytes, max_text_bytes: int, redactor: Redactor) -> str:
    chunks = [head[:max_text_bytes]]
    held = len(chunks[0])
    while held < max_text_bytes:
        chunk = os.read(fd, min(_READ_CHUNK, max_text_bytes - held))
        if not chunk:
            break
        chunks.append(chunk)
        held += len(chunk)
    cut = held >= max_text_bytes and bool(os.read(fd, 1))
    text = b"".join(chunks).decode("utf-8", "replace")
    if cut:
        text = text[:redactor.safe_end(text)]
    return redactor.redact_text(text).value
