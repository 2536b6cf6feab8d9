"""The workspaces a server serves, as the file tools reach them: by the `workspace` argument, each with its
PathSanitizer and the uid/gid that files created there get."""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..errors import FieldViolation, InvalidArgumentsError
from .paths import PathSanitizer
from .workspace import Workspace

SERVER_USER_SHELL: Final = (
    "bash would run as the server's own user, which can read the server's credentials and database: run the "
    "server as root with process_user set to another user (nobody by default), or, accepting that risk, set "
    "bash_as_server_user: true on the workspace")
NO_BASH_WORKSPACE: Final = "no workspace allows bash (set allow_bash: true on one in the workspaces setting)"


@dataclass(frozen=True, slots=True)
class ServedWorkspace:
    """One configured workspace, ready for a tool: its settings, its sanitizer and its files' owner."""

    workspace: Workspace
    paths: PathSanitizer
    # (uid, gid) given to the files and directories the tools create; None: left as the server made them (a
    # server that is not root cannot give files away).
    owner: tuple[int, int] | None

    @property
    def name(self) -> str:
        return self.workspace.name


class WorkspaceSet:
    """The configured workspaces in their order (the first is the default), and the one rule for choosing one.

    `shell_refusal` says why `bash` is not served even where a workspace allows it (a server without
    authentication on a non-loopback address), or is "". `process_identity` is the user bash runs as; None (the
    server's own user) serves bash only in the workspaces that accept it with bash_as_server_user.
    """

    def __init__(self, workspaces: tuple[Workspace, ...], process_identity: tuple[int, int] | None,
                 shell_refusal: str = "") -> None:
        self._served = tuple(
            ServedWorkspace(w, PathSanitizer(w.path), _owner(w, process_identity)) for w in workspaces)
        self._by_name = {served.name: served for served in self._served}
        self.shell_refusal = shell_refusal
        self._bash_user_is_separate = process_identity is not None

    def __iter__(self) -> Any:
        return iter(self._served)

    def __len__(self) -> int:
        return len(self._served)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    @property
    def with_bash(self) -> tuple[ServedWorkspace, ...]:
        """The workspaces where `bash` may run: those that allow it, and where it would run as a user other
        than the server's or the workspace accepts that (none while shell_refusal holds)."""
        return tuple(served for served in self._served if not self.bash_refusal(served))

    def bash_refusal(self, served: ServedWorkspace | None = None) -> str:
        """Why `bash` may not run in `served` (or, with None, in any workspace), or ""."""
        if self.shell_refusal:
            return self.shell_refusal
        candidates = self._served if served is None else (served,)
        allowing = [s for s in candidates if s.workspace.allow_bash]
        if not allowing:
            return NO_BASH_WORKSPACE if served is None else (
                f"workspace {served.name!r} does not allow bash (an operator enables it with allow_bash: true)")
        if self._bash_user_is_separate or any(s.workspace.bash_as_server_user for s in allowing):
            return ""
        return SERVER_USER_SHELL

    def choose(self, arguments: Mapping[str, Any], tool: str = "") -> ServedWorkspace:
        """The workspace the call's `workspace` argument names, or the first when it names none;
        InvalidArgumentsError (naming the argument and listing the workspaces) for a name not configured."""
        name = arguments.get("workspace")
        if name is None or name == "":
            if not self._served:
                raise InvalidArgumentsError(tool, [FieldViolation(
                    "/workspace", "no workspace is configured on this server; an operator adds one with "
                                  "--workspace NAME=PATH")])
            return self._served[0]
        served = self._by_name.get(name) if isinstance(name, str) else None
        if served is None:
            raise InvalidArgumentsError(tool, [FieldViolation(
                "/workspace", f"{name!r} is not a workspace of this server; use one of: "
                              f"{', '.join(self.names)} (list_workspaces shows them)")])
        return served


def _owner(workspace: Workspace, process_identity: tuple[int, int] | None) -> tuple[int, int] | None:
    """Whom created files belong to: the workspace's `owner`, else the user process tools run as; nobody can be
    given a file by a server that is not root."""
    if os.geteuid() != 0:
        return None
    if workspace.owner:
        entry = pwd.getpwuid(int(workspace.owner)) if workspace.owner.isdigit() else pwd.getpwnam(workspace.owner)
        return entry.pw_uid, entry.pw_gid
    return process_identity
