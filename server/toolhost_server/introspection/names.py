"""The one NOT_FOUND of the introspection tools: a name that names nothing, with the names that come close."""

from __future__ import annotations

from collections.abc import Sequence

from ..registry import close_names

# Up to this many names are listed whole when none comes close; more would bury the message.
LIST_ALL_UP_TO = 30


class NameNotFound(Exception):
    """`name` is no `kind` of this server; the message says which names are."""

    def __init__(self, kind: str, name: str, names: Sequence[str]) -> None:
        self.kind = kind
        self.name = name
        self.suggestions = close_names(name, names)
        super().__init__(not_found_message(kind, name, names, self.suggestions))


def not_found_message(kind: str, name: str, names: Sequence[str], suggestions: Sequence[str] = ()) -> str:
    shown = name if len(name) <= 80 else name[:77] + "..."
    if suggestions:
        return f"no {kind} named {shown!r}; did you mean {', '.join(suggestions)}?"
    if not names:
        return f"no {kind} named {shown!r}"
    if len(names) <= LIST_ALL_UP_TO:
        return f"no {kind} named {shown!r}; use one of: {', '.join(names)}"
    return f"no {kind} named {shown!r}; call without it to list the {len(names)} there are"
