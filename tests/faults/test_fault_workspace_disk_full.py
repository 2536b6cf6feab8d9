"""Fault injection: a workspace whose filesystem is full. A `write` (or `edit`) that does not fit fails with
NO_SPACE, the original file is intact byte for byte, and no temporary file is left behind; once there is space
again the same write succeeds.

The full disk is a 1 MiB tmpfs mounted as the workspace and filled with a file. Where mounting is refused (no
root, or no CAP_SYS_ADMIN) the test says so in a warning and lowers RLIMIT_FSIZE instead: the server runs in
this process, and a write past that limit fails with EFBIG (Python ignores SIGXFSZ), which is the same failure
for the tools.
"""

from __future__ import annotations

import errno
import os
import resource
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolhost_server.workspaces import Workspace

from helpers.calls import call

pytestmark = [pytest.mark.slow]

TMPFS_SIZE = "1m"
ORIGINAL = ("".join(map(chr, range(32, 127))) + "\n").encode() * 680 + b"END\n"  # 64 KiB of varied text
LARGER = "z" * 512 * 1024  # more than a full 1 MiB tmpfs has left


class FullWorkspace:
    """The workspace directory, on a filesystem that `fill` makes full and `free` frees again."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def fill(self) -> None:
        raise NotImplementedError

    def free(self) -> None:
        raise NotImplementedError


class FullTmpfs(FullWorkspace):
    """A tmpfs of TMPFS_SIZE; filling it writes a file outside the workspace directory until ENOSPC."""

    def fill(self) -> None:
        chunk = b"\0" * 65536
        with open(self.root.parent / "filler", "wb", buffering=0) as filler:
            for size in (len(chunk), 4096, 1):  # down to the last byte the pages left hold
                try:
                    while True:
                        filler.write(chunk[:size])
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise

    def free(self) -> None:
        (self.root.parent / "filler").unlink()


class FileSizeLimit(FullWorkspace):
    """RLIMIT_FSIZE of this process (which runs the server), lowered below the size of LARGER."""

    def fill(self) -> None:
        self.previous = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (len(ORIGINAL) * 2, self.previous[1]))

    def free(self) -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, self.previous)


@pytest.fixture
def full_workspace() -> Iterator[FullWorkspace]:
    mount_point = Path(tempfile.mkdtemp(prefix="toolhost-workspace-full-"))
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE},mode=0755", "none",
                              str(mount_point)], capture_output=True, text=True, check=False)
    root = mount_point / "w"
    root.mkdir()
    try:
        if mounted.returncode == 0:
            yield FullTmpfs(root)
        else:
            warnings.warn(f"mount -t tmpfs refused ({mounted.stderr.strip() or mounted.returncode}): the full disk "
                          "is RLIMIT_FSIZE of the test process instead", stacklevel=1)
            yield FileSizeLimit(root)
    finally:
        if mounted.returncode == 0:
            subprocess.run(["umount", str(mount_point)], capture_output=True, check=False)
        shutil.rmtree(mount_point, ignore_errors=True)


def entries(root: Path) -> list[str]:
    return sorted(os.listdir(root))


async def test_a_write_that_does_not_fit_fails_with_no_space_and_leaves_the_original_intact(start_server,
                                                                                           full_workspace):
    root = full_workspace.root
    server = await start_server(workspaces=(Workspace("w", str(root)),))
    original = root / "original.txt"
    response = await call(server, "write", path="original.txt", content=ORIGINAL.decode())
    assert response.success, response.error.message
    original.chmod(0o640)
    before = original.stat()

    full_workspace.fill()
    try:
        response = await call(server, "write", path="original.txt", content=LARGER)
        assert not response.success and response.error.code == "NO_SPACE", response.error.message
        assert "original is intact" in response.error.message
        response = await call(server, "edit", path="original.txt", old_string="END",
                              new_string=LARGER[:300_000])
        assert not response.success and response.error.code == "NO_SPACE", response.error.message
        response = await call(server, "write", path="new/dir/file.txt", content=LARGER)
        assert not response.success and response.error.code == "NO_SPACE", response.error.message
        assert original.read_bytes() == ORIGINAL
        after = original.stat()
        assert (after.st_ino, after.st_mode, after.st_mtime_ns) == (before.st_ino, before.st_mode,
                                                                   before.st_mtime_ns)
        assert not [name for name in entries(root) if name.startswith(".toolhost-")], entries(root)
        assert not (root / "new" / "dir" / "file.txt").exists()
    finally:
        full_workspace.free()

    response = await call(server, "write", path="original.txt", content=LARGER)
    assert response.success, response.error.message
    assert original.read_text() == LARGER and oct(original.stat().st_mode & 0o777) == oct(0o640)
    # The parent directories the failed write made stay (a directory takes no data block on tmpfs).
    assert set(entries(root)) <= {"new", "original.txt"}
