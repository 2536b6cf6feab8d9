"""Finds the YAML files of catalog directories, and remembers a directory's listing while it cannot have changed.

Creating, removing or renaming an entry updates its directory's modification and change times. So a directory
whose (device, inode, mtime, ctime) and real path are what they were at the last listing still holds the same
entries, and a reload does not scan it again: a stat per directory instead of a scandir with per-entry checks, a
quarter of a reload of 10,000 unchanged files (bench/findings/catalog_scale.md). The ctime is what catches an
mtime put back after the change (tar, rsync -a, cp -a and touch -d do that): no program can set the ctime. Whether a
file's content changed is not this module's question: the reader stats every file.

Two things can change under an unchanged directory identity, and so are never remembered:
- a directory holding a symbolic link (its target may vanish or change type; a ConfigMap's files are all
  links) or an entry that could not be examined: listed again on every read;
- a directory changed twice within one tick of the file system's clock (two files created in the same few
  milliseconds show one mtime and ctime): a listing is only remembered when the directory's mtime and ctime are
  at least RACY_SECONDS older than the moment the listing began, so any later change must move the mtime (the
  reasoning of git's "racily clean" index entries). The margin covers coarse timestamps (2 s on FAT).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import NamedTuple

from ..registry import CatalogProblem

CATALOG_SUFFIXES = (".yaml", ".yml")
RACY_SECONDS = 5
_clock_ns = time.time_ns  # the wall clock file times are set from (tests move it on)
_stat_directory = os.stat  # how a directory's identity is read (the tests' seam: a coarse file-system clock)


class CatalogDirectoryError(Exception):
    """A configured catalog directory is missing or unreadable: the whole reload fails."""

    def __init__(self, problem: CatalogProblem) -> None:
        super().__init__(problem.reason)
        self.problem = problem


class CatalogFile(NamedTuple):
    """A catalog file found in a directory; `problem` is set when the entry could not even be examined.
    `real_path` is the file's path with every symbolic link resolved ("" with a problem). A named tuple, not
    a frozen dataclass: many are made on a cold read, and this is several times cheaper to make."""

    path: str
    problem: CatalogProblem | None = None
    real_path: str = ""


# CatalogFile(...) goes through a Python-level __new__; this is the same, made in one C call.
_new_file = tuple.__new__

_Identity = tuple[int, int, int, int]  # st_dev, st_ino, st_mtime_ns, st_ctime_ns of a directory


@dataclass(frozen=True, slots=True)
class _Listing:
    """One directory's own YAML files and subdirectories, as scanned while it had `identity`."""

    identity: _Identity
    real_path: str
    files: tuple[CatalogFile, ...]
    subdirectories: tuple[str, ...]


class CatalogLister:
    """Lists catalog directories read after read. Not thread-safe: one read at a time (the loader's rule)."""

    def __init__(self) -> None:
        self._remembered: dict[str, _Listing] = {}

    def list(self, directories: Sequence[Path]) -> list[CatalogFile]:
        """The YAML files under each directory, each directory's sorted by path, in directory order; hidden
        entries skipped (a ConfigMap's `..data` and `..2024_...` directories hold the same files as its
        visible links). An entry that cannot be examined (a symlink loop) is listed with its problem; a
        directory that cannot be listed raises CatalogDirectoryError, and nothing is remembered from the read."""
        listing_began_ns = _clock_ns()
        remembered: dict[str, _Listing] = {}
        found: list[CatalogFile] = []
        for directory in directories:
            if not directory.is_dir():
                reason = "does not exist" if not directory.exists() else "is not a directory"
                raise CatalogDirectoryError(CatalogProblem(str(directory), 0, f"catalog directory {reason}"))
            below: list[CatalogFile] = []
            pending = [str(directory)]
            root: str | None = None
            while pending:
                listing = self._listing(pending.pop(), listing_began_ns, remembered)
                root = root or os.path.join(listing.real_path, "")
                below.extend(listing.files)
                pending.extend(listing.subdirectories)
            below.sort(key=attrgetter("path"))  # mostly sorted already: one pass of comparisons
            found.extend(_inside(below, root or ""))
        self._remembered = remembered  # directories no longer under a catalog directory are forgotten
        return found

    def _listing(self, directory: str, listing_began_ns: int, remembered: dict[str, _Listing]) -> _Listing:
        try:
            # The identity before the scan: a change during the scan moves the mtime past what is recorded.
            st = _stat_directory(directory)
            real_path = os.path.realpath(directory)
        except OSError as exc:
            raise _cannot_list(directory, exc) from exc
        identity = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
        known = self._remembered.get(directory)
        if known is not None and known.identity == identity and known.real_path == real_path:
            remembered[directory] = known
            return known
        listing, stable = _scan(directory, real_path, identity)
        if stable and max(st.st_mtime_ns, st.st_ctime_ns) < listing_began_ns - RACY_SECONDS * 1_000_000_000:
            remembered[directory] = listing
        return listing


def _inside(files: list[CatalogFile], root: str) -> list[CatalogFile]:
    """The files, with those whose real path leaves the catalog directory (a symbolic link to anywhere on the
    server, /etc/shadow say) turned into problems: only what is in the directory is the catalog. A ConfigMap's
    links stay inside it (name.yaml -> ..data/name.yaml -> ..2024_.../name.yaml)."""
    if all(file.real_path.startswith(root) for file in files if file.problem is None):
        return files  # the common case: nothing to replace
    return [file if file.problem is not None or file.real_path.startswith(root) else CatalogFile(
        file.path, CatalogProblem(file.path, 0, "a symbolic link to a file outside the catalog directory: "
                                                "refused (only the directory's own files are read)"))
        for file in files]


def _scan(directory: str, real_path: str, identity: _Identity) -> tuple[_Listing, bool]:
    """The directory's listing, and whether it may be remembered (no symbolic links, no problems)."""
    files: list[CatalogFile] = []
    subdirectories: list[str] = []
    stable = True
    # A file that is not a symlink is its directory's real path plus its name: one realpath per directory.
    real_prefix = os.path.join(real_path, "")
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                name = entry.name
                if name.startswith("."):
                    continue
                try:
                    if entry.is_dir(follow_symlinks=False):
                        subdirectories.append(entry.path)
                    elif name.endswith(CATALOG_SUFFIXES) and entry.is_file():
                        path = entry.path
                        if entry.is_symlink():
                            stable = False
                            files.append(_new_file(CatalogFile, (path, None, os.path.realpath(path))))
                        else:
                            files.append(_new_file(CatalogFile, (path, None, real_prefix + name)))
                    elif name.endswith(CATALOG_SUFFIXES) and entry.is_symlink():
                        stable = False  # a link to nothing (or to a directory) may point at a file later
                except OSError as exc:
                    stable = False
                    if name.endswith(CATALOG_SUFFIXES):
                        reason = f"cannot read the file: {exc.strerror or exc}"
                        files.append(CatalogFile(entry.path, CatalogProblem(entry.path, 0, reason)))
    except OSError as exc:
        raise _cannot_list(directory, exc) from exc
    return _Listing(identity, real_path, tuple(files), tuple(subdirectories)), stable


def _cannot_list(directory: str, exc: OSError) -> CatalogDirectoryError:
    return CatalogDirectoryError(
        CatalogProblem(directory, 0, f"cannot list catalog directory: {exc.strerror or exc}"))
