"""Turning what powershell.exe writes to stderr into text: CLIXML error records kept, progress dropped.

powershell.exe run with -EncodedCommand writes its non-output streams to stderr as CLIXML:

    #< CLIXML
    <Objs Version="1.1.0.1" xmlns="http://schemas.microsoft.com/powershell/2004/04">
      <Obj S="progress" RefId="0"><TN RefId="0"><T>System.Management.Automation.PSCustomObject</T>...</Obj>
      <S S="Error">Get-ChildItem : Cannot find path 'C:\\nope'_x000D__x000A_</S>
    </Objs>

Progress records ("Preparing modules for first use.") come even when a command succeeds, so they are dropped;
error and warning strings are kept, their `_xHHHH_` escapes decoded. Text that is not CLIXML is kept as it is.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html import unescape
from typing import Final

HEADER: Final = "#< CLIXML"
_NAMESPACE: Final = "{http://schemas.microsoft.com/powershell/2004/04}"
# The streams kept, and the prefix PowerShell's own console puts before each.
_KEPT_STREAMS: Final = {"error": "", "warning": "WARNING: "}
_DOCUMENT: Final = re.compile(r"<Objs\b.*?</Objs>", re.DOTALL)
# A truncated or malformed document: its strings found without a parser.
_STRING: Final = re.compile(r'<S\s+S="([A-Za-z]+)"\s*>(.*?)</S>', re.DOTALL)
_ESCAPE: Final = re.compile(r"_x([0-9A-Fa-f]{4})_")


def stderr_text(stderr: str) -> str:
    """The human text in powershell.exe's stderr: CLIXML decoded to its error and warning lines, else as it is."""
    if not stderr.lstrip().startswith(HEADER):
        return stderr
    body = stderr.lstrip()[len(HEADER):]
    lines: list[str] = []
    for document in _DOCUMENT.findall(body):
        if "<!" in document:  # a DOCTYPE or entity declaration: PowerShell writes none, so no parser sees it
            lines.extend(_kept_strings_unparsed(document))
            continue
        try:
            lines.extend(_kept_strings(ET.fromstring(document)))
        except ET.ParseError:
            lines.extend(_kept_strings_unparsed(document))
    tail = _DOCUMENT.sub("", body)
    if "<Objs" in tail:  # cut short: the last document never closed
        lines.extend(_kept_strings_unparsed(tail[tail.index("<Objs"):]))
    return "".join(lines)


def decode_escapes(text: str) -> str:
    """PowerShell's `_xHHHH_` escapes (XmlConvert.EncodeName style) to characters; a UTF-16 pair becomes one."""
    units = _ESCAPE.sub(lambda match: chr(int(match.group(1), 16)), text)
    return units.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _kept_strings(root: ET.Element) -> list[str]:
    kept = []
    for element in root:
        if element.tag.removeprefix(_NAMESPACE) != "S":
            continue  # Obj: progress records and other objects
        prefix = _KEPT_STREAMS.get(element.get("S", "").lower())
        if prefix is not None:
            kept.append(prefix + decode_escapes(element.text or ""))
    return kept


def _kept_strings_unparsed(text: str) -> list[str]:
    kept = []
    for stream, value in _STRING.findall(text):
        prefix = _KEPT_STREAMS.get(stream.lower())
        if prefix is not None:
            kept.append(prefix + decode_escapes(unescape(value)))
    return kept
