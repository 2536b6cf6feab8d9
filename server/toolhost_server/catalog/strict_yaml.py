"""Reading one catalog document strictly: refuses duplicate keys, aliases (`*name`), merge keys (`<<`) and
nesting deeper than MAX_NESTING, and finds the line of a value by its path for error reports.

Aliases are refused because a few hundred bytes of nested aliases expand to millions of values that validation
then walks; deep nesting because libyaml's recursive composer overflows the C stack on it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from sys import intern
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias, cast

import yaml
from yaml.constructor import ConstructorError
from yaml.error import MarkedYAMLError
from yaml.events import CollectionEndEvent, CollectionStartEvent
from yaml.nodes import CollectionNode, MappingNode, Node, ScalarNode, SequenceNode

from .definition import DocumentPath

MAX_NESTING = 64

if TYPE_CHECKING:
    from yaml._yaml import Mark as _LibyamlMark

    _SafeLoader = yaml.SafeLoader
    _Mark: TypeAlias = yaml.error.Mark | _LibyamlMark
else:
    _SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# libyaml counts a reader error's position in bytes of UTF-8, the pure-Python reader in characters.
_POSITIONS_IN_BYTES = _SafeLoader is not yaml.SafeLoader
# Each collection needs one of these characters of its own, so a text holding few of them cannot nest deeply;
# below this count libyaml's recursive composer is safe even on a small thread stack (it overflows past ~20000).
_NESTING_INDICATORS = "[{-:?"
_SHALLOW_ENOUGH = 1000


class CatalogYamlError(MarkedYAMLError):
    """Valid YAML that a catalog file may not use: `problem` says why, `problem_mark` where."""

    def __init__(self, problem: str, mark: _Mark | None) -> None:
        # libyaml's Mark is not a yaml.error.Mark but has the same fields, and PyYAML's own errors carry it too.
        super().__init__(problem=problem, problem_mark=cast("yaml.error.Mark | None", mark))


def load_catalog_yaml(text: str) -> Any:
    """The one document in `text`, read as a catalog file must be; CatalogYamlError for what a catalog file
    may not use, another yaml.YAMLError for what is not YAML."""
    if sum(text.count(c) for c in _NESTING_INDICATORS) > _SHALLOW_ENOUGH:
        _check_nesting(text)
    loader = _CatalogLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        try:
            return _plain_data(loader, node, 1, set() if "*" in text else None)
        except Exception:
            # Anything unusual, refused or wrong is left to the full constructor, which gives the same data, or
            # the same error with its line, as yaml.load with this loader.
            return loader.construct_document(node)
    finally:
        loader.dispose()


_TAG = "tag:yaml.org,2002:"
_STR_TAG, _NULL_TAG, _BOOL_TAG = _TAG + "str", _TAG + "null", _TAG + "bool"
_INT_TAG, _FLOAT_TAG, _MAP_TAG, _SEQ_TAG, _MERGE_TAG = (
    _TAG + "int", _TAG + "float", _TAG + "map", _TAG + "seq", _TAG + "merge")


_INTERNED_LENGTH = 24


class _NotPlain(Exception):
    """The document holds something the fast path leaves to the full constructor."""


def _plain_data(loader: _CatalogLoader, node: Node, depth: int, seen: set[int] | None) -> Any:
    """The data of a document made only of mappings, sequences and str, null, bool, int and float scalars:
    what the full constructor of _CatalogLoader gives for it, several times faster. Anything else (another
    tag, an alias, a merge key, a duplicate or unhashable key, nesting deeper than MAX_NESTING, a value the
    standard constructors refuse) raises, and the caller constructs the document the full way.

    `seen` collects the nodes met, to find aliases (a node met twice); None when the text holds no `*`, so
    cannot hold an alias. String scalars, most of a catalog file, are taken in the loops without a call."""
    if seen is not None:
        if id(node) in seen:  # an alias: the same node met again
            raise _NotPlain
        seen.add(id(node))
    kind, tag = type(node), node.tag
    if isinstance(node, ScalarNode):
        if tag == _STR_TAG:
            value = node.value
            return intern(value) if len(value) <= _INTERNED_LENGTH else value
        if tag == _NULL_TAG:
            return None
        if tag == _BOOL_TAG:
            return loader.bool_values[node.value.lower()]
        if tag == _INT_TAG:
            number = loader.construct_yaml_int(node)
            if not _LARGEST_INT_NEGATED <= number <= _LARGEST_INT:
                raise _NotPlain  # the full constructor says what is wrong, with the line
            return number
        if tag == _FLOAT_TAG:
            return loader.construct_yaml_float(node)
        raise _NotPlain
    if depth > MAX_NESTING:
        raise _NotPlain
    depth += 1
    if kind is MappingNode and tag == _MAP_TAG:
        mapping: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if seen is None and key_node.tag == _STR_TAG and type(key_node) is ScalarNode:
                key = key_node.value
                # Keys and short values repeat from file to file (`name`, `type`, `string`...): one object
                # each instead of one per file and tool.
                if len(key) <= _INTERNED_LENGTH:
                    key = intern(key)
            elif key_node.tag == _MERGE_TAG:
                raise _NotPlain
            else:
                key = _plain_data(loader, key_node, depth, seen)
            if key in mapping:  # also raises TypeError for an unhashable key
                raise _NotPlain
            if seen is None and value_node.tag == _STR_TAG and type(value_node) is ScalarNode:
                value = value_node.value
                mapping[key] = intern(value) if len(value) <= _INTERNED_LENGTH else value
            else:
                mapping[key] = _plain_data(loader, value_node, depth, seen)
        return mapping
    if kind is SequenceNode and tag == _SEQ_TAG:
        return [_plain_data(loader, child, depth, seen) for child in node.value]
    raise _NotPlain


def line_of(text: str, path: DocumentPath, *, at_key: bool = False) -> int:
    """The 1-based line of the value at `path` in the YAML `text` (of its key with `at_key`), or of the
    nearest enclosing value when the document stops short of `path`; 0 when `text` holds no document.
    Composes the document again, so it is meant for reporting errors, not for the way to success."""
    try:
        node = yaml.compose(text, Loader=_SafeLoader)
    except yaml.YAMLError:
        return 0
    if node is None:
        return 0
    for index, step in enumerate(path):
        key_node, child = _child(node, step)
        if child is None:
            break
        if at_key and key_node is not None and index == len(path) - 1:
            return mark_line(key_node.start_mark)
        node = child
    return mark_line(node.start_mark)


# BaseResolver.resolve, which the stubs leave untyped.
_base_resolve = cast("Callable[[Any, type[Node], str | None, Any], str]", _SafeLoader.resolve)


class _CatalogLoader(_SafeLoader):
    """The safe loader, refusing duplicate keys, aliases, merge keys and deep nesting."""

    # First characters of a plain scalar that some implicit resolver (null, bool, int, float, timestamp,
    # merge, value) may claim; every other plain scalar is a string, which `resolve` answers at once.
    _CLAIMED_FIRST = frozenset(k for k in _SafeLoader.yaml_implicit_resolvers if k is not None)
    _ANY_FIRST = None in _SafeLoader.yaml_implicit_resolvers or bool(_SafeLoader.yaml_path_resolvers)
    # Resolved tags of short plain scalars (keys such as `name`, values such as `true` or `10`), shared by
    # every load; emptied when it grows past _RESOLVED_MAX.
    _resolved: ClassVar[dict[str, str]] = {}
    _RESOLVED_MAX = 4096

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depths: dict[Node, int] = {}

    def resolve(self, kind: type[Node], value: str | None, implicit: Any) -> str:
        """BaseResolver.resolve, answered without its regular expressions where the answer is known: the
        composer asks once per node, and that was a third of the time a catalog file took to read."""
        if self._ANY_FIRST:
            return _base_resolve(self, kind, value, implicit)
        if kind is ScalarNode:
            if not implicit[0] or not value:
                return _base_resolve(self, kind, value, implicit)
            if value[0] not in self._CLAIMED_FIRST:
                return _STR_TAG
            if len(value) > 32:
                return _base_resolve(self, kind, value, implicit)
            tag = self._resolved.get(value)
            if tag is None:
                tag = _base_resolve(self, kind, value, implicit)
                if len(self._resolved) >= self._RESOLVED_MAX:
                    self._resolved.clear()
                self._resolved[value] = tag
            return tag
        if kind is MappingNode:
            return _MAP_TAG
        if kind is SequenceNode:
            return _SEQ_TAG
        return _base_resolve(self, kind, value, implicit)

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        # An alias is the anchored node itself, met a second time.
        if node in self.constructed_objects or node in self.recursive_objects:
            raise CatalogYamlError("YAML aliases (*name) are not allowed in catalog files; the value anchored "
                                   "here is used again: write it out where it is needed", node.start_mark)
        if isinstance(node, CollectionNode):
            # Children are constructed later (PyYAML defers them), so each learns its depth from its parent.
            depth = self._depths.pop(node, 1)
            if depth > MAX_NESTING:
                raise _too_deep(node.start_mark)
            children = node.value if isinstance(node, SequenceNode) else [n for pair in node.value for n in pair]
            for child in children:
                if isinstance(child, CollectionNode):
                    self._depths[child] = depth + 1
        try:
            value = super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        # ValueError: a date of 2024-13-45; AttributeError and KeyError: PyYAML's own constructors given text
        # their tag cannot hold (`!!timestamp x`, `!!bool x`).
        except (ValueError, TypeError, OverflowError) as exc:
            raise CatalogYamlError(f"cannot read the value{_shown(node)}: {exc}", node.start_mark) from exc
        except (AttributeError, KeyError, IndexError) as exc:
            raise CatalogYamlError(f"cannot read the value{_shown(node)} as {node.tag}", node.start_mark) from exc
        if isinstance(value, int) and not isinstance(value, bool) and not _LARGEST_INT_NEGATED <= value <= _LARGEST_INT:
            # YAML 1.1 reads 0x... of any length as an int, whose str() and float() then fail far from here.
            raise CatalogYamlError("this number is too large for a catalog file: whole numbers must fit in 64 bits",
                                   node.start_mark)
        return value

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        if not isinstance(node, MappingNode):
            return super().construct_mapping(node, deep)  # raises the library's own error
        mapping: dict[Hashable, Any] = {}
        lines: dict[Hashable, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise CatalogYamlError("YAML merge keys (<<) are not allowed in catalog files; write the keys out",
                                       key_node.start_mark)
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                raise ConstructorError("while constructing a mapping", node.start_mark, "found unhashable key",
                                       key_node.start_mark)
            if key in mapping:
                raise CatalogYamlError(f"key {key!r} appears twice in this mapping (first on line {lines[key]}); "
                                       "YAML would silently keep only the last one", key_node.start_mark)
            lines[key] = mark_line(key_node.start_mark)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


def _shown(node: Node) -> str:
    return f" {node.value!r}" if isinstance(node, ScalarNode) and len(node.value) <= 100 else ""


_LARGEST_INT = 2**64 - 1
_LARGEST_INT_NEGATED = -(2**63)


def _check_nesting(text: str) -> None:
    """Refuse deep nesting from the event stream, which libyaml produces without recursing."""
    depth = 0
    for event in yaml.parse(text, Loader=_SafeLoader):
        if isinstance(event, CollectionStartEvent):
            depth += 1
            if depth > MAX_NESTING:
                raise _too_deep(event.start_mark)
        elif isinstance(event, CollectionEndEvent):
            depth -= 1


def _too_deep(mark: _Mark | None) -> CatalogYamlError:
    return CatalogYamlError(f"the document nests deeper than {MAX_NESTING} levels of lists and mappings", mark)


def _child(node: Node, step: str | int) -> tuple[Node | None, Node | None]:
    """(key node, value node) of `step` inside `node`; (None, None) when it has no such child."""
    if isinstance(node, MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, ScalarNode) and key_node.value == str(step):
                return key_node, value_node
    elif isinstance(node, SequenceNode) and isinstance(step, int) and 0 <= step < len(node.value):
        return None, node.value[step]
    return None, None


def mark_line(mark: _Mark | None) -> int:
    """The 1-based line of a YAML mark; 0 when there is none."""
    return mark.line + 1 if mark is not None else 0


def error_line(exc: yaml.YAMLError, raw: bytes) -> int:
    """The 1-based line a YAML error is on, also for reader errors, which carry a position instead of a mark."""
    mark = getattr(exc, "problem_mark", None)
    if mark is not None:
        return mark_line(mark)
    position = getattr(exc, "position", None)  # a reader error (such as a control character) has no mark
    if not isinstance(position, int):
        return 0
    if _POSITIONS_IN_BYTES:
        return raw.count(b"\n", 0, position) + 1
    return raw.decode("utf-8").count("\n", 0, position) + 1


def error_text(exc: yaml.YAMLError) -> str:
    problem = getattr(exc, "problem", None)
    return str(problem) if problem else str(exc).split("\n", 1)[0]
