"""Issue 18's search tools under attack, through a real server and the real ripgrep: symlinks out of the workspace
are never followed by grep or glob (to a directory or a file, planted before or swapped in during the calls),
paths and patterns that leave the workspace are refused, rg's configuration cannot be changed from the server's
environment, and option-like patterns and file names stay what they are (a pattern, a file)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.json_format import MessageToDict

from toolhost_server.runners.landlock import landlock_abi
from toolhost_server.workspaces import Workspace
from toolhost_server.workspaces.read_confinement import confine_reads

from helpers.calls import call
from helpers.servers import RunningServer, ServerFactory
from helpers.status import violations

pytestmark = pytest.mark.skipif(shutil.which("rg") is None, reason="needs ripgrep (make test installs it)")

SECRET = "outside-secret-5d1c"
FINDS_SECRET = "outside-secret-[0-9a-f]{4}"  # a pattern that matches the secret without spelling it
SWAP_CALLS = 100
SEARCHES: list[tuple[str, dict[str, Any]]] = [
    ("grep", {"pattern": FINDS_SECRET, "no_ignore": True}),
    ("grep", {"pattern": FINDS_SECRET, "no_ignore": True, "output_mode": "content"}),
    ("grep", {"pattern": FINDS_SECRET, "no_ignore": True, "output_mode": "count"}),
    ("search_content", {"pattern": FINDS_SECRET, "no_ignore": True}),
    ("glob", {"pattern": "**"}),
    ("glob", {"pattern": "**/secret*"}),
    ("glob", {"pattern": "link/*"}),
]

SWAP_SEARCHES: list[tuple[str, dict[str, Any]]] = [
    ("grep", {"pattern": f"{FINDS_SECRET}|inside", "no_ignore": True, "output_mode": "content"}),
    ("grep", {"pattern": f"{FINDS_SECRET}|inside", "path": "flip", "output_mode": "content"}),
    ("glob", {"pattern": "**/*secret*"}),
    ("glob", {"pattern": "*", "path": "flip"}),
]


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """tmp_path/ws, holding symlinks to tmp_path/outside (a directory with a secret) and to the secret itself."""
    root, outside = tmp_path / "ws", tmp_path / "outside"
    (root / "dir").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    (root / "inside.txt").write_text("inside\n")
    os.symlink("../outside", root / "link")
    os.symlink(str(outside), root / "dir" / "abs_link")
    os.symlink("../outside/secret.txt", root / "file_link")
    os.symlink("..", root / "dir" / "up")  # a loop inside: followed, it would list everything again
    return root, outside


async def serve(start_server: ServerFactory, root: Path) -> RunningServer:
    return await start_server(workspaces=(Workspace("ws", str(root)),))


def everything(response: Any) -> str:
    return response.output + json.dumps(MessageToDict(response.structured_output))


async def test_symlinks_out_of_the_workspace_are_never_followed_by_grep_or_glob(start_server, layout):
    root, _ = layout
    server = await serve(start_server, root)
    for tool, arguments in SEARCHES:
        response = await call(server, tool, arguments)
        assert response.success, (tool, arguments, response.error)
        assert SECRET not in everything(response) and "secret.txt" not in everything(response), (tool, arguments)
    # glob names the symlinks themselves (entries of the tree), never what is behind them.
    listed = MessageToDict((await call(server, "glob", pattern="**")).structured_output)["files"]
    assert sorted(listed) == ["dir/abs_link", "dir/up", "file_link", "inside.txt", "link"]


@pytest.mark.parametrize("path", ["link", "dir/abs_link", "file_link", "..", "../outside", "/", "/etc",
                                  "dir/up/../outside", "dir/../../outside/secret.txt"])
async def test_a_path_leaving_the_workspace_is_refused_by_grep_and_glob(start_server, layout, path):
    root, _ = layout
    server = await serve(start_server, root)
    for tool, arguments in (("grep", {"pattern": FINDS_SECRET, "path": path}), ("glob", {"pattern": "*", "path": path}),
                            ("search_content", {"pattern": FINDS_SECRET, "path": path})):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(server, tool, arguments)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (tool, path)
        assert [field for field, _ in violations(caught.value)] == ["/path"], (tool, path)
        assert SECRET not in caught.value.details()


@pytest.mark.skipif(landlock_abi() == 0, reason="rg's own walk can be misled by the swap; Landlock stops it")
async def test_a_directory_swapped_for_a_symlink_out_during_the_calls_never_yields_the_outside(start_server,
                                                                                             layout):
    """`flip` is a real directory inside one moment and a symlink to `outside` the next, renamed in and out by a
    thread as fast as it can, while grep and glob search the whole workspace and `flip` itself: glob's walk
    never enters a symlink, what the sanitizer opened is what rg searches, and when rg's own walk opens `flip`
    just after it became the symlink, Landlock refuses the read (rg then warns of a directory it could not
    read)."""
    root, outside = layout
    (outside / "flip_secret.txt").write_text(SECRET + "\n")
    real, link, flip = root / "flip.real", root / "flip.link", root / "flip"
    real.mkdir()
    (real / "flip_inside.txt").write_text("inside\n")
    os.symlink(str(outside), link)
    os.rename(real, flip)
    server = await serve(start_server, root)
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            os.rename(flip, real)
            os.rename(link, flip)
            os.rename(flip, link)
            os.rename(real, flip)

    swapper = threading.Thread(target=swap)
    swapper.start()
    outcomes: set[str] = set()
    try:
        for _ in range(SWAP_CALLS):
            for tool, arguments in SWAP_SEARCHES:
                try:
                    response = await call(server, tool, arguments)
                except grpc.aio.AioRpcError as exc:
                    assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT and SECRET not in exc.details()
                    outcomes.add("refused")
                    continue
                assert SECRET not in everything(response) and "secret.txt" not in everything(response), (
                    tool, arguments, response.output)
                outcomes.add("answered" if response.success else response.error.code)
    finally:
        stop.set()
        swapper.join()
    assert "answered" in outcomes, outcomes
    assert outcomes <= {"answered", "refused", "FILE_NOT_FOUND", "FILE_CHANGED", "NOT_A_DIRECTORY"}, outcomes


def test_the_read_confinement_lets_a_child_read_the_workspace_and_nothing_else(layout):
    """What grep's rg runs under, tried with cat and ls: the workspace reads, the outside (directly, or through
    a symlink inside) does not, and programs still start."""
    if landlock_abi() == 0:
        pytest.skip("this kernel has no Landlock")
    root, outside = layout
    cat = shutil.which("cat")
    assert cat is not None
    confinement = confine_reads((str(root),), cat)
    assert confinement is not None

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, capture_output=True, text=True, preexec_fn=confinement.restrict_self,
                              cwd=root, timeout=30)

    try:
        assert run(cat, "inside.txt").stdout == "inside\n"
        for path in (str(outside / "secret.txt"), "link/secret.txt", "file_link", "/etc/passwd"):
            result = run(cat, path)
            assert result.returncode != 0 and SECRET not in result.stdout and "Permission denied" in result.stderr
        listing = run("ls", "link/")
        assert listing.returncode != 0 and "secret" not in listing.stdout
    finally:
        confinement.close()


async def test_rg_configuration_in_the_servers_environment_changes_nothing(start_server, layout, tmp_path,
                                                                          monkeypatch):
    """A RIPGREP_CONFIG_PATH asking rg to follow symlinks and search everything: rg gets --no-config and a
    minimal environment, so the search stays as documented."""
    root, _ = layout
    config = tmp_path / "ripgreprc"
    config.write_text("--follow\n--no-ignore\n--hidden\n")
    monkeypatch.setenv("RIPGREP_CONFIG_PATH", str(config))
    server = await serve(start_server, root)
    response = await call(server, "grep", pattern=FINDS_SECRET)
    assert response.success and SECRET not in everything(response)
    assert MessageToDict(response.structured_output)["files"] == []


async def test_patterns_and_file_names_that_look_like_options_stay_a_pattern_and_a_file(start_server, tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "-rf").write_text("rm -rf --no-preserve-root\n")
    (root / "--files").write_text("--files\n")
    (root / "--pre=sh").write_text("plain\n")
    server = await serve(start_server, root)

    async def grep(**arguments: Any) -> dict[str, Any]:
        response = await call(server, "grep", arguments)
        assert response.success, response.error
        result: dict[str, Any] = MessageToDict(response.structured_output)
        return result

    # A pattern that starts with "-" is still a pattern (it follows -e), whatever rg option it spells.
    assert (await grep(pattern="-rf"))["files"] == ["-rf"]
    assert (await grep(pattern="--files"))["files"] == ["--files"]
    assert (await grep(pattern="--no-preserve-root", output_mode="content"))["lines"][0]["text"] == \
        "rm -rf --no-preserve-root"
    # A file named like an option is found, and searched when given as the path.
    assert (await grep(pattern="plain"))["files"] == ["--pre=sh"]
    assert (await grep(pattern="rm", path="-rf", output_mode="count"))["counts"] == [{"path": "-rf", "count": 1}]
    assert (await grep(pattern="x", glob="--pre=sh"))["files"] == []  # a glob is one argument, never an option
    listed = MessageToDict((await call(server, "glob", pattern="-*")).structured_output)["files"]
    assert sorted(listed) == ["--files", "--pre=sh", "-rf"]
    assert sorted(os.listdir(root)) == ["--files", "--pre=sh", "-rf"]  # nothing was run that made or removed files
