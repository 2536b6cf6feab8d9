"""Reads YAML catalog directories, re-parsing only files that changed since the last read.

A file is known by (real path, inode, mtime_ns, size): a Kubernetes ConfigMap update swaps the `..data` symlink,
which changes the real path of every file, while an untouched file in a plain directory is not read again: a
reload costs one stat per unchanged file (a directory's real path is resolved once per read, not per file).
Each file keeps its last good definition, so a file that turns bad keeps serving its previous tool until it is
fixed or deleted; a file re-read with the same bytes, or parsed into the same tool, keeps its tool object, so
caches keyed by the tool survive a ConfigMap update.

A catalog file is read strictly (see strict_yaml) and may hold at most MAX_FILE_BYTES.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from ..registry import CatalogProblem, RegisteredTool
from .definition import DefinitionError
from .strict_yaml import CatalogYamlError, error_line, error_text, line_of, load_catalog_yaml, mark_line

CATALOG_SUFFIXES = (".yaml", ".yml")
MAX_FILE_BYTES = 1 << 20
MAX_NESTING = 64

class CatalogDirectoryError(Exception):
    """A configured catalog directory is missing or unreadable: the whole reload fails."""

    def __init__(self, problem: CatalogProblem) -> None:
        super().__init__(problem.reason)
        self.problem = problem


class CatalogFile(NamedTuple):
    """A catalog file found in a directory; `problem` is set when the entry could not even be examined.
    `real_path` is the file's path with every symbolic link resolved ("" with a problem). A named tuple, not
    a frozen dataclass: one is made per file on every reload, and this is several times cheaper to make."""

    path: str
    problem: CatalogProblem | None = None
    real_path: str = ""


@dataclass(frozen=True, slots=True)
class CatalogRead:
    """The tools of every catalog file in order (directory order, then path order), and the problems."""

    tools: list[RegisteredTool]
    problems: list[CatalogProblem]


# (real path, inode, mtime_ns, size): a plain tuple, compared once per file and reload.
_FileKey = tuple[str, int, int, int]


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
        previous, self._parsed = self._parsed, {}
        last_good, self._last_good = self._last_good, {}
        stat = os.stat
        for found in files:
            path = found.path
            result: RegisteredTool | CatalogProblem | None = found.problem
            if result is None:
                cached = previous.get(path)
                if cached is not None:
                    # The common case on a reload: one stat, and the file is known. A failing stat is left to
                    # the read below, which reports it.
                    try:
                        st = stat(path)
                    except OSError:
                        pass
                    else:
                        if cached.key == (found.real_path, st.st_ino, st.st_mtime_ns, st.st_size):
                            self._parsed[path] = cached
                            result = cached.result
                if result is None:
                    result = self._read_file(path, found.real_path, cached, last_good.get(path))
            if isinstance(result, RegisteredTool):
                tools.append(result)
                self._last_good[path] = result
                continue
            good = last_good.get(path)
            if good is not None:
                tools.append(good)
                self._last_good[path] = good
                result = CatalogProblem(result.file, result.line,
                                        f"{result.reason} (still serving its last good version)")
            problems.append(result)
        return CatalogRead(tools, problems)

    def _read_file(self, path: str, real_path: str, cached: _Parsed | None,
                   last_good: RegisteredTool | None) -> RegisteredTool | CatalogProblem:
        try:
            with open(path, "rb") as handle:
                st = os.fstat(handle.fileno())
                key = (real_path, st.st_ino, st.st_mtime_ns, st.st_size)
                if cached is not None and cached.key == key:
                    self._parsed[path] = cached
                    return cached.result
                raw = handle.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            return CatalogProblem(path, 0, f"cannot read the file: {exc.strerror or exc}")
        digest = hashlib.sha256(raw).digest()
        if cached is not None and cached.digest == digest:
            result = cached.result  # the same bytes under a new key: a ConfigMap update that left this file alone
        else:
            result = self._parse(path, raw)
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
            return CatalogProblem(path, mark_line(exc.problem_mark), str(exc.problem))
        except yaml.YAMLError as exc:
            return CatalogProblem(path, error_line(exc, raw), f"YAML syntax error: {error_text(exc)}")
        except Exception as exc:  # whatever else the YAML library raises must not stop the other files
            return CatalogProblem(path, 0, f"cannot read the YAML: {exc}")
        try:
            return self._compile(data, path)
        except DefinitionError as exc:
            return CatalogProblem(path, line_of(text, exc.path, at_key=exc.at_key), exc.reason)
        except Exception as exc:  # a runner's or validator's refusal: report it, never take the others down
            return CatalogProblem(path, 0, str(exc) or type(exc).__name__)


# CatalogFile(...) goes through a Python-level __new__; this is the same, made in one C call.
_new_tuple = tuple.__new__


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
        # A file that is not a symlink is its directory's real path plus its name: one realpath per directory.
        real_current = os.path.join(os.path.realpath(current), "")
        try:
            with os.scandir(current) as entries:
                for entry in entries:
                    name = entry.name
                    if name.startswith("."):
                        continue
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            pending.append(entry.path)
                        elif name.endswith(CATALOG_SUFFIXES) and entry.is_file():
                            path = entry.path
                            real = os.path.realpath(path) if entry.is_symlink() else real_current + name
                            found.append(_new_tuple(CatalogFile, (path, None, real)))
                    except OSError as exc:
                        if name.endswith(CATALOG_SUFFIXES):
                            reason = f"cannot read the file: {exc.strerror or exc}"
                            found.append(CatalogFile(entry.path, CatalogProblem(entry.path, 0, reason)))
        except OSError as exc:
            raise CatalogDirectoryError(
                CatalogProblem(current, 0, f"cannot list catalog directory: {exc.strerror or exc}")) from exc
    found.sort(key=attrgetter("path"))
    return found
