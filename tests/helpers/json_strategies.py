"""Hypothesis strategies for odd JSON, shared by the fuzz suites (tests/fuzz): the values and texts a hostile or
careless caller sends, weighted towards what has broken parsers before.

- `odd_text`: any characters, with control characters, line separators and lone surrogates made likely;
- `json_values`: JSON values of every kind, with huge and boundary integers, NaN, the infinities and -0.0;
- `nested`: a value nested hundreds of levels deep;
- `json_texts`: text for a JSON parser: valid JSON of those values, cut short, with a 5000-digit number,
  thousands of brackets, or any text at all.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

# What text fields have choked on: C0 controls with NUL, DEL, C1, the line and paragraph separators, lone UTF-16
# surrogates of both halves, a byte order mark, a right-to-left override, the last code point.
ODD_CHARACTERS = ("\x00", "\x01", "\n", "\r", "\x1b", "\x7f", "\x85", "\x9f", "\u2028", "\u2029", "\ud800",
                  "\udbff", "\udc00", "\udfff", "\ufeff", "\u202e", "\U0010ffff")

BOUNDARY_INTEGERS = (0, -1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**40, -(10**40))
ODD_FLOATS = (float("nan"), float("inf"), float("-inf"), -0.0, 1e308, 5e-324, 0.1)


def odd_text(max_size: int = 20) -> st.SearchStrategy[str]:
    """Text of any characters, lone surrogates included (st.characters leaves them out)."""
    return st.text(st.one_of(st.characters(), st.sampled_from(ODD_CHARACTERS)), max_size=max_size)


def json_scalars() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(), st.booleans(), st.integers(), st.sampled_from(BOUNDARY_INTEGERS),
        st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(ODD_FLOATS), odd_text())


def json_values(max_leaves: int = 20) -> st.SearchStrategy[Any]:
    """Any JSON value (plus NaN and the infinities, which Python's json reads and writes)."""
    return st.recursive(
        json_scalars(),
        lambda children: st.one_of(st.lists(children, max_size=4),
                                   st.dictionaries(odd_text(8), children, max_size=4)),
        max_leaves=max_leaves)


def _nest(depth: int, leaf: Any, in_objects: bool) -> Any:
    value = leaf
    for level in range(depth):
        value = {"k": value} if in_objects and level % 2 else [value]
    return value


def nested(max_depth: int = 300) -> st.SearchStrategy[Any]:
    """A value inside `depth` lists (and with `in_objects` objects too, alternating), up to `max_depth`."""
    return st.builds(_nest, st.integers(1, max_depth), json_scalars(), st.booleans())


def _dumps(value: Any, ensure_ascii: bool) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii)


def json_texts(max_depth: int = 3000) -> st.SearchStrategy[str]:
    """Text for a JSON parser: mostly JSON, some of it broken or built to exhaust a parser."""
    valid = st.builds(_dumps, st.one_of(json_values(), nested(max_depth // 10)), st.booleans())
    return st.one_of(
        valid,
        st.builds(lambda text, cut: text[:cut], valid, st.integers(0, 40)),  # cut short
        st.builds(lambda digits: '{"a": ' + "9" * digits + "}", st.integers(4000, 5000)),  # past int_max_str_digits
        st.builds(lambda depth, opener: "{\"a\": " + opener * depth, st.integers(1, max_depth),
                  st.sampled_from(["[", '{"a":', "[{\"a\":"])),
        st.builds(lambda depth: "{\"a\": " + "[" * depth + "]" * depth + "}", st.integers(1, max_depth)),
        odd_text(40),
    )
