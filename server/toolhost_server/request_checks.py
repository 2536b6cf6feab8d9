"""What a call's request must be before the server does any work with it, whichever surface it came from.

A tool name, a call id and an argument key end up in log lines, audit rows, span attributes and metric labels.
A control character in one forges log lines in the text format, and a NUL byte makes PostgreSQL refuse the
whole batched INSERT it is in; a lone surrogate (valid in JSON text, not in UTF-8) makes every later reader of
the record fail to encode it. Arguments nested without bound exhaust the decoder's recursion. So, before the
call is audited, traced or validated (names and call ids before it is even looked up):

- names and argument keys hold no control character (C0, DEL, C1, the Unicode line and paragraph separators)
  and no lone surrogate;
- a call id is at most 128 characters of `[A-Za-z0-9._:-]`;
- string values hold no lone surrogate (control characters are fine in values: a script's input has newlines);
- numbers are finite: NaN and the infinities, which Python's JSON reader and a Struct let through, are no JSON
  numbers (the validator saw them as null and said so, and inside an object no schema looks into they reached
  the tool);
- arguments are nested at most MAX_ARGUMENT_DEPTH levels.

Each refusal is INVALID_ARGUMENT (InvalidRequestError) saying what is wrong and where, without quoting the bad
text itself.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping
from typing import Any, Final

from .errors import FieldViolation, InvalidArgumentsError, InvalidRequestError

MAX_ARGUMENT_DEPTH: Final = 64
# Where a tool's schema leaves additionalProperties open, at most this many argument keys (or as many as it
# declares properties, if more); beyond it a call is refused before its keys reach any record.
MAX_OPEN_ARGUMENT_KEYS: Final = 256
# What records keep of a call's argument keys: the first 64, each cut at 64 characters, and how many there were.
MAX_RECORDED_KEYS: Final = 64
MAX_RECORDED_KEY_CHARS: Final = 64
MAX_CALL_ID_LENGTH: Final = 128
_CALL_ID: Final = re.compile(rf"[A-Za-z0-9._:-]{{1,{MAX_CALL_ID_LENGTH}}}")
_CONTROL_OR_SURROGATE: Final = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def is_printable(text: str) -> bool:
    """No control character and no lone surrogate: safe in a log line and a database row as it is."""
    return _CONTROL_OR_SURROGATE.search(text) is None


def is_valid_call_id(call_id: str) -> bool:
    return not call_id or _CALL_ID.fullmatch(call_id) is not None


def check_name(name: str) -> None:
    """A tool name that can be logged and stored as it is."""
    found = _CONTROL_OR_SURROGATE.search(name)
    if found is not None:
        raise InvalidRequestError(
            f"name holds {_describe(found.group())} at position {found.start()}: a tool name is printable text "
            "(ListTools shows the names)")


def check_call_id(call_id: str) -> None:
    """An empty call id (the server makes one) or at most 128 characters of letters, digits and `._:-`."""
    if not is_valid_call_id(call_id):
        raise InvalidRequestError(
            f"call_id must be at most {MAX_CALL_ID_LENGTH} characters of letters, digits, '.', '_', ':' and '-' "
            f"(got {len(call_id)} characters, not all of them those); leave it empty and the server makes one")


def check_arguments(arguments: Mapping[str, Any]) -> None:
    """Keys without control characters or lone surrogates, strings without lone surrogates, finite numbers, and
    at most MAX_ARGUMENT_DEPTH levels of nesting. Walks the value once, without recursion."""
    pending: list[tuple[Any, str, int]] = [(arguments, "", 1)]
    while pending:
        value, pointer, depth = pending.pop()
        if isinstance(value, Mapping):
            if depth > MAX_ARGUMENT_DEPTH:
                raise _too_deep(pointer)
            for key, item in value.items():
                found = _CONTROL_OR_SURROGATE.search(key)
                if found is not None:
                    raise InvalidRequestError(
                        f"an argument key in {pointer or 'the arguments'} holds {_describe(found.group())} at "
                        f"position {found.start()}: argument keys are printable text")
                pending.append((item, f"{pointer}/{_escape(key)}", depth + 1))
        elif isinstance(value, list):
            if depth > MAX_ARGUMENT_DEPTH:
                raise _too_deep(pointer)
            pending.extend((item, f"{pointer}/{index}", depth + 1) for index, item in enumerate(value))
        elif isinstance(value, str) and _SURROGATE.search(value) is not None:
            raise InvalidRequestError(
                f"the argument {pointer} holds a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff escape), which "
                "is not text: send the character itself, or both halves of its surrogate pair")
        elif isinstance(value, float) and not math.isfinite(value):
            raise InvalidRequestError(
                f"the argument {pointer} is NaN or an infinity, which JSON has no number for: send a finite number")


def printable(text: str) -> str:
    """`text` with each control character and lone surrogate written as a \\uXXXX escape: how a refused name
    is recorded (the audit record of a refusal must not carry what was refused)."""
    return _CONTROL_OR_SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


def recorded_keys(arguments: Mapping[str, Any]) -> tuple[str, ...]:
    """The argument keys that audit records and spans keep: at most MAX_RECORDED_KEYS, each at most
    MAX_RECORDED_KEY_CHARS, printable, sorted. Bounded whatever the request holds (a caller with no rights could
    otherwise copy hundreds of thousands of keys into every record)."""
    kept = itertools.islice(arguments, MAX_RECORDED_KEYS)
    return tuple(sorted(printable(key)[:MAX_RECORDED_KEY_CHARS] for key in kept))


def check_key_count(tool: str, arguments: Mapping[str, Any], schema: Mapping[str, Any]) -> None:
    """No argument the tool's schema does not declare, where it allows no others, and at most
    MAX_OPEN_ARGUMENT_KEYS where it does: checked before the arguments are walked or validated, so that a
    request with a huge number of keys costs little and leaves only their count in the records."""
    declared = schema.get("properties")
    properties = declared if isinstance(declared, Mapping) else {}
    if schema.get("additionalProperties", True) is False:
        # A few unknown keys are the validator's to report, with every other problem of the call.
        if len(arguments) <= len(properties) + MAX_REPORTED_UNKNOWN:
            return
        unknown = sorted(printable(key)[:MAX_RECORDED_KEY_CHARS] for key in arguments.keys() - properties.keys())
        known = ", ".join(sorted(properties))
        raise InvalidArgumentsError(tool, [
            FieldViolation(f"/{_escape(key)}", f"unknown argument; the arguments are: {known}")
            for key in unknown[:MAX_REPORTED_UNKNOWN]])
    limit = max(len(properties), MAX_OPEN_ARGUMENT_KEYS)
    if len(arguments) > limit:
        raise InvalidRequestError(
            f"the call has {len(arguments)} argument keys, more than tool {tool!r} takes ({limit}); GetTool "
            f"shows its parameters")


# A request with thousands of unknown keys gets this many of them named: enough to see the mistake.
MAX_REPORTED_UNKNOWN = 16


def _too_deep(pointer: str) -> InvalidRequestError:
    return InvalidRequestError(
        f"the arguments are nested more than {MAX_ARGUMENT_DEPTH} levels deep (at {pointer or '/'}); flatten them")


def _describe(character: str) -> str:
    code = ord(character)
    if 0xD800 <= code <= 0xDFFF:
        return f"a lone UTF-16 surrogate (U+{code:04X})"
    return f"a control character (U+{code:04X})"


def _escape(key: str) -> str:
    """A key as a JSON pointer token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")
