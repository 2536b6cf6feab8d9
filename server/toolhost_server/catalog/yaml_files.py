"""Reads YAML catalog directories, re-parsing only files that changed since the last read.

A file is known by (real path, inode, mtime_ns, size): a Kubernetes ConfigMap update swaps the `..data` symlink,
which changes the real path of every file, while an untouched file in a plain directory is not read again.
Each file keeps its last good definition, so a file that turns bad keeps serving its previous tool until it is
fixed or deleted.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..registry import CatalogProblem, RegisteredTool
from .definition import DefinitionError

CATALOG_SUFFIXES = (".yaml", ".yml")
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class CatalogDirectoryError(Exception):
    """A configured catalog directory is missing or unreadable: the whole reload fails."""

    def __init__(self, problem: CatalogProblem) -> None:
        super().__init__(problem.reason)
        self.problem = problem


@dataclass(frozen=True, slots=True)
class _FileKey:
    real_path: str
    inode: int
    mtime_ns: int
    size: int


@dataclass(frozen=True, slots=True)
class CatalogRead:
    """The tools of every catalog file in order (directory order, then path order), and the problems."""

    tools: list[RegisteredTool]
    problems: list[CatalogProblem]


Compiler = Callable[[Any, str], RegisteredTool]


class YamlCatalogReader:
    """Turns catalog directories into tools. `compile(data, origin)` builds one tool from a parsed document
    and raises DefinitionError (or another exception with a readable message) when it cannot."""

    def __init__(self, compile_tool: Compiler) -> None:
        self._compile = compile_tool
        self._parsed: dict[str, tuple[_FileKey, RegisteredTool | CatalogProblem]] = {}
        self._last_good: dict[str, RegisteredTool] = {}

    def read(self, directories: Sequence[Path]) -> CatalogRead:
        """Read every directory; CatalogDirectoryError when one of them cannot be listed."""
        paths = [path for directory in directories for path in list_catalog_files(directory)]
        tools: list[RegisteredTool] = []
        problems: list[CatalogProblem] = []
        for path in paths:
            result = self._read_file(path)
            if isinstance(result, RegisteredTool):
                tools.append(result)
                self._last_good[path] = result
                continue
            last_good = self._last_good.get(path)
            if last_good is not None:
                tools.append(last_good)
                result = CatalogProblem(result.file, result.line,
                                        f"{result.reason} (still serving its last good version)")
            problems.append(result)
        present = set(paths)
        for gone in [p for p in self._parsed if p not in present]:
            del self._parsed[gone]
            self._last_good.pop(gone, None)
        return CatalogRead(tools, problems)

    def _read_file(self, path: str) -> RegisteredTool | CatalogProblem:
        try:
            with open(path, "rb") as handle:
                st = os.fstat(handle.fileno())
                key = _FileKey(os.path.realpath(path), st.st_ino, st.st_mtime_ns, st.st_size)
                cached = self._parsed.get(path)
                if cached is not None and cached[0] == key:
                    return cached[1]
                raw = handle.read()
        except OSError as exc:
            return CatalogProblem(path, 0, f"cannot read the file: {exc.strerror or exc}")
        result = self._parse(path, raw)
        self._parsed[path] = (key, result)
        return result

    def _parse(self, path: str, raw: bytes) -> RegisteredTool | CatalogProblem:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return CatalogProblem(path, 0, f"not UTF-8 text: {exc}")
        try:
            data = yaml.load(text, Loader=_Loader)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = mark.line + 1 if mark is not None else 0
            problem = getattr(exc, "problem", None) or str(exc)
            return CatalogProblem(path, line, f"YAML syntax error: {problem}")
        try:
            return self._compile(data, path)
        except DefinitionError as exc:
            return CatalogProblem(path, line_of_key(text, exc.key), exc.reason)
        except Exception as exc:  # a runner's or validator's refusal: report it, never take the others down
            return CatalogProblem(path, 0, str(exc) or type(exc).__name__)


def list_catalog_files(directory: Path) -> list[str]:
    """The YAML files under `directory`, sorted, skipping hidden entries (a ConfigMap's `..data` and
    `..2024_...` directories hold the same files as the visible symlinks)."""
    if not directory.is_dir():
        reason = "does not exist" if not directory.exists() else "is not a directory"
        raise CatalogDirectoryError(CatalogProblem(str(directory), 0, f"catalog directory {reason}"))
    found: list[str] = []
    pending = [str(directory)]
    while pending:
        current = pending.pop()
        try:
            with os.scandir(current) as entries:
                for entry in entries:
                    if entry.name.startswith("."):
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
                    elif entry.name.endswith(CATALOG_SUFFIXES) and entry.is_file():
                        found.append(entry.path)
        except OSError as exc:
            raise CatalogDirectoryError(
                CatalogProblem(current, 0, f"cannot list catalog directory: {exc.strerror or exc}")) from exc
    return sorted(found)


def line_of_key(text: str, key: str) -> int:
    """The 1-based line where `key:` first appears, 0 when not found; good enough to point a person at it."""
    if not key:
        return 0
    match = re.search(rf"^[ \t-]*{re.escape(key)}[ \t]*:", text, re.MULTILINE)
    return text.count("\n", 0, match.start()) + 1 if match else 0
