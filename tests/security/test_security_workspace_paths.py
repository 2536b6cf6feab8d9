"""Issue 18: a path given to a workspace tool never opens anything outside the workspace. `..`, absolute paths,
symlinks leaving the root (directly, through a symlinked directory, in a chain or a loop), device files, FIFOs,
sockets and malformed strings are refused as arguments (UnsafePathError), and a directory swapped for a symlink
while a path through it is opened never yields an outside file: the race is run, not reasoned about."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import sys
import threading

import pytest

from toolhost_server.errors import UnsafePathError
from toolhost_server.workspaces import FileStateError, PathSanitizer

SWAPS = 2000


@pytest.fixture
def layout(tmp_path):
    """A workspace `ws` (inside.txt, dir/inner.txt) next to `outside` (secret.txt), which nothing may open."""
    root, outside = tmp_path / "ws", tmp_path / "outside"
    (root / "dir").mkdir(parents=True)
    outside.mkdir()
    (root / "inside.txt").write_text("inside")
    (root / "dir" / "inner.txt").write_text("inner")
    (outside / "secret.txt").write_text("secret")
    return root, outside


def refused(sanitizer: PathSanitizer, path: object, match: str | None = None) -> UnsafePathError:
    with pytest.raises(UnsafePathError, match=match) as caught:
        sanitizer.open(path, argument="path").close()
    assert caught.value.violations[0].pointer == "/path"
    return caught.value


@pytest.mark.parametrize("path", [
    "..", "../outside/secret.txt", "dir/../../outside/secret.txt", "dir/../..", "./../ws/inside.txt",
    "dir/./../../outside", "a/b/../../../outside/secret.txt",
])
def test_dot_dot_that_leaves_the_root_is_refused(layout, path):
    root, _ = layout
    assert "outside the workspace" in refused(PathSanitizer(root), path).message


def test_absolute_paths_outside_the_root_are_refused(layout):
    root, outside = layout
    sanitizer = PathSanitizer(root)
    (root.parent / "ws2").mkdir()  # a sibling whose name starts with the root's
    (root.parent / "ws2" / "x").write_text("x")
    for path in ("/etc/passwd", f"{outside}/secret.txt", f"{root}/../outside/secret.txt", f"{root}2/x", "/",
                 f"{root.parent}"):
        refused(sanitizer, path, "outside the workspace")


def test_symlinks_leaving_the_root_are_refused_for_files_and_directories(layout):
    root, outside = layout
    (root / "abs_file").symlink_to(outside / "secret.txt")
    (root / "rel_file").symlink_to("../outside/secret.txt")
    (root / "abs_dir").symlink_to(outside)
    (root / "rel_dir").symlink_to("../outside")
    (root / "dir" / "deep").symlink_to("../../outside")
    (root / "chain").symlink_to("dir/hop")
    (root / "dir" / "hop").symlink_to("../abs_file")
    (root / "root_itself").symlink_to("/")
    (root / "null").symlink_to("/dev/null")
    sanitizer = PathSanitizer(root)
    for path in ("abs_file", "rel_file", "abs_dir", "rel_dir", "abs_dir/secret.txt", "rel_dir/secret.txt",
                 "dir/deep/secret.txt", "chain", "root_itself/etc/passwd", "null", f"{root}/abs_dir/secret.txt"):
        refused(sanitizer, path, "outside the workspace")


def test_writing_through_a_symlink_that_leaves_creates_nothing_outside(layout):
    root, outside = layout
    (root / "abs_dir").symlink_to(outside)
    sanitizer = PathSanitizer(root)
    for path in ("abs_dir/new/file.txt", "abs_dir/secret.txt", "../outside/new.txt"):
        with pytest.raises(UnsafePathError):
            sanitizer.open_parent(path, create_parents=True).close()
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    (root / "escape").symlink_to(outside / "made.txt")  # a dangling link out: writing through it would create
    with pytest.raises(UnsafePathError):
        sanitizer.open_parent("escape").close()


def test_symlink_loops_are_refused_after_forty_links(layout):
    root, _ = layout
    (root / "self").symlink_to("self")
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("a")
    (root / "dir" / "loop").symlink_to(".")  # a directory loop: each link is cheap, the count is not
    sanitizer = PathSanitizer(root)
    for path in ("self", "a", "b/x", "a/../inside.txt"):
        refused(sanitizer, path, "more than 40 symlinks")
    with sanitizer.open("dir/" + "loop/" * 40 + "inner.txt") as opened:
        assert opened.relative == "dir/inner.txt"
    refused(sanitizer, "dir/" + "loop/" * 41 + "inner.txt", "more than 40 symlinks")


def test_fifos_sockets_and_devices_are_refused_without_blocking(layout):
    root, _ = layout
    os.mkfifo(root / "fifo")  # opening it for reading would block until a writer came
    (root / "fifo_link").symlink_to("fifo")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(root / "sock"))
    try:
        sanitizer = PathSanitizer(root)
        refused(sanitizer, "fifo", "is a FIFO")
        refused(sanitizer, "fifo_link", "is a FIFO")
        refused(sanitizer, "sock", "is a socket")
        try:
            os.mknod(root / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("mknod needs CAP_MKNOD; the FIFO and socket cases ran")
        refused(sanitizer, "null", "is a device file")
    finally:
        listener.close()


@pytest.mark.parametrize(("path", "match"), [
    ("", "is empty"),
    ("inside.txt\x00.png", "NUL"),
    ("\x00", "NUL"),
    (None, "must be a string"),
    (["inside.txt"], "must be a string"),
    ("a" * 256, "longer than 255 bytes"),
    ("dir/" + "é" * 128, "longer than 255 bytes"),  # 256 bytes in UTF-8
    ("d/" * 2048, "longer than 4095 bytes"),
])
def test_malformed_paths_are_refused_before_any_lookup(layout, path, match):
    root, _ = layout
    refused(PathSanitizer(root), path, match)


def test_long_but_legal_names_are_only_missing(layout):
    root, _ = layout
    with pytest.raises(FileStateError) as caught:
        PathSanitizer(root).open("/".join(["n" * 255] * 15))  # 3839 bytes: shape fine, nothing there
    assert caught.value.code == "FILE_NOT_FOUND"


def test_a_directory_swapped_for_a_symlink_during_the_walk_never_yields_an_outside_file(layout):
    # The thread swaps `swap` between a real directory (holding secret.txt, a decoy of the same name) and a
    # symlink to `outside`, while this thread opens swap/secret.txt and the parent for swap/new.txt as fast as it
    # can. Each open must give the inside file (or directory) or a refusal, never the outside one.
    root, outside = layout
    (root / "real").mkdir()
    (root / "real" / "secret.txt").write_text("decoy inside")
    (root / "link_made").symlink_to(outside)
    outside_file, outside_dir = os.stat(outside / "secret.txt"), os.stat(outside)
    forbidden = {(outside_file.st_dev, outside_file.st_ino), (outside_dir.st_dev, outside_dir.st_ino)}
    done = threading.Event()
    swaps = 0
    failure: list[BaseException] = []

    def swapper() -> None:
        nonlocal swaps
        try:
            os.rename(root / "real", root / "swap")
            while swaps < SWAPS:
                os.rename(root / "swap", root / "real")  # the directory leaves...
                os.rename(root / "link_made", root / "swap")  # ...the symlink out takes its name...
                os.rename(root / "swap", root / "link_made")
                os.rename(root / "real", root / "swap")  # ...and the directory comes back
                swaps += 1
        except BaseException as exc:  # reported by the main thread
            failure.append(exc)
        finally:
            done.set()

    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # interleave the two threads between syscalls as often as possible
    thread = threading.Thread(target=swapper, daemon=True)
    outcomes = {"inside": 0, "refused": 0, "state": 0}
    sanitizer = PathSanitizer(root)
    try:
        thread.start()
        while not done.is_set():
            for opener in (lambda: sanitizer.open("swap/secret.txt"),
                           lambda: sanitizer.open_parent("swap/new.txt")):
                try:
                    opened = opener()
                except UnsafePathError:
                    outcomes["refused"] += 1
                    continue
                except FileStateError as exc:
                    assert exc.code in ("FILE_NOT_FOUND", "FILE_CHANGED"), exc
                    outcomes["state"] += 1
                    continue
                try:
                    found = os.fstat(opened.fd)
                    assert (found.st_dev, found.st_ino) not in forbidden, f"opened outside: {opened}"
                    outcomes["inside"] += 1
                finally:
                    opened.close()
    finally:
        sys.setswitchinterval(previous)
        done.wait()
        thread.join()
    assert not failure, failure
    assert swaps == SWAPS
    # The race was run, not dodged: the walk met the directory and the symlink both.
    assert outcomes["inside"] > 0 and outcomes["refused"] > 0, outcomes


def test_a_file_swapped_for_a_symlink_before_the_reopen_is_never_followed(layout):
    # The last component: the walk sees a regular file, then reopens it by name; a symlink put there meanwhile
    # must not be followed (O_NOFOLLOW) and a different file must not be returned (device and inode compared).
    root, outside = layout
    (root / "file_made").write_text("inside")
    (root / "link_made").symlink_to(outside / "secret.txt")
    secret = os.stat(outside / "secret.txt")
    done = threading.Event()
    swaps = 0

    def swapper() -> None:
        nonlocal swaps
        try:
            os.rename(root / "file_made", root / "target")
            while swaps < SWAPS:
                os.rename(root / "target", root / "file_made")
                os.rename(root / "link_made", root / "target")
                os.rename(root / "target", root / "link_made")
                os.rename(root / "file_made", root / "target")
                swaps += 1
        finally:
            done.set()

    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    thread = threading.Thread(target=swapper, daemon=True)
    opened_inside = 0
    sanitizer = PathSanitizer(root)
    try:
        thread.start()
        while not done.is_set():
            try:
                opened = sanitizer.open("target", kind="file")
            except (UnsafePathError, FileStateError):
                continue
            try:
                found = os.fstat(opened.fd)
                assert (found.st_dev, found.st_ino) != (secret.st_dev, secret.st_ino)
                assert os.pread(opened.fd, 16, 0) == b"inside"
                opened_inside += 1
            finally:
                opened.close()
    finally:
        sys.setswitchinterval(previous)
        done.wait()
        thread.join()
    assert swaps == SWAPS and opened_inside > 0


def test_nothing_is_left_open(layout):
    root, outside = layout
    (root / "abs_dir").symlink_to(outside)
    before = len(os.listdir("/proc/self/fd"))
    sanitizer = PathSanitizer(root)
    for _ in range(50):
        for path in ("abs_dir/secret.txt", "missing", "dir/inner.txt", "..", "dir"):
            with contextlib.suppress(UnsafePathError, FileStateError):
                sanitizer.open(path).close()
        sanitizer.open_parent("dir/new.txt").close()
    assert len(os.listdir("/proc/self/fd")) == before



def test_a_path_of_more_components_than_any_workspace_is_deep_is_refused_and_makes_nothing(layout):
    root, _ = layout
    before = sorted(root.rglob("*"))
    for path in ("d/" * 300 + "f.txt", "a/.." + "/a/.." * 200 + "/f.txt"):
        with pytest.raises(UnsafePathError, match="more than 256 components") as caught:
            PathSanitizer(root).open_parent(path, argument="path", create_parents=True).close()
        assert caught.value.violations[0].pointer == "/path"
    assert sorted(root.rglob("*")) == before
