"""Issue 18's reading tools against a real server and the real filesystem: read (and its alias load), ls and
list_workspaces. What read returns (numbering, ranges from the start and from the end, cut lines, line endings,
encodings, files of any size), what it refuses as an argument (paths that leave the workspace: INVALID_ARGUMENT
naming `path`) and what it reports as the file's state (success=false with a code)."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.json_format import MessageToDict

from toolhost.v1 import tool_service_pb2
from toolhost_server.workspaces import Workspace, reading
from toolhost_server.workspaces.reading import read_lines

from helpers.calls import call
from helpers.servers import RunningServer
from helpers.status import error_details

MiB = 1024 * 1024


@pytest.fixture
def root(tmp_path: Path) -> Path:
    workspace = tmp_path / "w"
    workspace.mkdir()
    return workspace


async def serve(start_server: Any, root: Path, **settings: Any) -> RunningServer:
    served: RunningServer = await start_server(workspaces=(Workspace("w", str(root), **settings),))
    return served


async def read(server: RunningServer, tool: str = "read", **arguments: Any) -> tuple[str, dict[str, Any]]:
    """The text and structured output of a call that succeeded."""
    response = await call(server, tool, **arguments)
    assert response.success, response.error
    return response.output, _structured(response)


def _structured(response: tool_service_pb2.CallToolResponse) -> dict[str, Any]:
    value: dict[str, Any] = MessageToDict(response.structured_output)
    return value


async def failure(server: RunningServer, tool: str = "read", **arguments: Any) -> tuple[str, str]:
    """The (code, message) of a call that ran and failed."""
    response = await call(server, tool, **arguments)
    assert not response.success, response.output
    return response.error.code, response.error.message


async def refused_field(server: RunningServer, tool: str = "read", **arguments: Any) -> str:
    """The one BadRequest field a refused call names (it must be INVALID_ARGUMENT)."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(server, tool, **arguments)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    _, violations = error_details(caught.value)
    assert len(violations) == 1, violations
    return violations[0][0]


def numbered(first: int, lines: list[str]) -> str:
    return "".join(f"{number:>6}\t{line}\n" for number, line in enumerate(lines, first))


# read: what it returns.


async def test_lines_are_numbered_as_cat_n_and_the_whole_file_is_described(start_server, root):
    content = "alpha\n\tindented\n\nomega\n"
    (root / "a.txt").write_text(content)
    server = await serve(start_server, root)
    text, data = await read(server, path="a.txt")
    assert text == "     1\talpha\n     2\t\tindented\n     3\t\n     4\tomega\n"
    assert data == {"path": "a.txt", "size_bytes": len(content), "sha256": hashlib.sha256(content.encode()).hexdigest(),
                    "start_line": 1, "lines": ["alpha", "\tindented", "", "omega"], "cut_lines": [],
                    "next_offset": None, "total_lines": 4, "numbered_from_end": False, "crlf": False}


async def test_offset_and_limit_select_lines_from_the_start_or_the_end(start_server, root):
    lines = [f"line {n}" for n in range(1, 11)]
    (root / "ten.txt").write_text("\n".join(lines) + "\n")
    server = await serve(start_server, root)

    text, data = await read(server, path="ten.txt", offset=3, limit=4)
    assert text == numbered(3, lines[2:6]) + "[more lines follow; continue with offset=7]\n"
    assert (data["start_line"], data["next_offset"], data["total_lines"]) == (3, 7, None)
    text, data = await read(server, path="ten.txt", offset=7, limit=4)  # where the last call said to go on
    assert text == numbered(7, lines[6:]) and (data["next_offset"], data["total_lines"]) == (None, 10)

    text, data = await read(server, path="ten.txt", offset=-3)
    assert text == numbered(8, lines[7:]) and (data["next_offset"], data["total_lines"]) == (None, 10)
    text, data = await read(server, path="ten.txt", offset=-3, limit=2)
    assert text.startswith(numbered(8, lines[7:9])) and data["next_offset"] == 10
    _, data = await read(server, path="ten.txt", offset=-50)  # more than the file has: all of it
    assert data["lines"] == lines and data["start_line"] == 1

    _, at_zero = await read(server, path="ten.txt", offset=0, limit=2)
    assert at_zero["lines"] == lines[:2]
    text, data = await read(server, path="ten.txt", offset=11)
    assert text == "[the file has 10 lines; offset 11 is past its end]\n"
    assert (data["lines"], data["start_line"], data["next_offset"], data["total_lines"]) == ([], None, None, 10)


async def test_a_long_line_is_cut_at_2000_characters_and_said_so(start_server, root):
    long_ascii, long_multibyte = "x" * 5000, "é🙂" * 1500  # 3000 characters, 9000 bytes
    (root / "long.txt").write_text(f"short\n{long_ascii}\n{long_multibyte}\nend\n")
    server = await serve(start_server, root)
    text, data = await read(server, path="long.txt")
    assert data["lines"] == ["short", "x" * 2000, long_multibyte[:2000], "end"]
    assert data["cut_lines"] == [2, 3] and data["total_lines"] == 4
    rows = text.splitlines()
    assert rows[1] == f"     2\t{'x' * 2000} … [line cut: its first 2000 characters of 5000 bytes]"
    assert rows[2] == f"     3\t{long_multibyte[:2000]} … [line cut: its first 2000 characters of 9000 bytes]"


async def test_a_line_of_many_megabytes_is_cut_without_being_held(start_server, root):
    (root / "one.txt").write_bytes(b"y" * (8 * MiB) + b"\nafter\n")
    server = await serve(start_server, root)
    _, data = await read(server, path="one.txt")
    assert data["lines"] == ["y" * 2000, "after"] and data["cut_lines"] == [1]


async def test_last_line_without_newline_empty_file_crlf_and_multibyte_text(start_server, root):
    (root / "open.txt").write_bytes(b"first\nlast")
    (root / "empty.txt").write_bytes(b"")
    (root / "dos.txt").write_bytes(b"one\r\ntwo\r\n\r\nkeeps \r inside\r\n")
    (root / "utf8.txt").write_text("héllo wörld 🙂\n日本語のテキスト\nΩ≈ç√\n", encoding="utf-8")
    server = await serve(start_server, root)

    text, data = await read(server, path="open.txt")
    assert text == "     1\tfirst\n     2\tlast\n" and data["total_lines"] == 2
    _, data = await read(server, path="open.txt", offset=-1)
    assert data["lines"] == ["last"] and data["start_line"] == 2

    text, data = await read(server, path="empty.txt")
    assert text == "[the file is empty]\n"
    assert (data["lines"], data["total_lines"], data["size_bytes"], data["sha256"]) == (
        [], 0, 0, hashlib.sha256(b"").hexdigest())

    text, data = await read(server, path="dos.txt")
    assert data["lines"] == ["one", "two", "", "keeps \r inside"] and data["crlf"] is True
    assert text.startswith("     1\tone\n     2\ttwo\n")

    text, data = await read(server, path="utf8.txt")
    assert data["lines"] == ["héllo wörld 🙂", "日本語のテキスト", "Ω≈ç√"]
    assert text == numbered(1, data["lines"])


async def test_the_output_stops_at_the_tools_byte_limit_and_says_where_to_go_on(start_server, root):
    line = "z" * 1000
    (root / "wide.txt").write_text((line + "\n") * 2000)  # about 2 MB, far over the 256 KiB limit
    server = await serve(start_server, root)
    response = await call(server, "read", path="wide.txt")
    assert response.success and not response.truncated
    data = _structured(response)
    shown = len(data["lines"])
    assert 0 < shown < 2000 and data["next_offset"] == shown + 1 and data["total_lines"] is None
    assert len(response.output.encode()) <= 256 * 1024
    assert response.output.endswith(f"[stopped at the output limit of {256 * 1024} bytes; continue with "
                                    f"offset={shown + 1}]\n")
    _, rest = await read(server, path="wide.txt", offset=data["next_offset"])
    assert rest["start_line"] == shown + 1


# read: the file's state, reported as success=false.


async def test_binary_files_directories_and_missing_files_fail_with_their_code(start_server, root):
    (root / "nul.bin").write_bytes(b"text at first" + b"\0" + b"more\n")
    (root / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    (root / "cut.txt").write_bytes("ends inside é".encode()[:-1])
    (root / "dir").mkdir()
    server = await serve(start_server, root)
    for path, why in (("nul.bin", "a NUL byte"), ("latin1.txt", "byte 3 is not UTF-8"),
                      ("cut.txt", "ends inside a UTF-8 character")):
        code, message = await failure(server, path=path)
        assert code == "BINARY_FILE" and why in message, (path, message)
    assert (await failure(server, path="dir"))[0] == "IS_A_DIRECTORY"
    assert (await failure(server, path="missing.txt"))[0] == "FILE_NOT_FOUND"
    assert (await failure(server, path="dir/missing.txt"))[0] == "FILE_NOT_FOUND"


async def test_a_file_over_max_file_bytes_is_binary_by_its_head_and_the_lines_shown(start_server, root):
    (root / "big-nul.bin").write_bytes(b"\0" + b"a\n" * 1000)
    (root / "big-bad-tail.txt").write_bytes(b"fine\n" * 3000 + b"bad \xff\n")  # past the 8 KiB head
    server = await serve(start_server, root, max_file_bytes=100)
    assert (await failure(server, path="big-nul.bin"))[0] == "BINARY_FILE"
    _, data = await read(server, path="big-bad-tail.txt", limit=3)  # the lines read are text
    assert data["lines"] == ["fine"] * 3
    code, message = await failure(server, path="big-bad-tail.txt", offset=-1)
    assert code == "BINARY_FILE" and "line -1 is not UTF-8" in message


# read: paths and workspaces refused as arguments.


async def test_paths_leaving_the_workspace_are_refused_naming_path(start_server, root, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    (root / "out").symlink_to(outside / "secret.txt")
    (root / "outdir").symlink_to(outside)
    (root / "inside.txt").write_text("inside\n")
    server = await serve(start_server, root)
    for path in ("../outside/secret.txt", "..", str(outside / "secret.txt"), "/etc/passwd", "out",
                 "outdir/secret.txt", f"{root}/../outside/secret.txt", "inside.txt\0.png", ""):
        assert await refused_field(server, path=path) == "/path", path
    assert await refused_field(server, "ls", path="outdir") == "/path"
    assert await refused_field(server, "ls", path="..") == "/path"


async def test_an_unknown_workspace_is_refused_naming_workspace(start_server, root):
    (root / "a.txt").write_text("a\n")
    server = await serve(start_server, root)
    assert await refused_field(server, path="a.txt", workspace="elsewhere") == "/workspace"
    assert await refused_field(server, "ls", workspace="elsewhere") == "/workspace"
    _, data = await read(server, path="a.txt", workspace="w")
    assert data["lines"] == ["a"]


async def test_names_that_are_not_utf8_are_shown_with_escapes(start_server, root):
    (root / os.fsdecode(b"caf\xe9.txt")).write_text("latin-1 name\n")
    (root / os.fsdecode(b"dir\xff")).mkdir()
    (root / "link.txt").symlink_to(os.fsdecode(b"caf\xe9.txt"))
    (root / "dirlink").symlink_to(os.fsdecode(b"dir\xff"))
    server = await serve(start_server, root)
    _, data = await read(server, path="link.txt")
    assert data["path"] == "caf\\xe9.txt" and data["lines"] == ["latin-1 name"]
    _, data = await read(server, "ls", path="dirlink")
    assert data["path"] == "dir\\xff" and data["entries"] == []
    _, data = await read(server, "ls")
    # Sorted by the names themselves: byte 0xff after "l".
    assert [entry["name"] for entry in data["entries"]] == ["caf\\xe9.txt", "dirlink", "dir\\xff", "link.txt"]


# read: files of any size.


@pytest.fixture
def big_log(root: Path) -> Iterator[tuple[Path, int, list[str]]]:
    """A 64 MiB log in the workspace (removed afterwards: tmp_path dirs outlive the test), its lines and its tail."""
    path = root / "big.log"
    total, tail = _large_file(path, 64 * MiB)
    yield path, total, tail
    path.unlink()


def _large_file(path: Path, size: int) -> tuple[int, list[str]]:
    """A file of at least `size` bytes: numbered filler lines of 1 KiB, then 300 tail lines; the number of lines
    and the tail lines."""
    filler_lines = size // 1024
    block = b"".join(b"%09d " % n + b"f" * 1013 + b"\n" for n in range(1024))
    with path.open("wb") as out:
        for _ in range(filler_lines // 1024):
            out.write(block)
        tail = [f"tail line {n} ✓" for n in range(300)]
        out.write("".join(line + "\n" for line in tail).encode())
    return filler_lines // 1024 * 1024 + len(tail), tail


async def test_a_negative_offset_reads_the_last_lines_of_a_large_file_numbered_from_its_end(start_server, root,
                                                                                            big_log):
    path, total, tail = big_log
    server = await serve(start_server, root)  # max_file_bytes 10 MiB: not read whole
    text, data = await read(server, path="big.log", offset=-100)
    assert data["lines"] == tail[-100:] and data["start_line"] == -100 and data["numbered_from_end"] is True
    assert (data["next_offset"], data["total_lines"], data["sha256"]) == (None, None, None)
    assert data["size_bytes"] == path.stat().st_size
    assert text.startswith(f"  -100\t{tail[-100]}\n") and f"    -1\t{tail[-1]}\n" in text
    assert "numbered from the end" in text

    _, page = await read(server, path="big.log", offset=-100, limit=30)
    assert page["lines"] == tail[-100:-70] and page["next_offset"] == -70
    _, page = await read(server, path="big.log", offset=page["next_offset"], limit=30)
    assert page["lines"] == tail[-70:-40]

    _, forward = await read(server, path="big.log", offset=total - 1)  # counted from the start: known lines
    assert forward["lines"] == tail[-2:] and forward["total_lines"] == total and forward["start_line"] == total - 1


async def test_a_file_within_max_file_bytes_is_hashed_and_numbered_from_its_start(start_server, root, big_log):
    path, total, tail = big_log
    server = await serve(start_server, root, max_file_bytes=128 * MiB)
    _, data = await read(server, path="big.log", offset=-100)
    assert data["lines"] == tail[-100:] and data["start_line"] == total - 99 and data["total_lines"] == total
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(MiB), b""):
            digest.update(block)
    assert data["sha256"] == digest.hexdigest() and data["numbered_from_end"] is False


async def test_the_end_of_a_terabyte_file_is_read_without_reading_the_rest(start_server, root):
    """A sparse file of 1 TiB (a text head, a hole, a text tail): a read that went through the hole, or hashed the
    file, would not end before the test's timeout."""
    path = root / "huge.log"
    with path.open("wb") as out:
        out.write(b"head line\n" * 1000)  # more than the 8 KiB probed for NUL bytes
        try:
            out.truncate(1 << 40)
        except OSError as exc:
            pytest.skip(f"this filesystem has no sparse 1 TiB files: {exc}")
        out.seek(1 << 40)
        out.write(b"\n" + b"".join(b"tail %d\n" % n for n in range(200)))
    server = await serve(start_server, root)
    _, data = await read(server, path="huge.log", offset=-100)
    assert data["lines"] == [f"tail {n}" for n in range(100, 200)] and data["start_line"] == -100
    _, data = await read(server, path="huge.log", limit=10)
    assert data["lines"] == ["head line"] * 10 and data["next_offset"] == 11
    path.unlink()


def test_a_negative_offset_reads_only_the_blocks_at_the_end(big_log, monkeypatch):
    """The read pays for the blocks that hold the lines, not for the file's size: every byte read is counted."""
    path, _, tail = big_log
    counted = [0]
    pread = os.pread

    def counting_pread(fd: int, size: int, offset: int) -> bytes:
        data = pread(fd, size, offset)
        counted[0] += len(data)
        return data

    monkeypatch.setattr(reading.os, "pread", counting_pread)
    fd = os.open(path, os.O_RDONLY)
    try:
        result = read_lines(fd, "big.log", offset=-100, limit=2000, budget=MiB, line_cost=lambda line: 1,
                            whole_file_bytes=10 * MiB)
    finally:
        os.close(fd)
    assert [line.text for line in result.lines] == tail[-100:]
    assert counted[0] <= 4 * reading.BLOCK_BYTES, counted[0]


# load: the same tool under drowcoder's name.


async def test_load_is_read_under_another_name(start_server, root):
    (root / "a.txt").write_text("one\ntwo\nthree\n")
    server = await serve(start_server, root)
    for arguments in ({"path": "a.txt"}, {"path": "a.txt", "offset": -2, "limit": 1}):
        assert await read(server, "load", **arguments) == await read(server, "read", **arguments)
    tools = {tool.name: tool for tool in (await server.stub.ListTools(tool_service_pb2.ListToolsRequest())).tools}
    assert tools["load"].category == tools["read"].category == "file_ops"
    assert tools["load"].annotations.read_only and tools["load"].annotations.idempotent
    assert (await failure(server, "load", path="missing"))[0] == "FILE_NOT_FOUND"


# ls.


async def test_ls_lists_entries_by_name_with_type_size_and_time_without_following_symlinks(start_server, root,
                                                                                          tmp_path):
    (root / "b.txt").write_text("hello")
    (root / "a-dir").mkdir()
    (root / "a-dir" / "inner.txt").write_text("x")
    (root / "c.pyc").write_bytes(b"\0")
    (root / "__pycache__").mkdir()
    (tmp_path / "outside").mkdir()
    (root / "link").symlink_to(tmp_path / "outside")
    os.mkfifo(root / "pipe")
    os.utime(root / "b.txt", (0, 1_700_000_000))
    server = await serve(start_server, root)

    text, data = await read(server, "ls")
    assert data["path"] == "." and data["truncated"] is False and data["total_entries"] == 6
    by_name = {entry["name"]: entry for entry in data["entries"]}
    assert [entry["name"] for entry in data["entries"]] == sorted(by_name)
    assert by_name["b.txt"] == {"name": "b.txt", "type": "file", "size": 5, "modified": "2023-11-14T22:13:20Z"}
    assert {name: (e["type"], e["size"]) for name, e in by_name.items() if name != "b.txt"} == {
        "a-dir": ("directory", None), "c.pyc": ("file", 1), "__pycache__": ("directory", None),
        "link": ("symlink", None), "pipe": ("other", None)}
    assert str(tmp_path) not in text and "outside" not in json.dumps(data)  # a symlink's target is not shown
    assert re.search(r"^symlink\s+-\s+\S+Z  link@$", text, re.M) and "b.txt\n" in text

    _, data = await read(server, "ls", ignore=["*.pyc", "__pycache__", "p?pe"])
    assert [entry["name"] for entry in data["entries"]] == ["a-dir", "b.txt", "link"]
    _, data = await read(server, "ls", path="a-dir")
    assert data["path"] == "a-dir" and [entry["name"] for entry in data["entries"]] == ["inner.txt"]
    assert (await failure(server, "ls", path="b.txt"))[0] == "NOT_A_DIRECTORY"
    assert (await failure(server, "ls", path="nowhere"))[0] == "FILE_NOT_FOUND"


async def test_ls_lists_the_first_1000_entries_by_name_of_a_larger_directory(start_server, root):
    for n in range(1005):
        (root / f"f{n:04d}").touch()
    server = await serve(start_server, root)
    text, data = await read(server, "ls")
    assert data["truncated"] is True and data["total_entries"] == 1005
    assert [entry["name"] for entry in data["entries"]] == [f"f{n:04d}" for n in range(1000)]
    assert text.endswith("[the first 1000 of 1005 entries by name; narrow with ignore or list a subdirectory]\n")


# list_workspaces.


async def test_list_workspaces_shows_names_and_rights_but_not_host_paths(start_server, tmp_path):
    for name in ("main", "docs", "shell"):
        (tmp_path / name).mkdir()
    workspaces = (Workspace("main", str(tmp_path / "main")),
                  Workspace("docs", str(tmp_path / "docs"), read_only=True, max_file_bytes=MiB),
                  Workspace("shell", str(tmp_path / "shell"), allow_bash=True, bash_as_server_user=True))
    server = await start_server(workspaces=workspaces)
    text, data = await read(server, "list_workspaces")
    assert data == {"workspaces": [
        {"name": "main", "default": True, "read_only": False, "bash": False, "max_file_bytes": 10 * MiB},
        {"name": "docs", "default": False, "read_only": True, "bash": False, "max_file_bytes": MiB},
        {"name": "shell", "default": False, "read_only": False, "bash": True, "max_file_bytes": 10 * MiB}]}
    assert str(tmp_path) not in text and text.splitlines()[0] == (
        "main (default): read-write, bash off, max_file_bytes 10485760")
    _, only = await read(server, "list_workspaces", workspace="docs")
    assert [w["name"] for w in only["workspaces"]] == ["docs"]

    # A server anyone on the network may call without authentication never offers bash.
    exposed = await start_server(workspaces=workspaces, grpc_address="0.0.0.0:0", insecure=True)
    _, data = await read(exposed, "list_workspaces")
    assert [w["bash"] for w in data["workspaces"]] == [False, False, False]


async def test_read_keeps_under_the_servers_max_output_bytes_when_it_is_lower_than_reads_own(start_server, root):
    # Issue 18 review L2: read's own 256 KiB bound used to replace the operator's setting.
    (root / "big.txt").write_text("".join(f"{n:>7} {'x' * 90}\n" for n in range(20_000)))
    server = await start_server(workspaces=(Workspace("w", str(root)),), max_output_bytes=64 * 1024)
    response = await call(server, "read", path="big.txt", limit=100_000)
    assert response.success, response.error.message
    result = _structured(response)
    assert len(response.output.encode()) <= 64 * 1024
    assert len(json.dumps(result, ensure_ascii=False).encode()) <= 64 * 1024
    assert result["next_offset"] == len(result["lines"]) + 1 and "[stopped at the output limit of 65536" in \
        response.output
