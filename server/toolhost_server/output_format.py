"""How a call's result is written for its caller: the output format and the filtering of empty fields
(drowcoder's `as_type` and `filter_empty_fields`).

The pipeline applies it after redaction, so a rendering is made of the redacted structured output and holds
nothing the caller does not already get in `structured_output`; the output size limit is applied to the
rendered text afterwards.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .runners.base import RunOutcome


class OutputFormat(enum.Enum):
    """What the caller's `output` holds. DEFAULT is the tool's choice: today, its own text."""

    DEFAULT = "default"
    JSON = "json"
    PRETTY = "pretty"
    TEXT = "text"


@dataclass(frozen=True, slots=True)
class ResultFormat:
    """A call's wishes for its result: the format of `output` and whether empty fields are dropped."""

    output_format: OutputFormat = OutputFormat.DEFAULT
    filter_empty_fields: bool = False

    @property
    def is_default(self) -> bool:
        """Whether the result stays exactly as the tool made it."""
        return self.output_format in _OWN_TEXT and not self.filter_empty_fields


DEFAULT_RESULT_FORMAT = ResultFormat()
# The formats that leave `output` as the tool wrote it.
_OWN_TEXT = frozenset({OutputFormat.DEFAULT, OutputFormat.TEXT})


def without_empty_fields(value: Any) -> Any:
    """`value` with the object fields that are null, "", [] or {} removed, at every depth, including those that
    become empty once their own empty fields are gone. List elements are kept (dropping one would move the
    others), though their insides are filtered; the top-level value itself is returned even when empty."""
    if isinstance(value, dict):
        kept = {}
        for key, item in value.items():
            filtered = without_empty_fields(item)
            if not _is_empty(filtered):
                kept[key] = filtered
        return kept
    if isinstance(value, list):
        return [without_empty_fields(item) for item in value]
    return value


def _is_empty(value: Any) -> bool:
    # Not `not value`: False and 0 are data.
    return value is None or (isinstance(value, str | list | dict) and len(value) == 0)


def rendered(structured: Any, output_format: OutputFormat) -> str | None:
    """The text `structured` renders to in `output_format`, or None when the format keeps the tool's own text.

    The same data always reads the same, whichever way it came: keys are sorted (a structured output that went
    through protobuf, from a remote toolhost, has lost its key order) and a whole number is written without a
    fraction (protobuf carries every number as a double, so 1 comes back from a remote as 1.0; the clients turn
    it back into 1 the same way). Non-ASCII characters are kept: the output is UTF-8 text, and a model reads
    "é" better than "\\u00e9".
    """
    if output_format is OutputFormat.JSON:
        return json.dumps(_whole_numbers(structured), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    if output_format is OutputFormat.PRETTY:
        return json.dumps(_whole_numbers(structured), ensure_ascii=False, sort_keys=True, indent=2)
    return None


# Doubles hold integers exactly up to 2**53; beyond that a whole double is not known to have been an integer.
_EXACT_INTEGER_LIMIT = 2**53


def _whole_numbers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) <= _EXACT_INTEGER_LIMIT:
        return int(value)
    if isinstance(value, dict):
        return {key: _whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(item) for item in value]
    return value


@dataclass(frozen=True, slots=True)
class CutText:
    """A text cut at a byte limit: what was kept, and the size in bytes before the cut (0 when not cut)."""

    text: str
    original_size_bytes: int = 0

    @property
    def truncated(self) -> bool:
        return self.original_size_bytes > 0


def cut_at(text: str, limit: int) -> CutText:
    """`text` within `limit` UTF-8 bytes; a character the limit cuts in two is dropped, as for a process's output."""
    data = text.encode("utf-8", errors="surrogatepass")
    if len(data) <= limit:
        return CutText(text)
    return CutText(data[:limit].decode("utf-8", errors="ignore"), len(data))


def formatted(outcome: RunOutcome, result_format: ResultFormat, limit: int) -> RunOutcome:
    """`outcome` as the caller asked for it: its structured output filtered when asked, and `output` rendered
    from that structured output in a JSON format, cut at `limit` bytes. An outcome without structured output
    is returned as it is: there is nothing to filter or render, and its text is the result.

    Give it the redacted outcome: what it renders is then what the caller sees in `structured_output`.
    """
    if result_format.is_default or outcome.structured is None:
        return outcome
    structured = outcome.structured
    if result_format.filter_empty_fields:
        structured = without_empty_fields(structured)
    text = rendered(structured, result_format.output_format)
    if text is None:
        return dataclasses.replace(outcome, structured=structured)
    cut = cut_at(text, limit)
    # The tool's own stdout is replaced, its cut with it; a cut stderr stays cut.
    stderr_cut = "stderr" in outcome.cut_streams
    return dataclasses.replace(
        outcome, output=cut.text, structured=structured, truncated=cut.truncated or stderr_cut,
        original_size_bytes=max(cut.original_size_bytes, outcome.original_size_bytes if stderr_cut else 0),
        cut_streams=frozenset({"stdout"} if cut.truncated else set()) | (outcome.cut_streams & {"stderr"}))
