"""Intent routing: the first catalog intent that matches a whole query, and the arguments it gives its tool.

Intents are tried in catalog order (the snapshot's: built-in tools, then the catalog directories in order), those
of the tools the caller may not see never (they cost a caller nothing and say nothing about the hidden tools). A
match whose arguments the tool's input schema refuses ("check port 70000 on db": the port's maximum is 65535)
does not end the routing: the next intent is tried, and with none left the query goes to the ranked search, so
a phrase that almost fits still finds its tool, without arguments that would fail the call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..argument_text import ArgumentTextError, property_types, typed_argument
from ..errors import InvalidArgumentsError
from ..intent_patterns import PREFIX_SCAN_CHARACTERS, IntentPattern, IntentPatternError, compile_intent
from ..model import Intent
from ..registry import RegisteredTool, Snapshot
from .results import SearchHit

# An intent's match scores above every ranked hit, whose scores are below 1 (index.RankedIndex).
INTENT_SCORE = 1.0


@dataclass(frozen=True, slots=True)
class _Route:
    tool: str
    intent: Intent
    pattern: IntentPattern
    # The JSON type of each named group's parameter, to type the captured text by.
    types: Mapping[str, str]

    def arguments(self, groups: Mapping[str, str | None]) -> dict[str, Any] | None:
        """The constant arguments with the captured groups typed over them; None when a group's text is not of
        its parameter's type (a group that took no part leaves the constant, or nothing, in its place)."""
        arguments = dict(self.intent.arguments)
        for name, text in groups.items():
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
        self._compiled: dict[str, IntentPattern] = {}
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
                groups = {group: types[group] for group in pattern.group_names if group in types}
                routes.append(_Route(name, intent, pattern, groups))
        self._routes = tuple(routes)

    def __len__(self) -> int:
        return len(self._routes)

    def route(self, query: str, tools: Mapping[str, RegisteredTool],
              sees: Callable[[str], bool] | None) -> SearchHit | None:
        """The first intent of a tool `sees` accepts (by name; None: every tool) that matches all of `query`
        with arguments its tool's schema accepts, as a hit; None when there is none. The intents of a tool
        `sees` refuses are not tried."""
        if not query.isascii() and not _encodable(query):
            return None  # a lone surrogate (from JSON's "\ud800") is no phrase, and RE2 reads UTF-8 only
        # IntentPattern.fullmatch's own first test, made here once for all the intents: most fail it.
        head = query[:PREFIX_SCAN_CHARACTERS]
        folded = head.lower() if head.isascii() else ""
        for route in self._routes:
            prefix = route.pattern.required_prefix
            if folded and prefix and not folded.startswith(prefix):
                continue
            if sees is not None and not sees(route.tool):
                continue
            groups = route.pattern.fullmatch(query)
            if groups is None:
                continue
            arguments = route.arguments(groups)
            if arguments is None:
                continue
            tool = tools[route.tool]
            try:
                tool.validator.prepare(route.tool, arguments)
            except InvalidArgumentsError:
                continue
            return SearchHit(tool, INTENT_SCORE, route.intent.pattern, arguments)
        return None


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True
