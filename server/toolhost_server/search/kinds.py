"""What kind of file a file is (document, image, video, audio, pdf, code), from its name and its first bytes.

The seed's kinds are Spotlight's UTI groups. Here the content decides when its first bytes carry a known
signature (a PNG renamed .txt is an image), and the extension decides otherwise: text formats have no
signature, and a .docx is a ZIP whose kind only its name tells. bench/findings/file_kinds.md measured this
table against python-magic (libmagic) and `filetype` on a generated tree and says why no library is used.
"""

from __future__ import annotations

import os
from typing import Final

KINDS: Final = ("document", "image", "video", "audio", "pdf", "code")
OTHER: Final = "other"
HEAD_BYTES: Final = 8192  # what classify and is_text look at

_DOCUMENT: Final = {
    ".txt": "text/plain", ".text": "text/plain", ".md": "text/markdown", ".markdown": "text/markdown",
    ".rst": "text/x-rst", ".adoc": "text/asciidoc", ".org": "text/org", ".tex": "text/x-tex",
    ".rtf": "application/rtf", ".csv": "text/csv", ".tsv": "text/tab-separated-values",
    ".doc": "application/msword", ".dot": "application/msword",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".xls": "application/vnd.ms-excel",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".ppt": "application/vnd.ms-powerpoint",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".odt": "application/vnd.oasis.opendocument.text",
    ".ods": "application/vnd.oasis.opendocument.spreadsheet",
    ".odp": "application/vnd.oasis.opendocument.presentation",
    ".pages": "application/vnd.apple.pages", ".numbers": "application/vnd.apple.numbers",
    ".epub": "application/epub+zip",
    ".html": "text/html", ".htm": "text/html", ".xhtml": "application/xhtml+xml", ".log": "text/plain",
}
_IMAGE: Final = {
    ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
    ".webp": "image/webp", ".bmp": "image/bmp", ".tif": "image/tiff", ".tiff": "image/tiff",
    ".ico": "image/vnd.microsoft.icon", ".svg": "image/svg+xml", ".heic": "image/heic", ".heif": "image/heif",
    ".avif": "image/avif", ".psd": "image/vnd.adobe.photoshop", ".raw": "image/x-raw", ".cr2": "image/x-canon-cr2",
    ".nef": "image/x-nikon-nef", ".dng": "image/x-adobe-dng",
}
_VIDEO: Final = {
    ".mp4": "video/mp4", ".m4v": "video/x-m4v", ".mov": "video/quicktime", ".mkv": "video/x-matroska",
    ".webm": "video/webm", ".avi": "video/x-msvideo", ".wmv": "video/x-ms-wmv", ".flv": "video/x-flv",
    ".mpg": "video/mpeg", ".mpeg": "video/mpeg", ".3gp": "video/3gpp", ".m2ts": "video/mp2t",
    ".ogv": "video/ogg",
}
_AUDIO: Final = {
    ".mp3": "audio/mpeg", ".wav": "audio/wav", ".flac": "audio/flac", ".ogg": "audio/ogg", ".oga": "audio/ogg",
    ".opus": "audio/opus", ".m4a": "audio/mp4", ".aac": "audio/aac", ".wma": "audio/x-ms-wma",
    ".aiff": "audio/aiff", ".aif": "audio/aiff", ".mid": "audio/midi", ".midi": "audio/midi",
}
_CODE: Final = {
    ".py": "text/x-python", ".pyi": "text/x-python", ".js": "text/javascript", ".mjs": "text/javascript",
    ".cjs": "text/javascript", ".jsx": "text/javascript", ".ts": "text/x-typescript", ".tsx": "text/x-typescript",
    ".mts": "text/x-typescript", ".go": "text/x-go", ".rs": "text/x-rust", ".c": "text/x-c",
    ".h": "text/x-c", ".cc": "text/x-c++", ".cpp": "text/x-c++", ".cxx": "text/x-c++", ".hpp": "text/x-c++",
    ".hh": "text/x-c++", ".java": "text/x-java", ".kt": "text/x-kotlin", ".kts": "text/x-kotlin",
    ".scala": "text/x-scala", ".swift": "text/x-swift", ".m": "text/x-objcsrc", ".mm": "text/x-objcsrc",
    ".cs": "text/x-csharp", ".fs": "text/x-fsharp", ".rb": "text/x-ruby", ".php": "text/x-php",
    ".pl": "text/x-perl", ".pm": "text/x-perl", ".lua": "text/x-lua", ".r": "text/x-r", ".jl": "text/x-julia",
    ".sh": "text/x-shellscript", ".bash": "text/x-shellscript", ".zsh": "text/x-shellscript",
    ".fish": "text/x-shellscript", ".ps1": "text/x-powershell", ".bat": "text/x-msdos-batch",
    ".sql": "application/sql", ".css": "text/css", ".scss": "text/x-scss", ".less": "text/x-less",
    ".vue": "text/x-vue", ".svelte": "text/x-svelte", ".json": "application/json", ".yaml": "application/yaml",
    ".yml": "application/yaml", ".toml": "application/toml", ".xml": "application/xml", ".ini": "text/plain",
    ".cfg": "text/plain", ".proto": "text/x-protobuf", ".hs": "text/x-haskell", ".ml": "text/x-ocaml",
    ".ex": "text/x-elixir", ".exs": "text/x-elixir", ".erl": "text/x-erlang", ".clj": "text/x-clojure",
    ".dart": "text/x-dart", ".zig": "text/x-zig", ".nim": "text/x-nim", ".tf": "text/x-terraform",
    ".gradle": "text/x-groovy", ".groovy": "text/x-groovy", ".mk": "text/x-makefile", ".cmake": "text/x-cmake",
    ".ipynb": "application/x-ipynb+json",
}
_PDF: Final = {".pdf": "application/pdf"}
# Names that are code whatever their (missing) extension.
_CODE_NAMES: Final = {"makefile": "text/x-makefile", "dockerfile": "text/x-dockerfile",
                      "containerfile": "text/x-dockerfile", "jenkinsfile": "text/x-groovy",
                      "cmakelists.txt": "text/x-cmake", "gemfile": "text/x-ruby", "rakefile": "text/x-ruby",
                      "justfile": "text/x-makefile"}

_BY_EXTENSION: Final[dict[str, tuple[str, str]]] = {
    extension: (kind, mime)
    for kind, table in (("document", _DOCUMENT), ("image", _IMAGE), ("video", _VIDEO), ("audio", _AUDIO),
                        ("code", _CODE), ("pdf", _PDF))
    for extension, mime in table.items()
}

# Signatures at offset 0: (prefix, kind, mime). Checked in order; the first that matches wins.
_SIGNATURES: Final = (
    (b"%PDF-", "pdf", "application/pdf"),
    (b"\x89PNG\r\n\x1a\n", "image", "image/png"),
    (b"\xff\xd8\xff", "image", "image/jpeg"),
    (b"GIF87a", "image", "image/gif"),
    (b"GIF89a", "image", "image/gif"),
    (b"BM", "image", "image/bmp"),
    (b"II*\x00", "image", "image/tiff"),
    (b"MM\x00*", "image", "image/tiff"),
    (b"\x00\x00\x01\x00", "image", "image/vnd.microsoft.icon"),
    (b"8BPS", "image", "image/vnd.adobe.photoshop"),
    (b"\x1aE\xdf\xa3", "video", "video/x-matroska"),  # EBML: Matroska or WebM (told apart below)
    (b"\x00\x00\x01\xba", "video", "video/mpeg"),
    (b"\x00\x00\x01\xb3", "video", "video/mpeg"),
    (b"FLV\x01", "video", "video/x-flv"),
    (b"0&\xb2u\x8ef\xcf\x11", "video", "video/x-ms-asf"),
    (b"ID3", "audio", "audio/mpeg"),
    (b"fLaC", "audio", "audio/flac"),
    (b"OggS", "audio", "audio/ogg"),
    (b"MThd", "audio", "audio/midi"),
    (b"{\\rtf", "document", "application/rtf"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "document", "application/x-ole-storage"),  # .doc/.xls/.ppt
)
# MP4 family: "ftyp" at offset 4, then a brand.
_AUDIO_BRANDS: Final = (b"M4A ", b"M4B ", b"M4P ", b"F4A ")
_IMAGE_BRANDS: Final = {b"heic": "image/heic", b"heix": "image/heic", b"mif1": "image/heif",
                        b"avif": "image/avif"}
_QUICKTIME_BRAND: Final = b"qt  "
# The bytes of text besides printable characters: tab, newline, vertical tab, form feed, carriage return, escape,
# backspace. Other control bytes in the head are taken for binary beyond this share.
_BINARY_CONTROLS: Final = bytes(byte for byte in range(0x20) if byte not in b"\t\n\x0b\x0c\r\x1b\x08")
_MAX_CONTROL_SHARE: Final = 0.05


def classify(name: str, head: bytes) -> tuple[str, str]:
    """(kind, mime) of a file from its name and its first bytes (up to 8 KiB): kind one of KINDS or "other".

    `head` empty (an empty or unreadable file) classifies by the name alone."""
    by_content = _by_signature(head)
    by_name = _by_name(name)
    if by_content is not None:
        kind, mime = by_content
        # Containers that the name refines: an OLE2 or ZIP office file, an MPEG-4 that is audio.
        if mime == "application/x-ole-storage":
            return by_name if by_name is not None and by_name[0] == "document" else (OTHER, mime)
        if mime == "video/x-matroska" and name.lower().endswith(".webm"):
            return "video", "video/webm"
        return kind, mime
    if head.startswith(b"PK\x03\x04"):
        # A ZIP: .docx, .xlsx, .odt, .epub are documents by their name; any other is an archive.
        if by_name is not None and by_name[0] == "document":
            return by_name
        return OTHER, "application/zip"
    if by_name is not None:
        kind, mime = by_name
        # A name that promises a binary format with text inside it (a .png that is text) is taken as text.
        if head and kind in ("image", "video", "audio", "pdf") and is_text(head) and mime != "image/svg+xml":
            return OTHER, "text/plain"
        return by_name
    if head.startswith(b"#!"):
        return "code", _interpreter_mime(head)
    if head and is_text(head):
        return OTHER, "text/plain"
    if not head:
        return OTHER, "application/octet-stream" if "." in name.strip(".") else "inode/x-empty"
    return OTHER, "application/octet-stream"


def is_text(head: bytes) -> bool:
    """Whether the first bytes of a file look like text: no NUL byte and few control bytes (UTF-8, Latin-1 and
    other 8-bit text pass; compressed or encoded data has about one control byte in eight)."""
    if b"\x00" in head:
        return False
    controls = len(head) - len(head.translate(None, _BINARY_CONTROLS))
    return controls <= len(head) * _MAX_CONTROL_SHARE


def _by_name(name: str) -> tuple[str, str] | None:
    lowered = name.lower()
    special = _CODE_NAMES.get(lowered)
    if special is not None:
        return "code", special
    extension = os.path.splitext(lowered)[1]
    return _BY_EXTENSION.get(extension) if extension else None


def _by_signature(head: bytes) -> tuple[str, str] | None:
    for prefix, kind, mime in _SIGNATURES:
        if head.startswith(prefix):
            return kind, mime
    if head[:4] == b"RIFF" and len(head) >= 12:
        form = head[8:12]
        if form == b"WEBP":
            return "image", "image/webp"
        if form == b"WAVE":
            return "audio", "audio/wav"
        if form == b"AVI ":
            return "video", "video/x-msvideo"
    if head[4:8] == b"ftyp" and len(head) >= 12:
        brand = head[8:12]
        if brand in _AUDIO_BRANDS:
            return "audio", "audio/mp4"
        if brand in _IMAGE_BRANDS:
            return "image", _IMAGE_BRANDS[brand]
        return "video", "video/quicktime" if brand == _QUICKTIME_BRAND else "video/mp4"
    if len(head) > 376 and head[0] == head[188] == head[376] == 0x47:
        return "video", "video/mp2t"  # MPEG transport stream: a sync byte every 188 bytes
    if len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0 and head[1] & 0x06 != 0:
        # An MPEG audio frame sync (an MP3 without an ID3 tag): text never starts with 0xFF.
        return "audio", "audio/mpeg"
    return None


def _interpreter_mime(head: bytes) -> str:
    line = head.split(b"\n", 1)[0].decode("utf-8", "replace")
    for word, mime in (("python", "text/x-python"), ("node", "text/javascript"), ("ruby", "text/x-ruby"),
                       ("perl", "text/x-perl"), ("php", "text/x-php")):
        if word in line:
            return mime
    return "text/x-shellscript"
