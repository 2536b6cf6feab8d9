"""What windows_list_directory makes of the script's output (windows/powershell.py): entries read defensively,
since a host an asset names may be anyone's and answer anything, and PowerShell's errors told apart.

The script prints base64 of UTF-8 JSON, a list of {name, type, size, modified}; every part is checked (types,
lengths, counts, dates) and anything else is an InvalidListingError, never a half-read listing. The output's
size and the JSON's shape are bounded by what MAX_ENTRIES + 1 real entries take before json.loads builds anything.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

from .powershell import MAX_ENTRIES, NOT_A_DIRECTORY_EXIT, SCRIPT_ERROR_EXIT

EntryType = Literal["file", "directory"]

# A name is at most 255 UTF-16 units on every file system a drive path reaches (NTFS, ReFS, FAT, exFAT, UDF).
MAX_NAME_UTF16_UNITS: Final = 255
# ToString('o') of a UTC time is 28 characters; a little room for another writer's fraction digits.
MAX_MODIFIED_CHARS: Final = 40
# Entries the script prints at most (its Select-Object -First).
SCRIPT_ENTRIES: Final = MAX_ENTRIES + 1

# How much output MAX_ENTRIES + 1 real entries need at most, from the limits above, so that a host cannot make
# the tool hold more than that:
# - a name's UTF-16 unit takes at most 6 bytes of JSON: Windows PowerShell 5.1 writes ' < > & as \u0027 and
#   the like, and a character outside the BMP is two units, each at most a \uXXXX escape (else 4 bytes of UTF-8
#   for both);
# - every other field at its longest (the longer type, a size of 19 digits, MAX_MODIFIED_CHARS), as
#   ConvertTo-Json -Compress writes it;
# - a comma after each entry, and the brackets;
# - then base64 (4 characters per 3 bytes), with a line break (CRLF) every 76 characters, which parse_listing
#   skips as a host that wraps its output would send them.
_MAX_BYTES_PER_NAME_UNIT: Final = 6
_LONGEST_FRAME: Final = json.dumps({"name": "", "type": "directory", "size": 2**63 - 1,
                                    "modified": "0" * MAX_MODIFIED_CHARS}, separators=(",", ":"))
MAX_ENTRY_JSON_BYTES: Final = len(_LONGEST_FRAME) + MAX_NAME_UTF16_UNITS * _MAX_BYTES_PER_NAME_UNIT
MAX_LISTING_JSON_BYTES: Final = SCRIPT_ENTRIES * (MAX_ENTRY_JSON_BYTES + 1) + 1
_MAX_BASE64_CHARS: Final = 4 * math.ceil(MAX_LISTING_JSON_BYTES / 3)
MAX_LISTING_OUTPUT_BYTES: Final = _MAX_BASE64_CHARS + 2 * math.ceil(_MAX_BASE64_CHARS / 76)

# A JSON string, escapes included; never fails (an unclosed string runs to the end), so a hostile document
# cannot make the scan try again at each later quote. On valid JSON it finds exactly the strings.
_JSON_STRING: Final = re.compile(rb'"(?:[^"\\]++|\\.?)*+"?', re.DOTALL)
# Quotes of one entry: its four keys, and its name, type and modified values.
_QUOTES_PER_ENTRY: Final = 14
_BASE64_WHITESPACE: Final = b" \t\r\n\x0b\x0c"

# A reply's error text quoted in a failure message, in characters, after escaping.
MAX_ERROR_CHARS: Final = 300

# .NET exception types the script reports (the first line of its stderr) that say more than "it failed".
_PATH_NOT_FOUND_TYPES: Final = frozenset({
    "System.Management.Automation.ItemNotFoundException",
    "System.Management.Automation.DriveNotFoundException",
    "System.IO.DirectoryNotFoundException",
    "System.IO.FileNotFoundException",
    "System.IO.DriveNotFoundException",
})
_ACCESS_DENIED_TYPES: Final = frozenset({
    "System.UnauthorizedAccessException",
    "System.Security.SecurityException",
})


class InvalidListingError(ValueError):
    """The script's output is not what the script prints: the host runs something else, or the reply was cut."""


@dataclass(frozen=True, slots=True)
class DirectoryEntry:
    """One entry: `size` in bytes (None for a directory), `modified` ISO 8601 in UTC ("...Z")."""

    name: str
    type: EntryType
    size: int | None
    modified: str

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "size": self.size, "modified": self.modified}


@dataclass(frozen=True, slots=True)
class DirectoryListing:
    """The entries read, at most MAX_ENTRIES; `truncated` when the host had more."""

    entries: tuple[DirectoryEntry, ...]
    truncated: bool


@dataclass(frozen=True, slots=True)
class RemoteError:
    """Why the script failed: a failure code and a message fit to quote (bounded, control characters escaped)."""

    code: str
    message: str


def parse_listing(stdout: str, max_entries: int = MAX_ENTRIES) -> DirectoryListing:
    """The entries the script printed; InvalidListingError saying what is wrong with the output.

    Output larger, or JSON shaped otherwise, than MAX_ENTRIES + 1 entries can be is refused before json.loads,
    which would otherwise build an object for every `{}` or `[]` of a hostile document (hundreds of MiB)."""
    if len(stdout) > MAX_LISTING_OUTPUT_BYTES:
        raise InvalidListingError(f"the host's output has {len(stdout)} characters, more than the "
                                  f"{MAX_LISTING_OUTPUT_BYTES} the listing script prints at most")
    try:
        encoded = stdout.encode("ascii").translate(None, _BASE64_WHITESPACE)
        raw = base64.b64decode(encoded, validate=True)
    except (UnicodeEncodeError, binascii.Error, ValueError):
        raise InvalidListingError("the host's output is not the base64 the listing script prints") from None
    del encoded
    _check_shape(raw)
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise InvalidListingError("the host's output does not hold the JSON the listing script prints") from None
    if not isinstance(document, list):
        raise InvalidListingError(f"the host's output holds a JSON {type(document).__name__}, not the list of "
                                  "entries the listing script prints")
    entries = tuple(_entry(item, index) for index, item in enumerate(document[:max_entries]))
    return DirectoryListing(entries, truncated=len(document) > max_entries)


def _check_shape(raw: bytes) -> None:
    """InvalidListingError unless `raw`, its strings left out, can be one list of at most SCRIPT_ENTRIES objects
    of four fields: what json.loads then builds is bounded by those counts, not by the output's size."""
    if len(raw) > MAX_LISTING_JSON_BYTES:
        raise InvalidListingError(f"the host's output holds {len(raw)} bytes of JSON, more than the "
                                  f"{MAX_LISTING_JSON_BYTES} that {SCRIPT_ENTRIES} entries take at most")
    # Windows file names hold no '"': each entry has the 14 of its keys and three string values. This also
    # bounds the strings the scan below steps over.
    quotes, most = raw.count(b'"'), _QUOTES_PER_ENTRY * SCRIPT_ENTRIES
    if quotes > most:
        raise InvalidListingError(f"the host's output holds {quotes} quote characters, more than the {most} of "
                                  f"{SCRIPT_ENTRIES} entries (no Windows file name holds one)")
    if _shape_refusal(raw):
        # Names may hold '{', '[' and ',': count again without the strings. UTF-8 never puts '"' or '\\'
        # inside a multi-byte character, so the scan may run on the bytes.
        refusal = _shape_refusal(_JSON_STRING.sub(b"", raw))
        if refusal:
            raise InvalidListingError(refusal)


def _shape_refusal(structure: bytes) -> str:
    objects, lists, commas = structure.count(b"{"), structure.count(b"["), structure.count(b",")
    if objects > SCRIPT_ENTRIES:
        return (f"the host's output holds {objects} JSON objects, more than the {SCRIPT_ENTRIES} entries the "
                "listing script prints at most")
    if lists > 1:
        return "the host's output nests JSON lists, which the listing script never prints"
    # Four fields an entry (three commas inside), and one comma between entries.
    if commas > 4 * SCRIPT_ENTRIES:
        return f"the host's output holds more JSON values than {SCRIPT_ENTRIES} entries of four fields"
    return ""


def _entry(item: Any, index: int) -> DirectoryEntry:
    where = f"entry {index}"
    if not isinstance(item, dict) or set(item) != {"name", "type", "size", "modified"}:
        raise InvalidListingError(f"{where} is not an object of name, type, size and modified")
    name, kind, size, modified = item["name"], item["type"], item["size"], item["modified"]
    if not isinstance(name, str) or not name or _utf16_units(name) > MAX_NAME_UTF16_UNITS:
        raise InvalidListingError(f"{where}: the name is not a string of 1 to {MAX_NAME_UTF16_UNITS} UTF-16 units")
    if kind == "directory":
        if size is not None:
            raise InvalidListingError(f"{where}: a directory with a size")
    elif kind == "file":
        # bool is an int to Python, not to JSON's writer.
        if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size < 2**63:
            raise InvalidListingError(f"{where}: a file without a size in bytes")
    else:
        raise InvalidListingError(f"{where}: the type is neither file nor directory")
    return DirectoryEntry(name, kind, size, _utc_iso(modified, where))


def _utf16_units(text: str) -> int:
    # A character outside the BMP is two units (a surrogate pair), as the file system counts it.
    return len(text) + sum(1 for char in text if char > "\uffff")


def _utc_iso(value: Any, where: str) -> str:
    """PowerShell's round-trip form (2024-01-15T10:30:00.1234567Z) as Python's ISO 8601 in UTC, microseconds."""
    if not isinstance(value, str) or len(value) > MAX_MODIFIED_CHARS:
        raise InvalidListingError(f"{where}: the modification time is not an ISO 8601 string")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidListingError(f"{where}: the modification time is not an ISO 8601 string") from None
    if moment.tzinfo is None:
        raise InvalidListingError(f"{where}: the modification time has no time zone")
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def remote_error(exit_code: int, errors: str) -> RemoteError:
    """What the script's exit status and stderr say went wrong on the host."""
    if exit_code == NOT_A_DIRECTORY_EXIT:
        return RemoteError("NOT_A_DIRECTORY", "the path names something other than a directory of the file system "
                                              "(a file, or an item of the registry, Env: or another provider)")
    kind, _, message = errors.strip().partition("\n")
    if exit_code == SCRIPT_ERROR_EXIT and message:
        code = ("PATH_NOT_FOUND" if kind in _PATH_NOT_FOUND_TYPES else
                "ACCESS_DENIED" if kind in _ACCESS_DENIED_TYPES else "REMOTE_ERROR")
        return RemoteError(code, f"PowerShell on the host: {quotable(message.strip())}")
    said = f": {quotable(errors.strip())}" if errors.strip() else " and wrote no error"
    return RemoteError("REMOTE_ERROR", f"the listing script ended with exit status {exit_code}{said}")


def quotable(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """`text` for a message: control and format characters (ESC, bidirectional overrides) as \\u escapes, newlines
    as \\n, cut to `limit` characters with "…"."""
    shown = "".join(ch if ch.isprintable() else json.dumps(ch)[1:-1] if ch < "\x80" else f"\\u{ord(ch):04x}"
                    for ch in text[:limit * 2])
    return shown if len(shown) <= limit else shown[:limit - 1] + "…"


def shown_name(name: str) -> str:
    """An entry's name for the text output: as it is, or JSON-quoted (ASCII) when it holds what a terminal would
    obey or what would hide its ends (control characters, bidirectional overrides, surrounding spaces)."""
    return name if name.isprintable() and name == name.strip() else json.dumps(name)


def entry_lines(entries: Sequence[DirectoryEntry]) -> list[str]:
    """One line per entry: size (<DIR> for a directory), modification time, name."""
    return [entry_line(entry) for entry in entries]


def entry_line(entry: DirectoryEntry) -> str:
    size = "<DIR>" if entry.size is None else f"{entry.size:,}"
    return f"{size:>17}  {entry.modified}  {shown_name(entry.name)}"
