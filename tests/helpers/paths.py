"""Where things are: the repository, the tests directory, and the pinned developer tools `make tools` installs."""

from __future__ import annotations

import shutil
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = TESTS_DIR.parent
TOOLS_BIN = REPO_ROOT / ".tools" / "bin"


def tool_binary(name: str) -> str:
    """The path of a pinned developer tool installed by `make tools` (grpcurl, grpc-health-probe, actionlint)."""
    path = TOOLS_BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} is not installed: run `make tools` (make test does it)")
    return found
