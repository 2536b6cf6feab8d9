"""What grep's rg may read under Landlock: beneath the workspace, and the files of the system's program
directories.

rg's own walk lists a directory, then opens each subdirectory by path: a directory swapped for a symlink to the
outside in between is followed, and no flag of rg's closes that window. Under this ruleset the kernel refuses
any read that does not land beneath the workspace (the swapped-in symlink resolves outside), whatever the walk
checked before. Reading files beneath /usr and /lib stays allowed (the loader maps rg's libraries after exec);
listing directories there does not. The ruleset is built and applied by runners/landlock.py; where the kernel
has no Landlock, the search runs with rg's own checks only (the server says so once). Either way a root server
runs rg as the process user (workspaces/ripgrep.py), so a misled walk reads at most what `bash` could.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Final

from ..runners.landlock import READ_DIR, READ_FILE, LandlockRuleset, PathRule, build_ruleset

_READS: Final = READ_FILE | READ_DIR
# Where a dynamically linked program and its libraries live; files there may be read, directories not listed.
SYSTEM_DIRECTORIES: Final = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/etc/ld.so.cache",
                             "/etc/ld.so.preload")


def confine_reads(readable: Iterable[str], program: str) -> LandlockRuleset | None:
    """A ruleset that lets a child read and list beneath the directories `readable` (which must exist), and read
    files of `program`'s directory and SYSTEM_DIRECTORIES; None when the kernel has no Landlock."""
    program_files = (os.path.dirname(os.path.realpath(program)), *SYSTEM_DIRECTORIES)
    rules = [*(PathRule(path, _READS) for path in readable),
             *(PathRule(path, READ_FILE, required=False) for path in program_files)]
    return build_ruleset(_READS, rules, confines="the search's reads", when_absent=(
        "grep's rg is kept in the workspace by its own walk (and the process user's permissions) only, which a "
        "directory swapped for a symlink meanwhile can mislead"))
