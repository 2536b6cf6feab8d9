"""Which examples `toolhost check` runs, in which order, and why it leaves the others out."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..model import ExampleExpectation


class Include(enum.Enum):
    """Kinds of tools whose examples are left out unless asked for: `--include open_world,destructive`."""

    OPEN_WORLD = "open_world"  # reach hosts the checking machine may not (or should not) reach
    DESTRUCTIVE = "destructive"  # change or delete what exists


@dataclass(frozen=True, slots=True)
class ExampleOf:
    """One example as a tool declares it, wherever the declaration came from."""

    description: str
    arguments: Mapping[str, Any]
    expect: ExampleExpectation
    skip_check: bool


@dataclass(frozen=True, slots=True)
class ToolExamples:
    """What `toolhost check` needs of a tool: its name, the two annotations that may leave it out, its
    examples in their declared order."""

    name: str
    examples: Sequence[ExampleOf]
    open_world: bool = False
    destructive: bool = False


@dataclass(frozen=True, slots=True)
class CheckCase:
    """One example to run: example `number` (from 1) of `tool`. `skip_reason` is why it is left out ("": it
    runs)."""

    tool: str
    number: int
    description: str
    arguments: Mapping[str, Any]
    expect: ExampleExpectation
    skip_reason: str = ""


def check_cases(tools: Iterable[ToolExamples], include: frozenset[Include] = frozenset()) -> list[CheckCase]:
    """Every example of `tools`, in the tools' order and then the examples' own, each marked with why it is
    left out when it is."""
    cases = []
    for tool in tools:
        tool_reason = _tool_skip_reason(tool, include)
        for number, example in enumerate(tool.examples, start=1):
            reason = "check: skip" if example.skip_check else tool_reason
            cases.append(CheckCase(tool.name, number, example.description, example.arguments, example.expect,
                                   reason))
    return cases


def _tool_skip_reason(tool: ToolExamples, include: frozenset[Include]) -> str:
    marked = [kind for kind, on in ((Include.OPEN_WORLD, tool.open_world), (Include.DESTRUCTIVE, tool.destructive))
              if on]
    if all(kind in include for kind in marked):
        return ""
    # Every kind the tool is marked with: an --include naming only the missing ones would still leave it out.
    return f"{', '.join(k.value.replace('_', ' ') for k in marked)} (--include {','.join(k.value for k in marked)})"
