"""Intent routing: the first catalog intent that matches a whole query, and the arguments it gives its tool.

Intents are tried in catalog order (the snapshot's: built-in tools, then the catalog directories in order). A
match whose arguments the tool's input schema refuses ("check port 70000 on db": the port's maximum is 65535)
does not end the routing: the next intent is tried, and with none left the query goes to the ranked search, so
a phrase that almost fits still finds its tool, without arguments that would fail the call.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..argument_text import ArgumentTextError, property_types, typed_argument
from ..errors import InvalidArgumentsError
from ..intent_patterns import IntentPatternError, compile_intent
from ..model import Intent, ToolSpec
from ..registry import RegisteredTool, Snapshot
from .results import SearchHit

# An intent's match scores above every ranked hit, whose scores are below 1 (index.RankedIndex).
INTENT_SCORE = 1.0


@dataclass(frozen=True, slots=True)
class _Route:
    tool: str
    intent: Intent
    pattern: re.Pattern[str]
    # The JSON type of each named group's parameter, to type the captured text by.
    types: Mapping[str, str]

    def arguments(self, match: re.Match[str]) -> dict[str, Any] | None:
        """The constant arguments with the captured groups typed over them; None when a group's text is not of
        its parameter's type (a group that took no part leaves the constant, or nothing, in its place)."""
        arguments = dict(self.intent.arguments)
        for name, text in match.groupdict().items():
            if text is None:
                continue
            try:
                arguments[name] = typed_argument(text, self.types.get(name))
            except ArgumentTextError:
                return None
        return arguments


class IntentRoutes:
    """The intents of one snapshot's tools, compiled once (the patterns of unchanged tools are not compiled
    again: `previous` hands them over)."""

    def __init__(self, snapshot: Snapshot, previous: IntentRoutes | None = None) -> None:
        compiled = previous._compiled if previous is not None else {}
        self._compiled: dict[str, re.Pattern[str]] = {}
        routes: list[_Route] = []
        for name, tool in snapshot.tools().items():
            spec = tool.spec
            if not spec.intents:
                continue
            types = property_types(spec.input_schema)
            for intent in spec.intents:
                pattern = compiled.get(intent.pattern) or self._compiled.get(intent.pattern)
                if pattern is None:
                    try:
                        pattern = compile_intent(intent.pattern)
                    except IntentPatternError:  # the catalog checked it; a spec built in code may not have been
                        continue
                self._compiled[intent.pattern] = pattern
                groups = {group: types[group] for group in pattern.groupindex if group in types}
                routes.append(_Route(name, intent, pattern, groups))
        self._routes = tuple(routes)

    def __len__(self) -> int:
        return len(self._routes)

    def route(self, query: str, tools: Mapping[str, RegisteredTool],
              sees: Callable[[ToolSpec], bool]) -> SearchHit | None:
        """The first intent of a tool `sees` accepts that matches all of `query` with arguments its tool's
        schema accepts, as a hit; None when there is none. A tool hidden from the caller is passed over as if
        its intent did not match."""
        for route in self._routes:
            match = route.pattern.fullmatch(query)
            if match is None:
                continue
            tool = tools[route.tool]
            if not sees(tool.spec):
                continue
            arguments = route.arguments(match)
            if arguments is None:
                continue
            try:
                tool.validator.prepare(route.tool, arguments)
            except InvalidArgumentsError:
                continue
            return SearchHit(tool, INTENT_SCORE, route.intent.pattern, arguments)
        return None
