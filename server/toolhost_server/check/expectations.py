"""Whether a call's outcome is what its example expects (model.ExampleExpectation), and if not, why."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..model import NO_DEFAULT, ExampleExpectation

# How much of an unexpected value a problem quotes: enough to recognise it, not a page of output.
_QUOTED_CHARACTERS = 80


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """How one call ended. `success` is False both for a tool that ran and failed (`error_code` such as
    NON_ZERO_EXIT) and for a call the server refused (`refused`: `error_code` is the gRPC status, e.g.
    NOT_FOUND). `structured_output` is NO_DEFAULT when the tool returned none."""

    success: bool
    output: str = ""
    structured_output: Any = NO_DEFAULT
    error_code: str = ""
    error_message: str = ""
    refused: bool = False


def unmet(expect: ExampleExpectation, outcome: CallOutcome) -> list[str]:
    """What of `expect` the outcome does not meet, one sentence each; empty when it meets all of it."""
    problems = []
    if outcome.success != expect.success:
        if outcome.success:
            problems.append("the call succeeded, but the example expects it to fail")
        else:
            how = "the server refused the call" if outcome.refused else "the call failed"
            problems.append(f"{how}: {outcome.error_code}: {outcome.error_message}".rstrip(": "))
    # On a failure the error message counts as output: an example may expect a failure that names its cause.
    text = outcome.output if outcome.success else f"{outcome.output}\n{outcome.error_message}"
    if expect.output_contains and expect.output_contains not in text:
        problems.append(f"the output does not contain {_quoted(expect.output_contains)}")
    if expect.structured_subset is not NO_DEFAULT:
        if outcome.structured_output is NO_DEFAULT:
            problems.append("the call returned no structured output, but the example expects one")
        else:
            mismatch = subset_mismatch(outcome.structured_output, expect.structured_subset)
            if mismatch:
                problems.append(f"the structured output {mismatch}")
    return problems


def subset_mismatch(actual: Any, subset: Any, pointer: str = "") -> str:
    """Where `actual` fails to contain `subset` ("" when it does), the place given as a JSON pointer.

    An object contains another when it has each of its keys with a value that contains that key's value; an
    array contains another when that one's items are contained by items of it, in the same order (others may
    come between); any other value only itself. Numbers compare by value (1 is 1.0), never with a boolean."""
    where = pointer or "/"
    if isinstance(subset, dict):
        if not isinstance(actual, dict):
            return f"at {where} is {_kind(actual)}, not an object"
        for key, value in subset.items():
            child = f"{pointer}/{_escaped(key)}"
            if key not in actual:
                return f"lacks {child}"
            mismatch = subset_mismatch(actual[key], value, child)
            if mismatch:
                return mismatch
        return ""
    if isinstance(subset, list):
        if not isinstance(actual, list):
            return f"at {where} is {_kind(actual)}, not an array"
        position = 0
        for index, wanted in enumerate(subset):
            while position < len(actual) and subset_mismatch(actual[position], wanted, where):
                position += 1
            if position == len(actual):
                return f"at {where} has no item containing {_quoted(wanted)} (expected item {index}, in order)"
            position += 1
        return ""
    if _same_scalar(actual, subset):
        return ""
    return f"at {where} is {_quoted(actual)}, not {_quoted(subset)}"


def _same_scalar(actual: Any, expected: Any) -> bool:
    if isinstance(actual, bool) or isinstance(expected, bool):
        return isinstance(actual, bool) and isinstance(expected, bool) and actual == expected
    if isinstance(actual, (int, float)) and isinstance(expected, (int, float)):
        return actual == expected
    return type(actual) is type(expected) and actual == expected


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return _quoted(value)


def _escaped(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _quoted(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= _QUOTED_CHARACTERS else text[: _QUOTED_CHARACTERS - 1] + "\N{HORIZONTAL ELLIPSIS}"
