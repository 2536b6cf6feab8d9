"""A YAML document as plain nodes with their lines, built from the parser's events without constructing anything.

For documents from outside: no tag makes an object (a scalar keeps the text written, its tag only recorded), an
alias is refused at its own line instead of standing for the anchored value (a billion laughs stays a few
hundred events), nesting is bounded while it is read (no recursion, in C or Python), and only one document may
be given. Faster than yaml.compose, whose implicit resolution a caller reading text as written does not need.

    root = read_document("- name: ws-042\\n")      # Node("seq", 1, items=[Node("map", 1, ...)])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal

import yaml
from yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    DocumentStartEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceStartEvent,
)

if TYPE_CHECKING:
    _Loader = yaml.SafeLoader
else:
    _Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

YAML_TAG: Final = "tag:yaml.org,2002:"
# YAML 1.1's null, as a plain scalar.
_NULLS: Final = frozenset({"", "~", "null", "Null", "NULL"})


class DocumentError(Exception):
    """What makes the text unreadable as one document of plain nodes, and the 1-based lines where it is (0: the
    whole document)."""

    def __init__(self, lines: list[int], message: str) -> None:
        super().__init__(message)
        self.lines = lines
        self.message = message


@dataclass(slots=True)
class Node:
    """A scalar (`text`), a sequence (`items`) or a mapping (`items` alternating key and value), its line, and
    its explicit tag ("" when none was written)."""

    kind: Literal["scalar", "seq", "map"]
    line: int
    tag: str = ""
    text: str = ""
    plain: bool = False
    items: list[Node] = field(default_factory=list)

    @property
    def is_null(self) -> bool:
        return self.kind == "scalar" and (self.tag == YAML_TAG + "null" or (self.plain and self.text in _NULLS))

    def pairs(self) -> list[tuple[Node, Node]]:
        return list(zip(self.items[::2], self.items[1::2], strict=True))


def read_document(text: str, max_nesting: int) -> Node | None:
    """The document's root, None for an empty text; DocumentError for an alias, nesting deeper than
    `max_nesting`, a second document, or text that is not YAML (with the line)."""
    root: Node | None = None
    open_nodes: list[Node] = []
    documents = 0
    aliases: list[int] = []
    try:
        for event in yaml.parse(text, Loader=_Loader):
            line = event.start_mark.line + 1 if event.start_mark is not None else 0
            if isinstance(event, DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise DocumentError([line], "the text holds more than one YAML document (`---`): send one")
                continue
            if isinstance(event, CollectionEndEvent):
                open_nodes.pop()
                continue
            if isinstance(event, AliasEvent):
                aliases.append(line)
                node = Node("scalar", line)
            elif isinstance(event, ScalarEvent):
                node = Node("scalar", line, _explicit(event.tag), event.value, plain=bool(event.implicit[0]))
            elif isinstance(event, (SequenceStartEvent, MappingStartEvent)):
                kind: Literal["seq", "map"] = "seq" if isinstance(event, SequenceStartEvent) else "map"
                node = Node(kind, line, _explicit(event.tag))
            else:
                continue  # stream and document ends
            if open_nodes:
                open_nodes[-1].items.append(node)
            else:
                root = node
            if node.kind != "scalar":
                open_nodes.append(node)
                if len(open_nodes) > max_nesting:
                    raise DocumentError([line], f"the document nests deeper than {max_nesting} levels of lists and "
                                                "mappings")
    except yaml.YAMLError as exc:
        raise DocumentError([_error_line(exc, text)], f"this is not valid YAML: {_error_text(exc)}") from None
    if aliases:
        raise DocumentError(aliases, "YAML aliases (*name) are not allowed: write the value out")
    return root


def _explicit(tag: str | None) -> str:
    # "!" is the non-specific tag of a quoted scalar: no tag was written.
    return "" if tag in (None, "!") else str(tag)


def _error_line(exc: yaml.YAMLError, text: str) -> int:
    mark = getattr(exc, "problem_mark", None)
    if mark is not None:
        return int(mark.line) + 1
    position = getattr(exc, "position", None)  # a reader error (a control character) has a position, no mark
    if not isinstance(position, int):
        return 0
    if _Loader is not yaml.SafeLoader:  # libyaml counts in bytes of UTF-8
        return text.encode("utf-8").count(b"\n", 0, position) + 1
    return text.count("\n", 0, position) + 1


def _error_text(exc: yaml.YAMLError) -> str:
    problem = getattr(exc, "problem", None)
    return str(problem) if problem else str(exc).split("\n", 1)[0]
