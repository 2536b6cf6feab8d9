"""Whom user tools run as, and whether this server may serve them at all.

A user tool is a bash script any caller with `manage_tools` writes. As the server's own user it could read the
server's credentials, its store key (TOOLHOST_STORE_KEY in /proc/<pid>/environ, the store_key_file) and its
database, and print them encoded past the redactor. So user tools are served, like `bash`, only where they run
as another user: a root server whose process_user is not root (Config.process_identity). An operator who
accepts the risk says so with `user_tools_as_server_user: true`.
"""

from __future__ import annotations

import os

from ..config import Config


def user_tools_refusal(config: Config) -> str:
    """Why this server must not serve user tools (nor tool_create, tool_update, tool_run), or "" when it may."""
    if config.user_tools_as_server_user or config.process_identity() is not None:
        return ""
    uid = os.geteuid()
    why = ("the server runs as root and process_user is root" if uid == 0
           else f"the server does not run as root (uid {uid}), so it cannot switch to process_user")
    return (f"user tools would run as the server's own user ({why}), and could read its credentials and database; "
            "run the server as root with process_user naming an unprivileged user (the default, nobody), or set "
            "user_tools_as_server_user: true (TOOLHOST_USER_TOOLS_AS_SERVER_USER) to accept that risk")
