"""glob, grep and search_content on real files through a real server, grep running the real ripgrep: what they
find, in which order and shape, how ignore files, limits and long lines are handled, and how a bad pattern is
refused. Escapes (symlinks out, swapped paths, option-like names) are in
tests/security/test_security_workspace_search.py."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.json_format import MessageToDict

from toolhost.v1 import tool_service_pb2
from toolhost_server.workspaces import Workspace
from toolhost_server.workspaces.globbing import GlobPattern, find_matches
from toolhost_server.workspaces.ripgrep import MAX_EVENT_BYTES, MAX_LINE_CHARS, RIPGREP_MISSING

from helpers.calls import call
from helpers.servers import RunningServer, ServerFactory
from helpers.status import violations

pytestmark = pytest.mark.skipif(shutil.which("rg") is None, reason="needs ripgrep (make test installs it)")


async def serve(start_server: ServerFactory, root: Path) -> RunningServer:
    root.mkdir(exist_ok=True)
    return await start_server(workspaces=(Workspace("w", str(root)),))


async def found(server: RunningServer, tool: str, **arguments: Any) -> dict[str, Any]:
    response = await call(server, tool, arguments)
    assert response.success, response.error
    output: dict[str, Any] = MessageToDict(response.structured_output)
    return output


async def refused(server: RunningServer, tool: str, **arguments: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(server, tool, arguments)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    return caught.value


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def lines_of(result: dict[str, Any]) -> list[tuple[str, int, str, bool]]:
    return [(line["path"], int(line["line"]), line["text"], line["match"]) for line in result["lines"]]


# --- grep -----------------------------------------------------------------------------------------------------


async def test_grep_content_gives_matching_lines_with_numbers_case_and_context(start_server, tmp_path):
    root = tmp_path / "w"
    write(root, {"a.py": "one\nHello there\nthree\nfour\nhello again\n", "sub/b.txt": "nothing\nhello b\n"})
    server = await serve(start_server, root)

    result = await found(server, "grep", pattern="hello", output_mode="content")
    assert lines_of(result) == [("a.py", 5, "hello again", True), ("sub/b.txt", 2, "hello b", True)]
    assert result["truncated"] is False

    result = await found(server, "grep", pattern="hello", output_mode="content", case_insensitive=True)
    assert [(path, line) for path, line, _, _ in lines_of(result)] == [("a.py", 2), ("a.py", 5), ("sub/b.txt", 2)]

    response = await call(server, "grep", pattern="hello", output_mode="content", case_insensitive=True,
                          context=1, path="a.py")
    assert lines_of(MessageToDict(response.structured_output)) == [
        ("a.py", 1, "one", False), ("a.py", 2, "Hello there", True), ("a.py", 3, "three", False),
        ("a.py", 4, "four", False), ("a.py", 5, "hello again", True)]
    # rg's own layout: ":" after a match's path and number, "-" after a context line's.
    assert response.output.splitlines() == ["a.py-1-one", "a.py:2:Hello there", "a.py-3-three", "a.py-4-four",
                                            "a.py:5:hello again"]


async def test_grep_output_modes_and_paths_relative_to_the_workspace_root(start_server, tmp_path):
    root = tmp_path / "w"
    write(root, {"x.txt": "match\nmatch\nno\n", "deep/er/y.txt": "match\n", "z.txt": "none\n"})
    server = await serve(start_server, root)
    result = await found(server, "grep", pattern="match")  # files_with_matches by default, as Claude Code's Grep
    assert result == {"output_mode": "files_with_matches", "files": ["deep/er/y.txt", "x.txt"], "truncated": False,
                      "warnings": []}
    result = await found(server, "grep", pattern="match", output_mode="count")
    assert result["counts"] == [{"path": "deep/er/y.txt", "count": 1}, {"path": "x.txt", "count": 2}]
    # A subdirectory searched: paths are still relative to the root, not to it.
    result = await found(server, "grep", pattern="match", path="deep")
    assert result["files"] == ["deep/er/y.txt"]
    response = await call(server, "grep", pattern="match", output_mode="count")
    assert response.output == "deep/er/y.txt:1\nx.txt:2"


async def test_no_match_is_a_success_with_nothing_found(start_server, tmp_path):
    root = tmp_path / "w"
    write(root, {"a.txt": "alpha\n"})
    server = await serve(start_server, root)
    response = await call(server, "grep", pattern="omega", output_mode="content")
    assert response.success and MessageToDict(response.structured_output)["lines"] == []
    assert response.output == "No matches for 'omega'."


async def test_the_glob_argument_filters_files(start_server, tmp_path):
    root = tmp_path / "w"
    write(root, {"a.py": "token\n", "b.js": "token\n", "lib/c.py": "token\n", "lib/d.min.js": "token\n"})
    server = await serve(start_server, root)
    assert (await found(server, "grep", pattern="token", glob="*.py"))["files"] == ["a.py", "lib/c.py"]
    assert (await found(server, "grep", pattern="token", glob="!*.min.js"))["files"] == ["a.py", "b.js", "lib/c.py"]
    assert (await found(server, "grep", pattern="token", glob="lib/**"))["files"] == ["lib/c.py", "lib/d.min.js"]


async def test_gitignore_is_respected_without_a_git_repository_unless_no_ignore(start_server, tmp_path):
    root = tmp_path / "w"
    write(root, {".gitignore": "build/\n*.log\n", "src/a.txt": "needle\n", "build/out.txt": "needle\n",
                 "debug.log": "needle\n", "src/.ignore": "secret*\n", "src/secret.txt": "needle\n"})
    server = await serve(start_server, root)
    assert (await found(server, "grep", pattern="needle"))["files"] == ["src/a.txt"]
    # A subdirectory searched alone still obeys the root's .gitignore (rg reads ignore files above it)...
    write(root, {"src/trace.log": "needle\n"})
    assert (await found(server, "grep", pattern="needle", path="src"))["files"] == ["src/a.txt"]
    # ...but a directory named as the path is searched even when ignored, as rg does.
    assert (await found(server, "grep", pattern="needle", path="build"))["files"] == ["build/out.txt"]
    assert (await found(server, "grep", pattern="needle", no_ignore=True))["files"] == [
        "build/out.txt", "debug.log", "src/a.txt", "src/secret.txt", "src/trace.log"]


async def test_limit_bounds_the_results_and_says_so(start_server, tmp_path):
    root = tmp_path / "w"
    write(root, {f"f{i:02}.txt": "hit\nhit\nhit\n" for i in range(30)})
    server = await serve(start_server, root)
    result = await found(server, "grep", pattern="hit", limit=5)
    assert len(result["files"]) == 5 and result["truncated"] is True
    assert set(result["files"]) < {f"f{i:02}.txt" for i in range(30)}
    result = await found(server, "grep", pattern="hit", output_mode="count", limit=4)
    assert len(result["counts"]) == 4 and all(c["count"] == 3 for c in result["counts"]) and result["truncated"]
    response = await call(server, "grep", pattern="hit", output_mode="content", limit=7)
    result = MessageToDict(response.structured_output)
    assert len(result["lines"]) == 7 and result["truncated"] is True
    assert "stopped at limit=7" in response.output
    # Exactly as many as there are: not truncated.
    result = await found(server, "grep", pattern="hit", limit=30)
    assert len(result["files"]) == 30 and result["truncated"] is False


async def test_context_lines_of_a_match_left_out_by_the_limit_are_left_out_too(start_server, tmp_path):
    root = tmp_path / "w"
    write(root, {"a.txt": "".join(f"{'hit' if i in (3, 9) else 'line'} {i}\n" for i in range(1, 13))})
    server = await serve(start_server, root)
    result = await found(server, "grep", pattern="hit", output_mode="content", context=2, limit=1)
    assert [(line, match) for _, line, _, match in lines_of(result)] == [
        (1, False), (2, False), (3, True), (4, False), (5, False)]
    assert result["truncated"] is True


async def test_a_pattern_that_does_not_compile_is_invalid_argument_with_rgs_message(start_server, tmp_path):
    root = tmp_path / "w"
    write(root, {"a.txt": "x\n"})
    server = await serve(start_server, root)
    error = await refused(server, "grep", pattern="hello(")
    assert "unclosed group" in error.details() and "regex parse error" in error.details()
    assert [field for field, _ in violations(error)] == ["/pattern"]
    error = await refused(server, "grep", pattern="x", glob="a[b")
    assert [field for field, _ in violations(error)] == ["/glob"] and "unclosed character class" in error.details()
    error = await refused(server, "grep", pattern="a\x00b")
    assert [field for field, _ in violations(error)] == ["/pattern"] and "\\x00" in error.details()


async def test_a_file_as_path_is_searched_and_named_by_its_workspace_path(start_server, tmp_path):
    root = tmp_path / "w"
    write(root, {"docs/readme.md": "install it\nrun it\n", "other.md": "install\n"})
    os.symlink("docs/readme.md", root / "alias.md")  # a symlink inside the workspace, given as the path
    server = await serve(start_server, root)
    result = await found(server, "grep", pattern="it$", path="docs/readme.md", output_mode="content")
    assert lines_of(result) == [("docs/readme.md", 1, "install it", True), ("docs/readme.md", 2, "run it", True)]
    assert (await found(server, "grep", pattern="run", path="alias.md"))["files"] == ["docs/readme.md"]


async def test_long_lines_are_cut_and_said_so_even_past_what_one_event_may_hold(start_server, tmp_path):
    root = tmp_path / "w"
    long_line = "x" * 5000 + " needle"
    huge_line = "y" * (MAX_EVENT_BYTES + 4096) + " needle"
    write(root, {"long.txt": f"first\n{long_line}\n", "huge.txt": f"a\nb\n{huge_line}\n"})
    server = await serve(start_server, root)
    response = await call(server, "grep", pattern="needle", output_mode="content")
    assert response.success, response.error
    lines = {line["path"]: line for line in MessageToDict(response.structured_output)["lines"]}
    assert lines["long.txt"]["text"] == "x" * MAX_LINE_CHARS and lines["long.txt"]["cut"] is True
    assert int(lines["long.txt"]["line"]) == 2
    assert lines["huge.txt"]["text"] == "y" * MAX_LINE_CHARS and lines["huge.txt"]["cut"] is True
    assert int(lines["huge.txt"]["line"]) == 3
    assert f"[... cut at {MAX_LINE_CHARS} characters]" in response.output


async def test_names_and_lines_that_are_not_utf8_come_back_as_valid_text(start_server, tmp_path):
    root = tmp_path / "w"
    root.mkdir()
    (root / os.fsdecode(b"caf\xe9.txt")).write_bytes(b"na\xefve needle\n")
    server = await serve(start_server, root)
    result = await found(server, "grep", pattern="needle", output_mode="content")
    assert [(line["path"], line["text"]) for line in result["lines"]] == [("caf\\xe9.txt", "na\ufffdve needle")]
    assert (await found(server, "glob", pattern="*.txt"))["files"] == ["caf\\xe9.txt"]


async def test_search_content_is_grep_under_drowcoders_name(start_server, tmp_path):
    root = tmp_path / "w"
    write(root, {"a.txt": "alpha\nbeta\n", "b/c.txt": "alphabet\n"})
    server = await serve(start_server, root)
    for arguments in ({"pattern": "alpha"}, {"pattern": "^b", "output_mode": "content"},
                      {"pattern": "ALPHA", "case_insensitive": True, "output_mode": "count"}):
        grep = await call(server, "grep", arguments)
        alias = await call(server, "search_content", arguments)
        assert alias.success and alias.tool == "search_content"
        assert (alias.output, alias.structured_output) == (grep.output, grep.structured_output)
    tool = await server.stub.GetTool(tool_service_pb2.GetToolRequest(name="search_content"))
    assert tool.tool.category == "file_ops" and "same tool as grep" in tool.tool.description


async def test_without_ripgrep_grep_is_not_served_and_the_server_says_why(start_server, tmp_path, monkeypatch,
                                                                          caplog):
    no_rg = tmp_path / "bin"
    no_rg.mkdir()
    monkeypatch.setenv("PATH", str(no_rg))
    with caplog.at_level(logging.INFO, logger="toolhost"):
        server = await serve(start_server, tmp_path / "w")
    listed = await server.stub.ListTools(tool_service_pb2.ListToolsRequest())
    names = {tool.name for tool in listed.tools}
    assert "glob" in names and not names & {"grep", "search_content"}
    said = [r.getMessage() for r in caplog.records if RIPGREP_MISSING in r.getMessage()]
    assert said == [f"not serving grep, search_content: {RIPGREP_MISSING}"], said


# --- glob -----------------------------------------------------------------------------------------------------


async def test_glob_double_star_matches_any_depth_including_none(start_server, tmp_path):
    root = tmp_path / "w"
    write(root, {"top.py": "", "a/one.py": "", "a/b/c/deep.py": "", "a/b/notes.txt": "", "a/b.py/inside.txt": ""})
    server = await serve(start_server, root)

    async def glob(pattern: str, path: str = ".") -> list[str]:
        return sorted((await found(server, "glob", pattern=pattern, path=path))["files"])

    assert await glob("**/*.py") == ["a/b/c/deep.py", "a/one.py", "top.py"]  # directories named *.py: not listed
    assert await glob("*.py") == ["top.py"]  # `*` stays within one name
    assert await glob("a/**/*.py") == ["a/b/c/deep.py", "a/one.py"]
    assert await glob("a/**") == ["a/b.py/inside.txt", "a/b/c/deep.py", "a/b/notes.txt", "a/one.py"]
    assert await glob("**/b/**/*.py") == ["a/b/c/deep.py"]
    assert await glob("a/?/c/*") == ["a/b/c/deep.py"]
    assert await glob("a/[a-c]/notes.[!p]*") == ["a/b/notes.txt"]
    assert await glob("a/b/c/deep.py") == ["a/b/c/deep.py"]  # no wildcard at all
    assert await glob("**/*.py", path="a/b") == ["a/b/c/deep.py"]  # relative to the root, found under path
    assert await glob("nothing/*") == []


async def test_glob_lists_newest_first_and_at_most_1000(start_server, tmp_path):
    root = tmp_path / "w"
    root.mkdir()
    for i in range(1005):
        path = root / "d" / f"{i % 7}" / f"f{i:04}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
        os.utime(path, ns=(0, 1_000_000_000 * (1000 + i)))
    server = await serve(start_server, root)
    response = await call(server, "glob", pattern="**/*.txt")
    result = MessageToDict(response.structured_output)
    assert result["truncated"] is True and int(result["matched"]) == 1005
    assert [Path(p).name for p in result["files"]] == [f"f{i:04}.txt" for i in range(1004, 4, -1)]
    assert "1005 files match; the 1000 newest are shown" in response.output


async def test_wildcards_skip_hidden_names_unless_the_pattern_names_them(start_server, tmp_path):
    root = tmp_path / "w"
    write(root, {".github/workflows/ci.yml": "", "app.yml": "", "conf/.hidden.yml": "", ".env": ""})
    server = await serve(start_server, root)
    assert (await found(server, "glob", pattern="**/*.yml"))["files"] == ["app.yml"]
    assert (await found(server, "glob", pattern=".github/**/*.yml"))["files"] == [".github/workflows/ci.yml"]
    assert (await found(server, "glob", pattern="conf/.*"))["files"] == ["conf/.hidden.yml"]
    assert (await found(server, "glob", pattern=".env"))["files"] == [".env"]


@pytest.mark.parametrize("pattern", ["../*", "../../etc/passwd", "a/../../*", "**/../*", "..", "/etc/*", "/**",
                                     "", "a\x00b"])
async def test_glob_patterns_that_could_leave_the_path_are_refused(start_server, tmp_path, pattern):
    server = await serve(start_server, tmp_path / "w")
    error = await refused(server, "glob", pattern=pattern)
    assert [field for field, _ in violations(error)] == ["/pattern"], error.details()


async def test_glob_of_a_file_path_is_a_file_state_not_a_refusal(start_server, tmp_path):
    root = tmp_path / "w"
    write(root, {"a.txt": ""})
    server = await serve(start_server, root)
    response = await call(server, "glob", pattern="*", path="a.txt")
    assert not response.success and response.error.code == "NOT_A_DIRECTORY"
    response = await call(server, "glob", pattern="*", path="missing")
    assert not response.success and response.error.code == "FILE_NOT_FOUND"


def test_the_pattern_automaton_prunes_what_cannot_match():
    pattern = GlobPattern.parse("src/**/test_*.py")
    assert pattern.literal_names(pattern.start) == ("src",)  # looked up, the root is never listed
    assert not pattern.step(pattern.start, "docs")
    below_src = pattern.step(pattern.start, "src")
    assert pattern.literal_names(below_src) is None and pattern.may_match_below(below_src)
    assert pattern.accepts(pattern.step(below_src, "test_a.py"))
    assert pattern.accepts(pattern.step(pattern.step(below_src, "pkg"), "test_b.py"))
    assert not pattern.accepts(pattern.step(below_src, "a.py"))
    assert [part.text for part in GlobPattern.parse("./a//**/**/b").parts] == ["a", "**", "b"]


def test_equally_new_files_come_in_path_order_and_the_limit_keeps_the_first(tmp_path):
    for name in ("e.txt", "b.txt", "d.txt", "a.txt", "c.txt"):
        (tmp_path / name).write_text("")
        os.utime(tmp_path / name, ns=(0, 5_000_000_000))
    (tmp_path / "z.txt").write_text("")
    os.utime(tmp_path / "z.txt", ns=(0, 9_000_000_000))
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        found_now = find_matches(fd, GlobPattern.parse("*.txt"), limit=4)
    finally:
        os.close(fd)
    assert found_now.paths == ["z.txt", "a.txt", "b.txt", "c.txt"] and found_now.matched == 6


# output bounded in bytes, and grep's glob from the root (issue 18 review: M4, L5)


@pytest.mark.parametrize("line", ["é" * 1999, "\x01" * 1999])
async def test_grep_content_that_escapes_to_more_bytes_than_characters_fits_the_output_limit(start_server, tmp_path,
                                                                                              line):
    root = tmp_path / "w"
    write(root, {"f.txt": "".join(f"{line}\n" for _ in range(600))})
    server = await serve(start_server, root)
    response = await call(server, "grep", {"pattern": ".", "output_mode": "content", "limit": 1000})
    assert response.success, response.error.message
    result = MessageToDict(response.structured_output)
    assert result["truncated"] and 0 < len(result["lines"]) < 600
    assert len(json.dumps(result, ensure_ascii=False).encode()) <= 1024 * 1024
    assert all(found["text"] == line for found in result["lines"])


async def test_long_names_in_grep_and_glob_results_fit_the_output_limit(start_server, tmp_path):
    root = tmp_path / "w"
    deep = "/".join(["\x01" * 200] * 15)  # each path about 3 KB, 18 KB once escaped for JSON
    write(root, {f"{deep}/{n:04}.txt": "hit\n" for n in range(200)})
    server = await start_server(workspaces=(Workspace("w", str(root)),), max_output_bytes=256 * 1024)
    for tool, arguments, key in (("grep", {"pattern": "hit", "limit": 1000}, "files"),
                                 ("glob", {"pattern": "**/*.txt"}, "files")):
        response = await call(server, tool, arguments)
        assert response.success, response.error.message
        result = MessageToDict(response.structured_output)
        assert result["truncated"] and 0 < len(result[key]) < 200, (tool, len(result[key]))


@pytest.mark.parametrize(("glob", "expected"), [
    ("sub/*.py", ["sub/a.py"]),
    ("sub/**/*.py", ["sub/a.py", "sub/deep/b.py"]),
    ("s*/deep/*.py", ["sub/deep/b.py"]),
    ("*.py", ["sub/a.py", "sub/deep/b.py"]),
    ("**/deep/*.py", ["sub/deep/b.py"]),
    ("!sub/*.py", ["sub/deep/b.py", "sub/notes.txt"]),
    ("other/*.py", []),
    ("!other/*.py", ["sub/a.py", "sub/deep/b.py", "sub/notes.txt"]),
])
async def test_grep_glob_is_relative_to_the_workspace_root_like_its_results(start_server, tmp_path, glob, expected):
    root = tmp_path / "w"
    write(root, {"top.py": "hit\n", "sub/a.py": "hit\n", "sub/deep/b.py": "hit\n", "sub/notes.txt": "hit\n",
                 "other/c.py": "hit\n"})
    server = await serve(start_server, root)
    result = await found(server, "grep", pattern="hit", path="sub", glob=glob)
    assert sorted(result.get("files", [])) == expected
