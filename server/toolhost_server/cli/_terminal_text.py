"""Text that others wrote, made safe to print on a terminal: control characters shown as escapes, not obeyed.

A user tool's description, system prompt and script are written by whoever holds manage_tools; a catalog's tool
descriptions by whoever writes the catalog; a tool's output and failure message by the tool. Printed raw, an
ESC or a C1 control starts a sequence the terminal obeys: colours that hide text, a title, OSC 52 that writes the
reader's clipboard, a carriage return that overwrites the line a reviewer reads. Bidirectional overrides make a
script read differently from what bash runs ("Trojan Source"). Each of these is shown as an escape instead
(`\\x1b`, `\\u202e`); newlines and tabs stay. Output that goes to a file or a pipe is left byte for byte.
"""

from __future__ import annotations

import codecs
import re
import sys
from typing import TextIO

# C0 but \t and \n, DEL, C1; and the bidirectional marks, embeddings, overrides and isolates.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def escaped(text: str) -> str:
    """`text` with each control character, but \\n and \\t, written as a visible escape."""
    return _UNSAFE.sub(_escape, text)


def json_escaped(text: str) -> str:
    """`text` with the characters `escaped` shows written as JSON escapes (\\u001b) instead: as visible, and JSON
    text stays JSON that parses to the same values (json.dumps escapes C0 itself, not DEL, C1 or the bidi marks).
    For text that may be JSON without saying so, such as a tool's output."""
    return _UNSAFE.sub(_json_escape, text)


def is_terminal(stream: TextIO | None = None) -> bool:
    stream = stream if stream is not None else sys.stdout
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no such method, or closed
        return False


class TerminalText:
    """Shows text for stdout: escaped when stdout is a terminal, as it is otherwise.

        shown = TerminalText.for_stdout()
        print(shown(tool.description))
        print(shown.json(json_text(tool.to_dict())))
    """

    def __init__(self, terminal: bool) -> None:
        self.terminal = terminal

    @classmethod
    def for_stdout(cls) -> TerminalText:
        return cls(is_terminal())

    @classmethod
    def for_stderr(cls) -> TerminalText:
        """For messages to stderr, which may be a terminal while stdout goes to a file, or the other way."""
        return cls(is_terminal(sys.stderr))

    def __call__(self, text: str) -> str:
        return escaped(text) if self.terminal else text

    def json(self, text: str) -> str:
        """JSON text, or text that may be JSON, shown as `json_escaped` shows it."""
        return json_escaped(text) if self.terminal else text


class ShownStream:
    """Writes output bytes to `target` as they come: as they are, or, on a terminal, decoded and escaped (the JSON
    way with `json`: for output that may be JSON).

        shown = ShownStream(sys.stdout, json=True)
        for data in chunks:
            shown.write(data)
        shown.close()

    On a terminal the bytes are read as UTF-8: a character split between two chunks is joined first, and bytes
    that are no UTF-8 show as U+FFFD (a lone 0x9b byte is a CSI to a terminal that is not in UTF-8 mode).
    """

    def __init__(self, target: TextIO, json: bool = False) -> None:
        self._target = target
        self._escape = json_escaped if json else escaped
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace") if is_terminal(target) else None

    def write(self, data: bytes) -> None:
        if self._decoder is None:
            self._target.buffer.write(data)
        else:
            self._target.write(self._escape(self._decoder.decode(data)))
        self._target.flush()

    def close(self) -> None:
        """Write what an unfinished character at the end left (as U+FFFD)."""
        if self._decoder is not None:
            self._target.write(self._escape(self._decoder.decode(b"", final=True)))
