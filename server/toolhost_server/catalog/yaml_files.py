"""Reads YAML catalog directories, re-parsing only files that changed since the last read.

A file is known by (real path, inode, mtime_ns, size): a Kubernetes ConfigMap update swaps the `..data` symlink,
which changes the real path of every file, while an untouched file in a plain directory is not read again: a
reload costs one stat per unchanged file (directory_listing does not scan a directory whose entries cannot
have changed).
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
from pathlib import Path
from typing import Any

import yaml

from ..registry import CatalogProblem, RegisteredTool
from .definition import DefinitionError
from .directory_listing import CatalogLister
from .strict_yaml import CatalogYamlError, error_line, error_text, line_of, load_catalog_yaml, mark_line

MAX_FILE_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class CatalogRead:
    """The tools of every catalog file in order (directory order, then path order), and the problems."""

    tools: list[RegisteredTool]
    problems: list[CatalogProblem]


# (real path, inode, mtime_ns, ctime_ns, size): a plain tuple, compared once per file and reload. The ctime catches
# a rewrite that put the mtime back (tar, rsync -a).
_FileKey = tuple[str, int, int, int, int]


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
        self._lister = CatalogLister()

    def read(self, directories: Sequence[Path]) -> CatalogRead:
        """Read every directory; CatalogDirectoryError when one of them cannot be listed."""
        files = self._lister.list(directories)
        tools: list[RegisteredTool] = []
        problems: list[CatalogProblem] = []
        parsed: dict[str, _Parsed] = {}
        kept_good: dict[str, RegisteredTool] = {}
        previous, last_good = self._parsed, self._last_good
        self._parsed, self._last_good = parsed, kept_good
        # Locals and tuple unpacking: this loop runs once per file on every reload, mostly for files that
        # did not change, so its own overhead is a large part of what a small reload costs.
        stat = os.stat
        add_tool = tools.append
        result: RegisteredTool | CatalogProblem | None
        for path, result, real_path in files:
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
                        if cached.key == (real_path, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size):
                            parsed[path] = cached
                            result = cached.result
                if result is None:
                    result = self._read_file(path, real_path, cached, last_good.get(path))
            if isinstance(result, RegisteredTool):
                add_tool(result)
                kept_good[path] = result
                continue
            good = last_good.get(path)
            if good is not None:
                add_tool(good)
                kept_good[path] = good
                result = CatalogProblem(result.file, result.line,
                                        f"{result.reason} (still serving its last good version)")
            problems.append(result)
        return CatalogRead(tools, problems)

    def _read_file(self, path: str, real_path: str, cached: _Parsed | None,
                   last_good: RegisteredTool | None) -> RegisteredTool | CatalogProblem:
        try:
            with open(path, "rb") as handle:
                st = os.fstat(handle.fileno())
                key = (real_path, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
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
