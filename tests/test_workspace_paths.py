"""PathSanitizer on the real filesystem: what it opens, what it reports as a file's state, and how its refusals
reach a caller (INVALID_ARGUMENT with a BadRequest naming the argument). Escapes are in
tests/security/test_security_workspace_paths.py."""

from __future__ import annotations

import contextlib
import os
import pwd
import resource
import shutil
import stat
import tempfile
from pathlib import Path

import grpc
import pytest

from toolhost_server.api.status import status_of
from toolhost_server.errors import UnsafePathError
from toolhost_server.workspaces import FileStateError, PathSanitizer

from helpers.status import error_details


@pytest.fixture
def root(tmp_path):
    workspace = tmp_path / "ws"
    (workspace / "src" / "pkg").mkdir(parents=True)
    (workspace / "src" / "pkg" / "mod.py").write_text("print('hi')\n")
    (workspace / "top.txt").write_text("top\n")
    return workspace


def read_all(sanitizer: PathSanitizer, path: str) -> tuple[str, bytes]:
    with sanitizer.open(path, kind="file") as opened:
        return opened.relative, os.read(opened.fd, 1 << 16)


def test_relative_paths_open_the_file_and_report_where_it_is(root):
    sanitizer = PathSanitizer(root)
    assert read_all(sanitizer, "top.txt") == ("top.txt", b"top\n")
    assert read_all(sanitizer, "src/pkg/mod.py") == ("src/pkg/mod.py", b"print('hi')\n")
    assert read_all(sanitizer, "./src//pkg/./mod.py")[0] == "src/pkg/mod.py"
    assert read_all(sanitizer, "src/pkg/../../top.txt") == ("top.txt", b"top\n")  # `..` that stays inside


def test_absolute_paths_inside_the_root_are_accepted_as_configured_and_as_resolved(root, tmp_path):
    alias = tmp_path / "alias"
    alias.symlink_to(root)
    for sanitizer in (PathSanitizer(root), PathSanitizer(alias)):
        assert read_all(sanitizer, f"{root}/src/pkg/mod.py")[0] == "src/pkg/mod.py"
    assert read_all(PathSanitizer(alias), f"{alias}/top.txt")[0] == "top.txt"
    # Another name of the root is not resolved: only its configured and its real path count.
    with pytest.raises(UnsafePathError, match="is outside the workspace"):
        PathSanitizer(root).open(f"{alias}/top.txt")


def test_directories_open_for_listing_and_the_root_is_dot(root):
    sanitizer = PathSanitizer(root)
    with sanitizer.open(".", kind="directory") as opened:
        assert opened.relative == "." and opened.is_directory
        assert sorted(entry.name for entry in os.scandir(opened.fd)) == ["src", "top.txt"]
    with sanitizer.open("src/", kind="directory") as opened:
        assert opened.relative == "src" and [e.name for e in os.scandir(opened.fd)] == ["pkg"]
    with sanitizer.open(str(root)) as opened:
        assert opened.relative == "." and opened.is_directory


def test_symlinks_inside_the_root_are_followed(root):
    (root / "link.txt").symlink_to("src/pkg/mod.py")
    (root / "src" / "up").symlink_to("../top.txt")
    (root / "pkglink").symlink_to(root / "src" / "pkg")  # absolute, but inside
    (root / "chain1").symlink_to("chain2")
    (root / "chain2").symlink_to("pkglink/mod.py")
    sanitizer = PathSanitizer(root)
    assert read_all(sanitizer, "link.txt") == ("src/pkg/mod.py", b"print('hi')\n")
    assert read_all(sanitizer, "src/up") == ("top.txt", b"top\n")
    assert read_all(sanitizer, "pkglink/mod.py")[0] == "src/pkg/mod.py"
    assert read_all(sanitizer, "chain1")[0] == "src/pkg/mod.py"
    # `..` after a symlinked directory goes to the target's parent, as the kernel does.
    assert read_all(sanitizer, "pkglink/../pkg/mod.py")[0] == "src/pkg/mod.py"


def test_the_opened_fd_is_blocking_read_only_and_close_on_exec(root):
    with PathSanitizer(root).open("top.txt") as opened:
        flags = os.get_blocking(opened.fd), os.get_inheritable(opened.fd)
        assert flags == (True, False)
        with pytest.raises(OSError):
            os.write(opened.fd, b"x")


@pytest.mark.parametrize(("path", "kind", "code"), [
    ("missing.txt", "any", "FILE_NOT_FOUND"),
    ("src/missing/mod.py", "any", "FILE_NOT_FOUND"),
    ("src", "file", "IS_A_DIRECTORY"),
    ("top.txt", "directory", "NOT_A_DIRECTORY"),
    ("top.txt/inside", "any", "NOT_A_DIRECTORY"),
    ("top.txt/", "any", "NOT_A_DIRECTORY"),
    ("top.txt/.", "file", "NOT_A_DIRECTORY"),
    ("dangling", "any", "FILE_NOT_FOUND"),
])
def test_file_state_problems_carry_a_code_for_success_false(root, path, kind, code):
    (root / "dangling").symlink_to("nowhere")
    with pytest.raises(FileStateError) as caught:
        PathSanitizer(root).open(path, kind=kind)
    assert caught.value.code == code
    assert not isinstance(caught.value, UnsafePathError)


def test_a_vanished_workspace_is_a_state_problem(tmp_path):
    with pytest.raises(FileStateError) as caught:
        PathSanitizer(tmp_path / "gone").open("x")
    assert caught.value.code == "WORKSPACE_MISSING"


def _code_of_opening_as(uid: int | None, workspace: Path) -> str:
    """The FileStateError code of opening top.txt in `workspace`, in a forked child that first becomes `uid`."""
    reading, writing = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no pytest machinery from here on, only os._exit
        status = 1
        try:
            os.close(reading)
            if uid is not None:
                entry = pwd.getpwuid(uid)
                os.setgroups([])
                os.setgid(entry.pw_gid)
                os.setuid(uid)
            try:
                PathSanitizer(workspace).open("top.txt")
                code = "OPENED"
            except FileStateError as refused:
                code = refused.code
            os.write(writing, code.encode())
            status = 0
        finally:
            os._exit(status)
    os.close(writing)
    with os.fdopen(reading, "rb") as answer:
        code = answer.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return code


def test_unreadable_file_is_access_denied_for_an_unprivileged_user():
    # Root reads every file whatever its mode, so a root test process opens it in a child that became nobody.
    workspace = Path(tempfile.mkdtemp(prefix="toolhost-workspace-"))
    try:
        workspace.chmod(0o755)
        (workspace / "top.txt").write_text("secret\n")
        (workspace / "top.txt").chmod(0)
        uid = pwd.getpwnam("nobody").pw_uid if os.geteuid() == 0 else None
        assert _code_of_opening_as(uid, workspace) == "ACCESS_DENIED"
    finally:
        shutil.rmtree(workspace)


def test_open_parent_gives_the_directory_and_name_for_an_atomic_replace(root):
    sanitizer = PathSanitizer(root)
    with sanitizer.open_parent("src/pkg/new.py") as parent:
        assert (parent.name, parent.relative) == ("new.py", "src/pkg/new.py")
        fd = os.open(".new.py.tmp", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644, dir_fd=parent.fd)
        os.write(fd, b"new\n")
        os.fsync(fd)
        os.close(fd)
        os.replace(".new.py.tmp", parent.name, src_dir_fd=parent.fd, dst_dir_fd=parent.fd)
        os.fsync(parent.fd)  # a real directory fd, not O_PATH
    assert (root / "src" / "pkg" / "new.py").read_text() == "new\n"


def test_open_parent_follows_a_last_symlink_and_can_create_parents(root):
    (root / "alias.py").symlink_to("src/pkg/mod.py")
    sanitizer = PathSanitizer(root)
    with sanitizer.open_parent("alias.py") as parent:
        assert (parent.name, parent.relative) == ("mod.py", "src/pkg/mod.py")
    with pytest.raises(FileStateError) as caught:
        sanitizer.open_parent("a/b/c.txt")
    assert caught.value.code == "FILE_NOT_FOUND" and not (root / "a").exists()
    with sanitizer.open_parent("a/b/c.txt", create_parents=True) as parent:
        assert parent.relative == "a/b/c.txt"
    assert stat.S_ISDIR((root / "a" / "b").lstat().st_mode)
    with pytest.raises(UnsafePathError, match="ends with '/'"):
        sanitizer.open_parent("newdir/")
    for directory in ("src", "src/pkg/..", "."):
        with pytest.raises(FileStateError) as caught:
            sanitizer.open_parent(directory)
        assert caught.value.code == "IS_A_DIRECTORY"


def test_a_refused_path_becomes_invalid_argument_with_a_bad_request_naming_the_argument(root):
    with pytest.raises(UnsafePathError) as caught:
        PathSanitizer(root).open("../outside", argument="file_path")
    status = status_of(caught.value, "CallTool")
    assert status.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "invalid argument 'file_path'" in status.details and "give a path inside it" in status.details
    info, violations = error_details(_Refused(status))
    assert info.reason == "INVALID_ARGUMENTS"
    assert [field for field, _ in violations] == ["/file_path"]


class _Refused:
    """What rpc_status.from_call reads of a refused call, from the grpc.Status the server would send."""

    def __init__(self, status: grpc.Status) -> None:
        self._status = status

    def code(self) -> grpc.StatusCode:
        return self._status.code

    def details(self) -> str:
        return self._status.details

    def trailing_metadata(self) -> object:
        return self._status.trailing_metadata


# depth, descriptors and what a failed walk leaves (issue 18 review: M3, L1, L4)


def test_a_deep_path_costs_a_bounded_number_of_descriptors(root):
    # 120 directories deep, walked down and back up past every directory it held, in a child that may open only
    # 40 descriptors more than it has: a descriptor per component would exhaust them.
    deep = root / "/".join(["d"] * 120)
    deep.mkdir(parents=True)
    (deep / "f.txt").write_text("deep\n")
    (root / "d" / "g.txt").write_text("shallow\n")
    down = "/".join(["d"] * 120)
    paths = [f"{down}/f.txt", f"{down}/" + "../" * 119 + "g.txt"]
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports by its exit status
        code = 1
        try:
            limit = max(int(fd) for fd in os.listdir("/proc/self/fd")) + 40
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
            found = [read_all(PathSanitizer(root), path) for path in paths]
            code = 0 if found == [(f"{down}/f.txt", b"deep\n"), ("d/g.txt", b"shallow\n")] else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_walk_that_fails_removes_the_directories_it_made(root):
    sanitizer = PathSanitizer(root)
    before = sorted(str(path.relative_to(root)) for path in root.rglob("*"))
    for path in ("made/deeper/../../top.txt/x/f.txt", "made/../top.txt/sub/f.txt"):
        with pytest.raises(FileStateError) as caught:
            sanitizer.open_parent(path, create_parents=True)
        assert caught.value.code == "NOT_A_DIRECTORY"
    assert sorted(str(path.relative_to(root)) for path in root.rglob("*")) == before


@pytest.mark.skipif(os.geteuid() != 0, reason="giving directories away needs root")
def test_a_made_directory_swapped_for_a_hard_link_is_never_given_away(root, monkeypatch):
    # What a user with write access to the parent can do between mkdir and chown: rename the new directory and
    # put a hard link to someone else's file in its place. Made to happen every time by running it after mkdir.
    victim = root / "victim.txt"
    victim.write_text("root's\n")
    real_mkdir = os.mkdir

    def mkdir_then_swap(name: str, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        real_mkdir(name, mode, dir_fd=dir_fd)
        os.rename(name, f"{name}.moved", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        os.link(victim, name, dst_dir_fd=dir_fd)

    monkeypatch.setattr(os, "mkdir", mkdir_then_swap)
    nobody = pwd.getpwnam("nobody")
    with contextlib.suppress(FileStateError, UnsafePathError):
        PathSanitizer(root).open_parent("new/f.txt", create_parents=True,
                                        owner=(nobody.pw_uid, nobody.pw_gid)).close()
    assert victim.stat().st_uid == 0


@pytest.mark.parametrize(("path", "kind", "hint"), [
    ("nope.txt", "file", "ls"), ("src/nope/x", "any", "ls"), ("src", "file", "ls"), ("top.txt", "directory", "read"),
    ("top.txt/x", "any", "ls"),
])
def test_file_state_messages_say_how_to_go_on(root, path, kind, hint):
    with pytest.raises(FileStateError) as caught:
        PathSanitizer(root).open(path, kind=kind)
    assert f"; {hint}" in caught.value.message or f", {hint}" in caught.value.message or \
        f" {hint} " in caught.value.message, caught.value.message
