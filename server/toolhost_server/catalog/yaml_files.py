"""Reads YAML catalog directories, re-parsing only files that changed since the last read.

A file is known by (real path, inode, mtime_ns, size): a Kubernetes ConfigMap update swaps the `..data` symlink,
which changes the real path of every file, while an untouched file in a plain directory is not read again.
Each file keeps its last good definition, so a file that turns bad keeps serving its previous tool until it is
fixed or deleted; a file re-read with the same bytes, or parsed into the same tool, keeps its tool object, so
caches keyed by the tool survive a ConfigMap update.

A catalog file is read strictly: a duplicate key, an alias (`*name`), a merge key (`<<`), nesting deeper than
MAX_NESTING or more than MAX_FILE_BYTES makes it a bad file. Aliases are refused because a few hundred bytes
of nested aliases expand to millions of values that validation then walks.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import yaml
from yaml.constructor import ConstructorError
from yaml.error import MarkedYAMLError
from yaml.events import CollectionEndEvent, CollectionStartEvent
from yaml.nodes import CollectionNode, MappingNode, Node, ScalarNode, SequenceNode

from ..registry import CatalogProblem, RegisteredTool
from .definition import DefinitionError, DocumentPath

CATALOG_SUFFIXES = (".yaml", ".yml")
MAX_FILE_BYTES = 1 << 20
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


class CatalogDirectoryError(Exception):
    """A configured catalog directory is missing or unreadable: the whole reload fails."""

    def __init__(self, problem: CatalogProblem) -> None:
        super().__init__(problem.reason)
        self.problem = problem


class CatalogYamlError(MarkedYAMLError):
    """Valid YAML that a catalog file may not use: `problem` says why, `problem_mark` where."""

    def __init__(self, problem: str, mark: _Mark | None) -> None:
        # libyaml's Mark is not a yaml.error.Mark but has the same fields, and PyYAML's own errors carry it too.
        super().__init__(problem=problem, problem_mark=cast("yaml.error.Mark | None", mark))


@dataclass(frozen=True, slots=True)
class CatalogFile:
    """A catalog file found in a directory; `problem` is set when the entry could not even be examined."""

    path: str
    problem: CatalogProblem | None = None


@dataclass(frozen=True, slots=True)
class CatalogRead:
    """The tools of every catalog file in order (directory order, then path order), and the problems."""

    tools: list[RegisteredTool]
    problems: list[CatalogProblem]


@dataclass(frozen=True, slots=True)
class _FileKey:
    real_path: str
    inode: int
    mtime_ns: int
    size: int


@dataclass(frozen=True, slots=True)
class _Parsed:
    key: _FileKey
    digest: bytes
    result: RegisteredTool | CatalogProblem


Compiler = Callable[[Any, str], RegisteredTool]


class YamlCatalogReader:
    """Turns catalog directories into tools. `compile(data, origin)` builds one tool from a parsed document
    and raises DefinitionError (or another exception with a readable message) when it cannot."""

    def __init__(self, compile_tool: Compiler) -> None:
        self._compile = compile_tool
        self._parsed: dict[str, _Parsed] = {}
        self._last_good: dict[str, RegisteredTool] = {}

    def read(self, directories: Sequence[Path]) -> CatalogRead:
        """Read every directory; CatalogDirectoryError when one of them cannot be listed."""
        files = [found for directory in directories for found in list_catalog_files(directory)]
        tools: list[RegisteredTool] = []
        problems: list[CatalogProblem] = []
        for found in files:
            result = found.problem or self._read_file(found.path)
            if isinstance(result, RegisteredTool):
                tools.append(result)
                self._last_good[found.path] = result
                continue
            last_good = self._last_good.get(found.path)
            if last_good is not None:
                tools.append(last_good)
                result = CatalogProblem(result.file, result.line,
                                        f"{result.reason} (still serving its last good version)")
            problems.append(result)
        present = {found.path for found in files}
        for gone in [p for p in self._parsed if p not in present]:
            del self._parsed[gone]
        for gone in [p for p in self._last_good if p not in present]:
            del self._last_good[gone]
        return CatalogRead(tools, problems)

    def _read_file(self, path: str) -> RegisteredTool | CatalogProblem:
        cached = self._parsed.get(path)
        try:
            with open(path, "rb") as handle:
                st = os.fstat(handle.fileno())
                key = _FileKey(os.path.realpath(path), st.st_ino, st.st_mtime_ns, st.st_size)
                if cached is not None and cached.key == key:
                    return cached.result
                raw = handle.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            return CatalogProblem(path, 0, f"cannot read the file: {exc.strerror or exc}")
        digest = hashlib.sha256(raw).digest()
        if cached is not None and cached.digest == digest:
            result = cached.result  # the same bytes under a new key: a ConfigMap update that left this file alone
        else:
            result = self._parse(path, raw)
            last_good = self._last_good.get(path)
            if (isinstance(result, RegisteredTool) and last_good is not None
                    and result.spec.content_hash == last_good.spec.content_hash
                    and result.spec.origin == last_good.spec.origin):
                result = last_good
        self._parsed[path] = _Parsed(key, digest, result)
        return result

    def _parse(self, path: str, raw: bytes) -> RegisteredTool | CatalogProblem:
        if len(raw) > MAX_FILE_BYTES:
            return CatalogProblem(path, 0, f"the file is larger than {MAX_FILE_BYTES >> 20} MiB, the most a "
                                           "catalog file may hold")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return CatalogProblem(path, raw.count(b"\n", 0, exc.start) + 1, f"not UTF-8 text: {exc}")
        try:
            data = load_catalog_yaml(text)
        except CatalogYamlError as exc:
            return CatalogProblem(path, _line(exc.problem_mark), str(exc.problem))
        except yaml.YAMLError as exc:
            return CatalogProblem(path, _error_line(exc, raw), f"YAML syntax error: {_error_text(exc)}")
        except Exception as exc:  # whatever else the YAML library raises must not stop the other files
            return CatalogProblem(path, 0, f"cannot read the YAML: {exc}")
        try:
            return self._compile(data, path)
        except DefinitionError as exc:
            return CatalogProblem(path, line_of(text, exc.path, at_key=exc.at_key), exc.reason)
        except Exception as exc:  # a runner's or validator's refusal: report it, never take the others down
            return CatalogProblem(path, 0, str(exc) or type(exc).__name__)


def list_catalog_files(directory: Path) -> list[CatalogFile]:
    """The YAML files under `directory`, sorted, skipping hidden entries (a ConfigMap's `..data` and
    `..2024_...` directories hold the same files as the visible symlinks). An entry that cannot be examined
    (a symlink loop) is listed with its problem; a directory that cannot be listed raises CatalogDirectoryError."""
    if not directory.is_dir():
        reason = "does not exist" if not directory.exists() else "is not a directory"
        raise CatalogDirectoryError(CatalogProblem(str(directory), 0, f"catalog directory {reason}"))
    found: list[CatalogFile] = []
    pending = [str(directory)]
    while pending:
        current = pending.pop()
        try:
            with os.scandir(current) as entries:
                for entry in entries:
                    if entry.name.startswith("."):
                        continue
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            pending.append(entry.path)
                        elif entry.name.endswith(CATALOG_SUFFIXES) and entry.is_file():
                            found.append(CatalogFile(entry.path))
                    except OSError as exc:
                        if entry.name.endswith(CATALOG_SUFFIXES):
                            reason = f"cannot read the file: {exc.strerror or exc}"
                            found.append(CatalogFile(entry.path, CatalogProblem(entry.path, 0, reason)))
        except OSError as exc:
            raise CatalogDirectoryError(
                CatalogProblem(current, 0, f"cannot list catalog directory: {exc.strerror or exc}")) from exc
    return sorted(found, key=lambda f: f.path)


def load_catalog_yaml(text: str) -> Any:
    """The one document in `text`, read as a catalog file must be; CatalogYamlError for what a catalog file
    may not use, another yaml.YAMLError for what is not YAML."""
    if sum(text.count(c) for c in _NESTING_INDICATORS) > _SHALLOW_ENOUGH:
        _check_nesting(text)
    return yaml.load(text, Loader=_CatalogLoader)


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
            return _line(key_node.start_mark)
        node = child
    return _line(node.start_mark)


class _CatalogLoader(_SafeLoader):
    """The safe loader, refusing duplicate keys, aliases, merge keys and deep nesting."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depths: dict[Node, int] = {}

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
            return super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        except (ValueError, TypeError, OverflowError) as exc:  # such as a date of 2024-13-45
            value = f" {node.value!r}" if isinstance(node, ScalarNode) else ""
            raise CatalogYamlError(f"cannot read the value{value}: {exc}", node.start_mark) from exc

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
            lines[key] = _line(key_node.start_mark)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


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


def _line(mark: _Mark | None) -> int:
    return mark.line + 1 if mark is not None else 0


def _error_line(exc: yaml.YAMLError, raw: bytes) -> int:
    mark = getattr(exc, "problem_mark", None)
    if mark is not None:
        return _line(mark)
    position = getattr(exc, "position", None)  # a reader error (such as a control character) has no mark
    if not isinstance(position, int):
        return 0
    if _POSITIONS_IN_BYTES:
        return raw.count(b"\n", 0, position) + 1
    return raw.decode("utf-8").count("\n", 0, position) + 1


def _error_text(exc: yaml.YAMLError) -> str:
    problem = getattr(exc, "problem", None)
    return str(problem) if problem else str(exc).split("\n", 1)[0]
