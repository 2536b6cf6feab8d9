"""A configured workspace: a named directory the file tools are confined to, and what they may do there."""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_MAX_FILE_BYTES = 10 * 1024 * 1024
WORKSPACE_NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True, slots=True)
class Workspace:
    """One entry of the `workspaces` setting, validated by config.py (name, an existing absolute directory,
    owner a user of this system).

    `owner` empty means the process user (`Config.process_user`, nobody for a root server): files the tools
    create then belong to the user `bash` runs as, so both see the same files.

    `bash_as_server_user` lets `bash` run where it would run as the server's own user (a server that is not
    root, or process_user root), which can read the server's credentials and database: dangerous, off by default.
    """

    name: str
    path: str
    read_only: bool = False
    allow_bash: bool = False
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    owner: str = ""
    bash_as_server_user: bool = False
