"""Issue 18's escape corpus, through a real server: every path a hostile caller might hand the file tools to
reach outside their workspace. The strings that leave the root (`..`, absolute paths, symlinks out, chains and
loops, NUL, over-long names, devices/FIFOs/sockets) are INVALID_ARGUMENT naming the argument, from every tool,
and change nothing anywhere. The strings that only look like an escape (URL-encoded dots, look-alike
characters, backslashes) are file names like any other: read finds no such file, and write creates exactly that
name inside the workspace, nowhere else. A symlink swapped in and out during the calls never yields the outside.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
from pathlib import Path

import grpc
import pytest

from toolhost_server.workspaces import Workspace

from helpers.calls import call
from helpers.status import violations

SECRET = "outside-secret-7f3a"
SWAP_CALLS = 150


def escaping_paths(root: Path, outside: Path, sibling: Path) -> list[str]:
    """Paths that reach (or would reach) outside `root`: each must be refused as an argument."""
    return [
        # `..` in every position
        "..", "../outside/secret.txt", "../../etc/passwd", "dir/../../outside/secret.txt",
        "./../outside/secret.txt", "dir/./../../outside/new.txt", "../ws/../outside/secret.txt",
        "dir/" + "../" * 12 + "etc/passwd", "dir/inner/../../../outside",
        # absolute paths outside, or dressed up as inside
        "/etc/passwd", "//etc/passwd", "/../etc/passwd", f"{outside}/secret.txt", "/proc/self/root/etc/passwd",
        "/proc/self/cwd/secret.txt", f"/proc/self/root{outside}/secret.txt", f"{root}/../outside/secret.txt",
        f"{root}/dir/../../outside/secret.txt", f"{sibling}/secret.txt", "/dev/zero", "/dev/null",
        # symlinks leaving the root: to a directory, a file, an absolute target, up through `..`, in a chain,
        # in a loop, to a device, from inside a subdirectory, to the root's parent
        "link_out/secret.txt", "link_file_out", "abs_link/secret.txt", "up_link/secret.txt", "chain1",
        "loop_a", "dev_link", "dir/rel_out", "parent_link/outside/secret.txt", "dir/up/secret.txt",
        "proc_link/secret.txt",
        # what no file tool opens: a FIFO (which would block a reader), a socket
        "fifo", "sock",
        # malformed
        "", "inside.txt\x00", "x\x00/../../etc/passwd", "a" * 256, "/".join(["d"] * 2100),
    ]


# Strings that look like escapes but name ordinary files inside the workspace.
LITERAL_NAMES = [
    "%2e%2e/outside/secret.txt", "..%2foutside%2fsecret.txt", "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "..%c0%af..%c0%afetc", "\u2024\u2024/outside/secret.txt", "\uff0e\uff0e/outside/secret.txt",
    "..\\..\\outside\\secret.txt", ".../secret.txt", "....//....//etc", "~/secret.txt", "$HOME/secret.txt",
    "..\u200b/secret.txt", " ../secret.txt", "\u202etxt.terces", "%00secret.txt",
]


@pytest.fixture
def layout(tmp_path):
    """tmp_path/ws (the workspace) beside tmp_path/outside and tmp_path/wsx (a sibling sharing the root's name
    as a prefix), each holding a secret."""
    root, outside, sibling = tmp_path / "ws", tmp_path / "outside", tmp_path / "wsx"
    for directory in (root / "dir" / "inner", outside, sibling):
        directory.mkdir(parents=True)
    (root / "inside.txt").write_text("inside\n")
    (root / "dir" / "inner.txt").write_text("inner\n")
    for directory in (outside, sibling):
        (directory / "secret.txt").write_text(SECRET + "\n")
    links = {
        "link_out": "../outside", "link_file_out": "../outside/secret.txt", "abs_link": str(outside),
        "up_link": "dir/../../outside", "chain1": "chain2", "chain2": "chain3", "chain3": "../outside/secret.txt",
        "loop_a": "loop_b", "loop_b": "loop_a", "dev_link": "/dev/zero", "dir/rel_out": "../../outside/secret.txt",
        "parent_link": "..", "dir/up": "../../outside", "proc_link": f"/proc/self/root{outside}",
    }
    for name, target in links.items():
        os.symlink(target, root / name)
    os.mkfifo(root / "fifo")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(root / "sock"))
    yield root, outside, sibling
    listener.close()


def snapshot(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """Every entry under tmp_path: its kind and (files) content hash or (symlinks) target."""
    entries: dict[str, tuple[str, str]] = {}
    for directory, names, files in os.walk(tmp_path):
        for name in names + files:
            path = Path(directory) / name
            if path.is_symlink():
                entries[str(path)] = ("link", os.readlink(path))
            elif path.is_file():
                entries[str(path)] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
            else:
                entries[str(path)] = ("other", "")
    return entries


def tool_calls(path: str) -> list[tuple[str, dict[str, object]]]:
    """Every file tool, given `path` where it takes one."""
    return [
        ("read", {"path": path}), ("load", {"path": path}), ("ls", {"path": path}),
        ("write", {"path": path, "content": "planted"}),
        ("edit", {"path": path, "old_string": SECRET, "new_string": "edited"}),
        ("search_and_replace", {"path": path, "search": SECRET, "replace": "replaced"}),
        ("glob", {"pattern": "*", "path": path}), ("grep", {"pattern": SECRET, "path": path}),
        ("search_content", {"pattern": SECRET, "path": path}),
    ]


@pytest.mark.server
async def test_every_escaping_path_is_refused_by_every_file_tool_and_changes_nothing(start_server, tmp_path,
                                                                                    layout):
    root, outside, sibling = layout
    server = await start_server(workspaces=(Workspace("ws", str(root)),))
    corpus = escaping_paths(root, outside, sibling)
    assert len(corpus) + len(LITERAL_NAMES) >= 40
    before = snapshot(tmp_path)
    for path in corpus:
        for tool, arguments in tool_calls(path):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                response = await call(server, tool, arguments)
                pytest.fail(f"{tool}({path!r}) was not refused: {response}")
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (tool, path, caught.value.details())
            assert [field for field, _ in violations(caught.value)] == ["/path"], (tool, path)
            assert SECRET not in caught.value.details()
    assert snapshot(tmp_path) == before


@pytest.mark.server
async def test_paths_that_only_look_like_escapes_name_files_inside_the_workspace(start_server, tmp_path, layout):
    root, _, _ = layout
    server = await start_server(workspaces=(Workspace("ws", str(root)),))
    outside_before = {key: value for key, value in snapshot(tmp_path).items() if not key.startswith(f"{root}/")}
    for path in LITERAL_NAMES:
        response = await call(server, "read", path=path)
        assert not response.success and response.error.code == "FILE_NOT_FOUND", (path, response)
        response = await call(server, "write", path=path, content="planted")
        assert response.success, (path, response)
        written = root / path
        assert written.read_text() == "planted" and os.path.realpath(written).startswith(f"{root}/"), path
    outside_after = {key: value for key, value in snapshot(tmp_path).items() if not key.startswith(f"{root}/")}
    assert outside_after == outside_before


@pytest.mark.server
async def test_a_symlink_swapped_between_inside_and_outside_during_the_calls_never_yields_the_outside(
        start_server, tmp_path, layout):
    """`swap` is a symlink whose target a thread flips, atomically and as fast as it can, between `swap_real`
    inside the workspace and `outside` (each holds a file `f`), while read, ls and write go through it: every
    answer is the inside, a refusal, or a file state; the outside is never read nor written."""
    root, outside, _ = layout
    (outside / "f").write_text(SECRET + "\n")
    (root / "swap_real").mkdir()
    (root / "swap_real" / "f").write_text("inside\n")
    swap, staged = root / "swap", root / "swap.next"
    os.symlink("swap_real", swap)
    server = await start_server(workspaces=(Workspace("ws", str(root)),))
    stop = threading.Event()

    def flip() -> None:
        while not stop.is_set():
            for target in (str(outside), "swap_real"):
                os.symlink(target, staged)
                os.replace(staged, swap)

    flipper = threading.Thread(target=flip)
    flipper.start()
    try:
        outcomes: set[str] = set()
        for _ in range(SWAP_CALLS):
            for tool, arguments in (("read", {"path": "swap/f"}), ("ls", {"path": "swap"}),
                                    ("write", {"path": "swap/f", "content": "planted\n"})):
                try:
                    response = await call(server, tool, arguments)
                except grpc.aio.AioRpcError as exc:
                    assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, exc.details()
                    outcomes.add("refused")
                    continue
                assert SECRET not in response.output, (tool, response.output)
                outcomes.add("answered" if response.success else response.error.code)
    finally:
        stop.set()
        flipper.join()
    assert (outside / "f").read_text() == SECRET + "\n"
    assert sorted(os.listdir(outside)) == ["f", "secret.txt"]
    # Both sides were seen: the race was run, not missed.
    assert {"answered", "refused"} <= outcomes, outcomes
    assert outcomes <= {"answered", "refused", "FILE_NOT_FOUND", "FILE_CHANGED"}, outcomes
