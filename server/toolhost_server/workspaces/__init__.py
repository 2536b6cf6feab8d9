"""Workspaces: the directories the file tools work in, and the one place that resolves and opens paths in them."""

from .paths import FileStateError, OpenedParent, OpenedPath, PathSanitizer
from .workspace import DEFAULT_MAX_FILE_BYTES, WORKSPACE_NAME_PATTERN, Workspace

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "WORKSPACE_NAME_PATTERN",
    "FileStateError",
    "OpenedParent",
    "OpenedPath",
    "PathSanitizer",
    "Workspace",
]
