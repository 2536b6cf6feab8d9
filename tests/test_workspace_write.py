"""The tools that change files (write, edit, search_and_replace) through a real server on the real filesystem:
atomic replace, mode and owner kept, parents created, the read-only, size, staleness and match failures, escapes
refused with nothing created anywhere, and a catastrophic regular expression that cannot stall the server."""

from __future__ import annotations

import asyncio
import difflib
import functools
import hashlib
import os
import pwd
import re
import resource
import stat
import threading
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from toolhost_server.tools.text_diff import Change, short_diff
from toolhost_server.tools.workspace_write import EditTool
from toolhost_server.workspaces import Workspace
from toolhost_server.workspaces.writing import ChangeGate

from helpers.calls import call
from helpers.servers import RunningServer
from helpers.status import violations
from helpers.waiting import until, within


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def listing(top: Path) -> dict[str, tuple[int, bytes | str]]:
    """Every entry under `top` (symlinks not followed): its mode and its content or link target."""
    entries: dict[str, tuple[int, bytes | str]] = {}
    for directory, names, files in os.walk(top):
        for name in names + files:
            path = Path(directory) / name
            st = path.lstat()
            content: bytes | str = (os.readlink(path) if stat.S_ISLNK(st.st_mode)
                                    else path.read_bytes() if stat.S_ISREG(st.st_mode) else b"")
            entries[str(path.relative_to(top))] = (st.st_mode, content)
    return entries


def temporaries(top: Path) -> list[Path]:
    return [path for path in top.rglob(".toolhost-*")]


def structured(response: Any) -> dict[str, Any]:
    return json_format.MessageToDict(response.structured_output)  # type: ignore[no-any-return]


async def failed(server: RunningServer, tool: str, code: str, **arguments: Any) -> str:
    """The message of a call that must fail with `code` (success=false)."""
    response = await call(server, tool, **arguments)
    assert not response.success, response.output
    assert response.error.code == code, response.error.message
    return str(response.error.message)


async def refused(server: RunningServer, tool: str, **arguments: Any) -> list[tuple[str, str]]:
    """The field violations of a call that must be refused as INVALID_ARGUMENT."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(server, tool, **arguments)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    return violations(caught.value)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    workspace = tmp_path / "w"
    workspace.mkdir()
    return workspace


@pytest.fixture
async def server(start_server, root) -> RunningServer:
    return await start_server(workspaces=(Workspace("w", str(root)),))  # type: ignore[no-any-return]


# write


async def test_write_round_trips_the_content_and_reports_its_size_and_sha256(server, root):
    content = "héllo\nwörld ✓\n"
    response = await call(server, "write", path="greeting.txt", content=content)
    assert response.success, response.error.message
    data = content.encode()
    assert (root / "greeting.txt").read_bytes() == data
    assert structured(response) == {"path": "greeting.txt", "bytes_written": len(data), "sha256": sha256(data),
                                    "created": True}
    assert "greeting.txt" in response.output and str(len(data)) in response.output
    again = await call(server, "write", path="greeting.txt", content="")
    assert structured(again)["created"] is False and (root / "greeting.txt").read_bytes() == b""
    assert structured(again)["sha256"] == sha256(b"")
    assert temporaries(root) == []


async def test_write_creates_missing_parents(server, root):
    response = await call(server, "write", path="a/b/c/new.py", content="x = 1\n")
    assert response.success, response.error.message
    assert (root / "a" / "b" / "c" / "new.py").read_text() == "x = 1\n"
    assert structured(response)["path"] == "a/b/c/new.py"


async def test_an_existing_files_mode_is_kept_and_a_new_file_is_0644_whatever_the_umask(server, root):
    script = root / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    previous = os.umask(0o077)
    try:
        assert (await call(server, "write", path="run.sh", content="#!/bin/sh\necho hi\n")).success
        assert (await call(server, "write", path="fresh.txt", content="new\n")).success
        assert (await call(server, "edit", path="run.sh", old_string="hi", new_string="ho")).success
    finally:
        os.umask(previous)
    assert stat.S_IMODE(script.stat().st_mode) == 0o755 and script.read_text().endswith("echo ho\n")
    assert stat.S_IMODE((root / "fresh.txt").stat().st_mode) == 0o644


async def test_a_rewritten_file_loses_its_set_id_bits(server, root):
    (root / "tool").write_text("#!/bin/sh\n")
    (root / "tool").chmod(0o6755)
    assert (await call(server, "write", path="tool", content="#!/bin/sh\nid\n")).success
    assert stat.S_IMODE((root / "tool").stat().st_mode) == 0o755


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give files to another user")
async def test_new_files_and_the_parents_made_belong_to_the_workspace_owner_and_old_files_keep_theirs(
        start_server, root):
    nobody = pwd.getpwnam("nobody")
    (root / "mine.txt").write_text("root's\n")
    os.chown(root / "mine.txt", 0, 0)
    server = await start_server(workspaces=(Workspace("w", str(root), owner="nobody"),))
    assert (await call(server, "write", path="made/deeper/new.txt", content="x\n")).success
    for path in (root / "made", root / "made" / "deeper", root / "made" / "deeper" / "new.txt"):
        assert (path.stat().st_uid, path.stat().st_gid) == (nobody.pw_uid, nobody.pw_gid), path
    assert (await call(server, "write", path="mine.txt", content="still root's\n")).success
    assert (await call(server, "edit", path="mine.txt", old_string="still", new_string="yes,")).success
    assert ((root / "mine.txt").stat().st_uid, (root / "mine.txt").stat().st_gid) == (0, 0)


async def test_a_read_only_workspace_refuses_every_change_and_nothing_changes(start_server, tmp_path, root):
    (root / "file.txt").write_text("as it was\n")
    server = await start_server(workspaces=(Workspace("w", str(root), read_only=True),))
    before = listing(tmp_path)
    for tool, arguments in (
            ("write", {"path": "file.txt", "content": "changed"}),
            ("write", {"path": "new/dir/file.txt", "content": "new"}),
            ("edit", {"path": "file.txt", "old_string": "was", "new_string": "is"}),
            ("search_and_replace", {"path": "file.txt", "search": "was", "replace": "is"}),
            ("search_and_replace", {"path": "file.txt", "search": "w(a)s", "replace": "is", "regex": True})):
        message = await failed(server, tool, "WORKSPACE_READ_ONLY", **arguments)
        assert "read-only" in message
    assert listing(tmp_path) == before


async def test_content_larger_than_max_file_bytes_is_refused_before_anything_is_written(start_server, tmp_path,
                                                                                          root):
    (root / "small.txt").write_text("a" * 90)
    server = await start_server(workspaces=(Workspace("w", str(root), max_file_bytes=100),))
    before = listing(tmp_path)
    message = await failed(server, "write", "FILE_TOO_LARGE", path="parents/too/big.txt", content="x" * 101)
    assert "101 bytes" in message and "100" in message
    await failed(server, "write", "FILE_TOO_LARGE", path="small.txt", content="é" * 51)  # 102 bytes in UTF-8
    await failed(server, "edit", "FILE_TOO_LARGE", path="small.txt", old_string="a", new_string="bbbbbbb",
                 replace_all=True)
    await failed(server, "search_and_replace", "FILE_TOO_LARGE", path="small.txt", search="aa", replace="bbb")
    await failed(server, "search_and_replace", "FILE_TOO_LARGE", path="small.txt", search="(a)", replace=r"\1\1",
                 regex=True)
    assert listing(tmp_path) == before
    (root / "large.txt").write_text("a" * 101)
    await failed(server, "edit", "FILE_TOO_LARGE", path="large.txt", old_string="a", new_string="b",
                 replace_all=True)
    assert (await call(server, "write", path="exact.txt", content="x" * 100)).success


async def test_write_with_an_old_sha256_after_the_file_changed_is_stale_and_changes_nothing(server, root):
    first = structured(await call(server, "write", path="f.txt", content="version 1\n"))
    (root / "f.txt").write_text("changed by someone else\n")
    message = await failed(server, "write", "STALE_FILE", path="f.txt", content="version 2\n",
                           expected_sha256=first["sha256"])
    assert "changed since it was read" in message
    assert (root / "f.txt").read_text() == "changed by someone else\n"
    await failed(server, "edit", "STALE_FILE", path="f.txt", old_string="someone", new_string="me",
                 expected_sha256=first["sha256"])
    assert (root / "f.txt").read_text() == "changed by someone else\n"
    current = sha256((root / "f.txt").read_bytes())
    response = await call(server, "write", path="f.txt", content="version 2\n", expected_sha256=current)
    assert response.success and (root / "f.txt").read_text() == "version 2\n"
    assert temporaries(root) == []


async def test_a_deleted_file_with_expected_sha256_is_stale_and_no_parent_is_made(server, tmp_path, root):
    before = listing(tmp_path)
    message = await failed(server, "write", "STALE_FILE", path="gone/deep/f.txt", content="x",
                           expected_sha256="0" * 64)
    assert "deleted" in message
    await failed(server, "write", "STALE_FILE", path="f.txt", content="x", expected_sha256="0" * 64)
    assert listing(tmp_path) == before


@pytest.mark.parametrize("bad", ["A" * 64, "0" * 63, "0" * 65, "g" * 64, " " + "0" * 63])
async def test_an_expected_sha256_that_is_not_64_lowercase_hex_digits_is_invalid(server, root, bad):
    fields = await refused(server, "write", path="f.txt", content="x", expected_sha256=bad)
    assert [field for field, _ in fields] == ["/expected_sha256"]
    assert not (root / "f.txt").exists()


async def test_a_lone_surrogate_cannot_be_written(server, root):
    arguments = '{"path": "f.txt", "content": "a\\ud800b"}'
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(server, "write", arguments_json=arguments)
    # Refused when the request is read (the tool's own check is the backstop for a caller inside the server).
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "/content" in caught.value.details()
    assert not (root / "f.txt").exists()


async def test_writing_through_a_symlink_inside_the_root_changes_its_target(server, root):
    (root / "real").mkdir()
    (root / "real" / "target.txt").write_text("old\n")
    (root / "link.txt").symlink_to("real/target.txt")
    response = await call(server, "write", path="link.txt", content="new\n")
    assert response.success and structured(response)["path"] == "real/target.txt"
    assert (root / "real" / "target.txt").read_text() == "new\n"
    assert (root / "link.txt").is_symlink() and os.readlink(root / "link.txt") == "real/target.txt"
    assert (await call(server, "edit", path="link.txt", old_string="new", new_string="edited")).success
    assert (root / "real" / "target.txt").read_text() == "edited\n" and (root / "link.txt").is_symlink()


ESCAPES = ["../outside/new.txt", "../outside/secret.txt", "/etc/toolhost-write-test", "a/../../outside/x.txt",
           "out/secret.txt", "out/new/deeper.txt", "secret_link", "nul\x00.txt", "x" * 256 + "/y.txt"]


@pytest.mark.parametrize("path", ESCAPES)
async def test_paths_that_escape_are_refused_and_nothing_is_created_anywhere(server, tmp_path, root, path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    (root / "out").symlink_to(outside)
    (root / "secret_link").symlink_to(outside / "secret.txt")
    before = listing(tmp_path)
    for tool, arguments in (
            ("write", {"content": "pwned\n"}),
            ("edit", {"old_string": "secret", "new_string": "pwned"}),
            ("search_and_replace", {"search": "secret", "replace": "pwned"}),
            ("search_and_replace", {"search": "s(e)cret", "replace": "pwned", "regex": True})):
        fields = await refused(server, tool, path=path, **arguments)
        assert [field for field, _ in fields] == ["/path"], (tool, fields)
    assert listing(tmp_path) == before
    assert not Path("/etc/toolhost-write-test").exists()


async def test_readers_see_the_old_content_or_the_new_never_a_part(server, root):
    contents = [b"a" * 1_000_000, b"b" * 1_500_000]
    (root / "big.txt").write_bytes(contents[0])
    seen: set[bytes] = set()
    stop = threading.Event()

    def read_continuously() -> None:
        while not stop.is_set():
            data = (root / "big.txt").read_bytes()
            seen.add(data[:1] + str(len(data)).encode())
            assert data in contents

    reader = asyncio.create_task(asyncio.to_thread(read_continuously))
    try:
        for index in range(20):
            response = await call(server, "write", path="big.txt", content=contents[(index + 1) % 2].decode())
            assert response.success
    finally:
        stop.set()
    await within(reader, "the reader thread")
    assert seen <= {b"a1000000", b"b1500000"}
    assert temporaries(root) == []


# edit


async def test_edit_replaces_one_exact_occurrence_and_returns_a_diff(server, root):
    lines = [f"line {n}\n" for n in range(1, 21)]
    (root / "f.txt").write_text("".join(lines))
    response = await call(server, "edit", path="f.txt", old_string="line 10\n", new_string="ten\nTEN\n")
    assert response.success, response.error.message
    after = (root / "f.txt").read_bytes()
    assert after.decode() == "".join([*lines[:9], "ten\n", "TEN\n", *lines[10:]])
    result = structured(response)
    assert result["replacements"] == 1 and result["sha256"] == sha256(after)
    assert result["bytes_written"] == len(after) and result["diff_truncated"] is False
    assert result["diff"] == (
        "--- a/f.txt\n+++ b/f.txt\n@@ -7,7 +7,8 @@\n line 7\n line 8\n line 9\n-line 10\n+ten\n+TEN\n"
        " line 11\n line 12\n line 13\n")
    assert result["diff"] in response.output


async def test_edit_reports_no_match_and_a_count_when_the_match_is_not_unique(server, root):
    (root / "f.txt").write_text("x = 1\nx = 1\nx = 1\ny = 2\n")
    message = await failed(server, "edit", "NO_MATCH", path="f.txt", old_string="z = 3", new_string="z = 4")
    assert "f.txt" in message
    message = await failed(server, "edit", "MATCH_NOT_UNIQUE", path="f.txt", old_string="x = 1",
                           new_string="x = 2")
    assert "3 times" in message and "replace_all" in message and "surrounding" in message
    assert (root / "f.txt").read_text() == "x = 1\nx = 1\nx = 1\ny = 2\n"
    response = await call(server, "edit", path="f.txt", old_string="x = 1", new_string="x = 2", replace_all=True)
    assert response.success and structured(response)["replacements"] == 3
    assert (root / "f.txt").read_text() == "x = 2\nx = 2\nx = 2\ny = 2\n"


async def test_edit_hints_at_crlf_line_ends(server, root):
    (root / "dos.txt").write_bytes(b"first\r\nsecond\r\n")
    message = await failed(server, "edit", "NO_MATCH", path="dos.txt", old_string="first\nsecond",
                           new_string="x")
    assert "\\r\\n" in message


async def test_edit_refuses_identical_strings_binary_and_missing_files(server, root):
    (root / "f.txt").write_text("abc\n")
    fields = await refused(server, "edit", path="f.txt", old_string="abc", new_string="abc")
    assert [field for field, _ in fields] == ["/new_string"]
    fields = await refused(server, "edit", path="f.txt", old_string="", new_string="x")
    assert [field for field, _ in fields] == ["/old_string"]
    (root / "blob.bin").write_bytes(b"abc\x00def")
    await failed(server, "edit", "BINARY_FILE", path="blob.bin", old_string="abc", new_string="x")
    (root / "latin1.txt").write_bytes("café".encode("latin-1"))
    await failed(server, "edit", "BINARY_FILE", path="latin1.txt", old_string="caf", new_string="x")
    await failed(server, "edit", "FILE_NOT_FOUND", path="missing.txt", old_string="a", new_string="b")
    await failed(server, "edit", "IS_A_DIRECTORY", path=".", old_string="a", new_string="b")
    assert not (root / "missing.txt").exists()
    assert (root / "blob.bin").read_bytes() == b"abc\x00def"


# search_and_replace


async def test_search_and_replace_literally_with_and_without_a_count(server, root):
    (root / "f.txt").write_text("a.b a.b a.b axb\n")
    response = await call(server, "search_and_replace", path="f.txt", search="a.b", replace="X", count=2)
    assert response.success, response.error.message
    assert (root / "f.txt").read_text() == "X X a.b axb\n"
    assert structured(response)["replacements"] == 2 and "-a.b a.b a.b axb" in structured(response)["diff"]
    response = await call(server, "search_and_replace", path="f.txt", search="a.b", replace="Y")
    assert structured(response)["replacements"] == 1 and (root / "f.txt").read_text() == "X X Y axb\n"
    await failed(server, "search_and_replace", "NO_MATCH", path="f.txt", search="a.b", replace="Y")
    assert (root / "f.txt").read_text() == "X X Y axb\n"


async def test_search_and_replace_by_regular_expression_with_groups_and_a_count(server, root):
    (root / "dates.txt").write_text("01/02/2024 and 03/04/2025 and 05/06/2026\n")
    response = await call(server, "search_and_replace", path="dates.txt", search=r"(\d{2})/(\d{2})/(\d{4})",
                          replace=r"\3-\2-\1", regex=True, count=2)
    assert response.success, response.error.message
    assert (root / "dates.txt").read_text() == "2024-02-01 and 2025-04-03 and 05/06/2026\n"
    assert structured(response)["replacements"] == 2
    assert structured(response)["sha256"] == sha256((root / "dates.txt").read_bytes())
    response = await call(server, "search_and_replace", path="dates.txt", search=r"(?P<y>\d{4})-",
                          replace=r"\g<y>/", regex=True)
    assert structured(response)["replacements"] == 2
    assert (root / "dates.txt").read_text() == "2024/02-01 and 2025/04-03 and 05/06/2026\n"
    await failed(server, "search_and_replace", "NO_MATCH", path="dates.txt", search=r"\d{5}", replace="",
                 regex=True)


async def test_search_and_replace_refuses_a_bad_pattern_or_template_with_the_reason(server, root):
    (root / "f.txt").write_text("abc\n")
    fields = await refused(server, "search_and_replace", path="f.txt", search="(unclosed", replace="x",
                           regex=True)
    assert fields[0][0] == "/search" and "missing )" in fields[0][1]
    fields = await refused(server, "search_and_replace", path="f.txt", search="(b)", replace=r"\2", regex=True)
    assert fields[0][0] == "/replace" and "invalid group reference" in fields[0][1]
    fields = await refused(server, "search_and_replace", path="f.txt", search="b", replace="x", count=-1)
    assert fields[0][0] == "/count"
    assert (root / "f.txt").read_text() == "abc\n"


async def test_a_catastrophic_pattern_times_out_without_stalling_the_server(start_server, root):
    (root / "f.txt").write_text("a" * 40 + "!\n")
    server = await start_server(workspaces=(Workspace("w", str(root)),), max_call_seconds=3)
    regex_call = asyncio.create_task(call(server, "search_and_replace", path="f.txt", search="(a+)+$",
                                          replace="x", regex=True))
    # While the pattern backtracks, the server goes on answering: the regex runs outside its process.
    echoed = await within(call(server, "echo", text="still here"), "an echo during the regex")
    assert echoed.success and not regex_call.done()
    response = await within(regex_call, "the regex call's timeout")
    assert not response.success and response.error.code == "TIMEOUT", response.error.message
    assert "(a+)+" in response.error.message
    assert (root / "f.txt").read_text() == "a" * 40 + "!\n"


async def test_replacing_matches_by_themselves_leaves_the_file_untouched(server, root):
    (root / "f.txt").write_text("same\n")
    before = (root / "f.txt").stat()
    response = await call(server, "search_and_replace", path="f.txt", search="same", replace="same")
    assert response.success and structured(response)["bytes_written"] == 0
    assert (root / "f.txt").stat().st_ino == before.st_ino


# the diff


@pytest.mark.parametrize(("before", "after"), [
    ("a\nb\nc\n", "a\nB\nc\n"),
    ("".join(f"{n}\n" for n in range(100)), "".join(f"{n}\n" for n in range(100) if n not in (3, 50, 51))),
    ("", "new\n"),
    ("old\n", ""),
    ("one\ntwo\nthree\n", "zero\none\ntwo\nthree\nfour\n"),
])
def test_the_short_diff_is_the_unified_diff_difflib_writes(before, after):
    expected = "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                            "a/f.txt", "b/f.txt"))
    assert short_diff(before, after, "f.txt") == (expected, False)


def test_the_short_diff_of_repeated_lines_is_the_smallest_hunk():
    # Where difflib alone (its junk heuristic) marks most of a file of repeated lines as changed.
    diff, _ = short_diff("x\n" * 30, "x\n" * 10 + "y\n" + "x\n" * 20, "f")
    assert diff == "--- a/f\n+++ b/f\n@@ -8,6 +8,7 @@\n x\n x\n x\n+y\n x\n x\n x\n"


def test_the_short_diff_is_cut_and_marks_a_missing_final_newline():
    diff, cut = short_diff("".join(f"{n}\n" for n in range(1000)), "".join(f"{n}!\n" for n in range(1000)), "f")
    assert cut and len(diff.splitlines()) == 201 and diff.endswith("(diff cut after 200 lines)\n")
    diff, cut = short_diff("a\nb", "a\nc", "f")
    assert not cut and diff.endswith("-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n")


def test_the_short_diff_of_one_line_in_a_large_text_names_its_line():
    lines = [f"{n}\n" for n in range(200_000)]
    changed = [*lines[:150_000], "changed\n", *lines[150_001:]]
    diff, _ = short_diff("".join(lines), "".join(changed), "big")
    assert "@@ -149998,7 +149998,7 @@" in diff and "-150000\n+changed\n" in diff



# bounds (issue 18 review: H1, H2, M1, M2, M7)


async def test_edit_refuses_a_result_past_max_file_bytes_before_building_it(start_server, tmp_path):
    root = tmp_path / "big"
    root.mkdir()
    (root / "a.txt").write_text("a" * (1 << 20))
    server = await start_server(workspaces=(Workspace("w", str(root), max_file_bytes=1 << 20),))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Built whole, the result would be 500 MiB of str and as much again encoded.
    message = await failed(server, "edit", "FILE_TOO_LARGE", path="a.txt", old_string="a", new_string="b" * 500,
                           replace_all=True)
    assert "after the replacements" in message and str(500 << 20) in message
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak
    assert grown_kib < 100 * 1024, f"the server's peak memory grew by {grown_kib} KiB"
    assert (root / "a.txt").read_text() == "a" * (1 << 20)


async def test_the_diff_of_a_change_on_every_other_line_of_a_large_file_is_bounded(start_server, root):
    # difflib over these 40,000 lines would take about an hour: the diff is built from the replacements.
    text = "".join(f"x{n}\na\n" for n in range(20_000))
    (root / "f.txt").write_text(text)
    server = await start_server(workspaces=(Workspace("w", str(root)),), max_call_seconds=30)
    response = await call(server, "edit", path="f.txt", old_string="a\n", new_string="b\n", replace_all=True)
    assert response.success, response.error.message
    found = structured(response)
    assert found["replacements"] == 20_000 and found["diff_truncated"]
    assert found["diff"].startswith("--- a/f.txt\n+++ b/f.txt\n@@ -1,") and "-a\n+b\n" in found["diff"]
    assert (root / "f.txt").read_text() == text.replace("a\n", "b\n")


def test_a_diff_built_from_the_replacements_turns_the_old_text_into_the_new():
    before = "".join(f"line {n}\n" for n in range(2000)) + "no newline"
    after = before.replace("line 1", "LINE\n1!").replace("no newline", "end")
    changes = [Change(i, i + 6, j, j + 7) for i, j in _literal_places(before, "line 1", 1)]
    changes.append(Change(len(before) - 10, len(before), len(after) - 3, len(after)))
    diff, cut = short_diff(before, after, "f", changes, max_lines=100_000)
    assert not cut
    assert _patched(before, diff) == after


def test_a_large_change_without_its_places_is_left_out_of_the_diff():
    before = "".join(f"{n}\na\n" for n in range(5000))
    diff, cut = short_diff(before, before.replace("a\n", "b\n"), "f")
    assert cut and diff.startswith("(diff left out: the change spans")


async def test_a_change_is_abandoned_before_its_commit_and_reported_once_made(root):
    tool = EditTool()
    entered, release = threading.Event(), threading.Event()

    def change(gate: ChangeGate, commit_first: bool) -> str:
        if commit_first:
            gate.commit()
        entered.set()
        release.wait()
        if not commit_first:
            gate.commit()  # raises ChangeAbandoned: the call gave it up
        return "made"

    for commit_first in (True, False):
        entered.clear()
        release.clear()
        running = asyncio.ensure_future(tool.change_in_thread(functools.partial(change, commit_first=commit_first)))
        await within(asyncio.to_thread(entered.wait), "the change to start")
        running.cancel()  # as the call's timeout does
        if commit_first:  # the call waits for the change's answer
            release.set()
            assert await within(running, "the made change's answer") == "made"
        else:  # the call ends at once, and the change is never made
            with pytest.raises(asyncio.CancelledError):
                await within(running, "the abandoned change")
            release.set()


async def test_file_tools_answer_while_the_default_executor_is_busy(server, root):
    (root / "f.txt").write_text("hi\n")
    loop = asyncio.get_running_loop()
    release = threading.Event()
    busy = [loop.run_in_executor(None, release.wait) for _ in range(40)]
    try:
        for tool, arguments in (("read", {"path": "f.txt"}), ("write", {"path": "g.txt", "content": "x"}),
                                ("edit", {"path": "f.txt", "old_string": "hi", "new_string": "ho"})):
            response = await within(call(server, tool, **arguments), f"{tool} while the default executor is busy")
            assert response.success, response.error.message
    finally:
        release.set()
        await asyncio.gather(*busy)


async def test_a_huge_pattern_is_refused_before_it_is_compiled(server, root):
    (root / "f.txt").write_text("abc\n")
    pattern = "|".join(f"w{n}" for n in range(700_000))  # about 4 MB
    fields = await refused(server, "search_and_replace", path="f.txt", search=pattern, replace="x", regex=True)
    assert fields[0][0] == "/search" and "10000" in fields[0][1]


async def test_regular_expressions_run_two_at_a_time_and_a_third_waits_within_its_time(start_server, root):
    (root / "f.txt").write_text("a" * 40 + "!\n")
    server = await start_server(workspaces=(Workspace("w", str(root)),), max_call_seconds=60)
    slow = [asyncio.create_task(call(server, "search_and_replace", path="f.txt", search="(a+)+$", replace="x",
                                     regex=True)) for _ in range(2)]
    try:
        await until(lambda: len(_regex_children()) == 2, "two regular-expression children")
        # Its budget (a share of its 2 s deadline) ends long before the two above end theirs.
        third = await call(server, "search_and_replace", path="f.txt", search="a", replace="b", regex=True,
                           timeout=2)
        assert not third.success and third.error.code == "TIMEOUT", third.error.message
        assert "at most 2 at once" in third.error.message
        assert len(_regex_children()) == 2
    finally:
        for task in slow:
            task.cancel()
        await asyncio.gather(*slow, return_exceptions=True)
    assert (root / "f.txt").read_text() == "a" * 40 + "!\n"


@pytest.mark.parametrize("tool", ["write", "edit", "search_and_replace"])
async def test_changes_to_files_with_names_that_are_not_utf8_are_reported_by_their_shown_name(server, root, tool):
    os.mkdir(os.fsencode(root) + b"/d\xfe")
    (Path(os.fsdecode(os.fsencode(root) + b"/d\xfe")) / "f.txt").write_text("old\n")
    os.symlink(b"d\xfe", os.fsencode(root) + b"/sd")
    arguments = {"write": {"content": "new\n"}, "edit": {"old_string": "old", "new_string": "new"},
                 "search_and_replace": {"search": "old", "replace": "new"}}[tool]
    response = await call(server, tool, path="sd/f.txt", **arguments)
    assert response.success, response.error.message
    assert structured(response)["path"] == "d\\xfe/f.txt"
    assert "d\\xfe/f.txt" in response.output
    listed = await call(server, "ls", path="sd")
    assert structured(listed)["path"] == "d\\xfe"
    missing = await failed(server, "read", "FILE_NOT_FOUND", path="sd/nope")
    assert "'d\\xfe/nope'" in missing and "ls" in missing


def _regex_children() -> list[int]:
    """The regular-expression children of this process (the server runs in it)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat_file:
                parent = int(stat_file.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                argv = cmdline.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid() and argv[1:4] == [b"-I", b"-S", b"-c"]:
            found.append(int(entry))
    return found


def _literal_places(text: str, search: str, growth: int) -> list[tuple[int, int]]:
    places, position, shift = [], text.find(search), 0
    while position >= 0:
        places.append((position, position + shift))
        shift += growth
        position = text.find(search, position + len(search))
    return places


def _patched(before: str, diff: str) -> str:
    """`before` with the unified diff applied, each hunk's line counts and context checked."""
    old = before.splitlines(keepends=True)
    out: list[str] = []
    position = 0
    rows = diff.splitlines(keepends=True)[2:]
    index = 0
    while index < len(rows):
        header = re.match(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", rows[index])
        assert header, rows[index]
        first, count = int(header[1]), int(header[2] if header[2] is not None else 1)
        new_count = int(header[4] if header[4] is not None else 1)
        start = first - 1 if count else first
        out += old[position:start]
        position = start
        seen_old = seen_new = 0
        index += 1
        while index < len(rows) and not rows[index].startswith("@@"):
            row = rows[index]
            body = row[1:]
            if index + 1 < len(rows) and rows[index + 1].startswith("\\ No newline"):
                body = body[:-1]
                index += 1
            if row[0] in " -":
                assert old[position] == body, (old[position], body)
                position += 1
                seen_old += 1
            if row[0] in " +":
                out.append(body)
                seen_new += 1
            index += 1
        assert (seen_old, seen_new) == (count, new_count)
    return "".join(out + old[position:])
