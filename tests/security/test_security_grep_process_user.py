"""grep's rg runs as the process user on a root server, not as root: a file that user may not read is not
searched (even when a walk is misled, Landlock or not, rg reads no more than `bash` could), while a workspace
beneath directories that user may not enter is still searched through the descriptor the server opened."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict

from toolhost_server.workspaces import Workspace

from helpers.calls import call
from helpers.servers import RunningServer, ServerFactory

pytestmark = [
    pytest.mark.skipif(shutil.which("rg") is None, reason="needs ripgrep (make test installs it)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: only a root server runs rg as another user"),
]


async def serve_as_nobody(start_server: ServerFactory, root: Path) -> RunningServer:
    return await start_server(process_user="nobody", workspaces=(Workspace("w", str(root)),))


async def grep(server: RunningServer, **arguments: Any) -> dict[str, Any]:
    response = await call(server, "grep", arguments)
    assert response.success, response.error
    output: dict[str, Any] = MessageToDict(response.structured_output)
    return output


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace beneath tmp_path, which the user nobody may not enter."""
    tmp_path.chmod(0o700)
    root = tmp_path / "w"
    (root / "sub").mkdir(parents=True)
    (root / "open.txt").write_text("needle in the open\n")
    (root / "sub" / "deeper.txt").write_text("needle deeper\n")
    secret = root / "root-only.txt"
    secret.write_text("needle only root may read\n")
    secret.chmod(0o600)
    closed = root / "closed"
    closed.mkdir(mode=0o700)
    (closed / "inner.txt").write_text("needle in a closed directory\n")
    return root


async def test_rg_reads_only_what_the_process_user_may_read(start_server, workspace: Path):
    server = await serve_as_nobody(start_server, workspace)
    result = await grep(server, pattern="needle")
    # Found through the opened directory although nobody may not enter tmp_path; the root-only file and
    # directory are not searched, and rg says why.
    assert result["files"] == ["open.txt", "sub/deeper.txt"], result
    assert any("root-only.txt" in warning and "Permission denied" in warning for warning in result["warnings"]), \
        result
    assert any("closed" in warning and "Permission denied" in warning for warning in result["warnings"]), result
    # The difference is the user rg runs as: with process_user root (the server's own user) the same search
    # finds them.
    as_root = await start_server(process_user="root", workspaces=(Workspace("w", str(workspace)),))
    assert (await grep(as_root, pattern="needle"))["files"] == [
        "closed/inner.txt", "open.txt", "root-only.txt", "sub/deeper.txt"]


async def test_one_file_is_searched_through_its_descriptor_when_the_process_user_may_read_it(
        start_server, workspace: Path):
    server = await serve_as_nobody(start_server, workspace)
    assert (await grep(server, pattern="needle", path="sub/deeper.txt"))["files"] == ["sub/deeper.txt"]
    unreadable = await call(server, "grep", {"pattern": "needle", "path": "root-only.txt"})
    assert unreadable.success, unreadable.error
    assert MessageToDict(unreadable.structured_output).get("files", []) == []


async def test_a_workspace_the_process_user_may_not_read_is_searched_as_nothing_with_a_warning(
        start_server, workspace: Path):
    """The decision: rg reads as the process user even the workspace's own directory (0700, root's), so such a
    workspace finds nothing and says why, as `bash` could list nothing there either. A file in it that the user
    may read, named as `path`, is still searched: the server opened it, and rg reads the descriptor."""
    workspace.chmod(0o700)
    server = await serve_as_nobody(start_server, workspace)
    result = await grep(server, pattern="needle")
    assert result.get("files", []) == [] and any("Permission denied" in w for w in result["warnings"]), result
    assert (await grep(server, pattern="needle", path="open.txt"))["files"] == ["open.txt"]
