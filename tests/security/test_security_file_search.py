"""The file search tools of issue 19 under attack, through a real server with a real index: scopes that leave the
search root (through `..`, symlinks, /proc), get_metadata used to learn whether a file exists outside the roots,
huge queries, and FTS5 syntax in queries, which must stay words."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.json_format import MessageToDict

from toolhost.v1 import tool_service_pb2

from helpers.calls import call
from helpers.file_search_tools import serve
from helpers.servers import RunningServer
from helpers.status import violations

SECRET = "outsidesecret5d1c"
# What differs between any two calls: left out when two answers are compared.
PER_CALL_FIELDS = ("call_id", "timestamp", "duration_ms", "trace_id")


def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A search root, and beside it a directory outside every root that holds the secret word."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "inside.txt").write_text("inside words\n")
    outside.mkdir()
    (outside / f"{SECRET}.txt").write_text(f"{SECRET}\n")
    return root, outside


async def refused(server: RunningServer, tool: str, **arguments: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(server, tool, arguments)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    return caught.value


async def results(server: RunningServer, tool: str, **arguments: Any) -> list[dict[str, Any]]:
    response = await call(server, tool, arguments)
    assert response.success, response.error
    found: list[dict[str, Any]] = MessageToDict(response.structured_output)["results"]
    return found


def scopes_that_leave(root: Path, outside: Path) -> list[str]:
    return [f"{root}/..", f"{root}/../outside", f"{root}/sub/../../outside", f"{root}/sub/../..",
            f"{root}/./sub/../../../../../..", f"{root}/out", f"{root}/out-relative", f"{root}/sub/up",
            f"{root}/abs-root-parent"]


async def test_scopes_leaving_the_root_through_dots_or_symlinks_are_refused(start_server, tmp_path):
    root, outside = layout(tmp_path)
    os.symlink(outside, root / "out")
    os.symlink("../outside", root / "out-relative")
    os.symlink("../..", root / "sub" / "up")
    os.symlink(tmp_path, root / "abs-root-parent")
    server = await serve(start_server, root)
    for tool, extra in (("search", {"query": SECRET}), ("search_by_kind", {"kind": "document"}),
                        ("recent_files", {})):
        for scope in scopes_that_leave(root, outside):
            error = await refused(server, tool, scope=scope, **extra)
            assert [field for field, _ in violations(error)] == ["/scope"], (tool, scope, error.details())
            assert SECRET not in error.details()


async def test_symlinks_inside_the_root_to_outside_are_neither_indexed_nor_followed(start_server, tmp_path):
    root, outside = layout(tmp_path)
    os.symlink(outside, root / "out")
    os.symlink(outside / f"{SECRET}.txt", root / "secret-link.txt")
    server = await serve(start_server, root)
    assert await results(server, "search", query=SECRET, scope=str(root)) == []
    found = await results(server, "search_by_kind", kind="document", scope=str(root))
    assert [r["path"] for r in found] == [f"{root}/sub/inside.txt"]
    found = await results(server, "recent_files", scope=str(root), since="1970-01-01")
    assert [r["path"] for r in found] == [f"{root}/sub/inside.txt"]
    error = await refused(server, "get_metadata", path=f"{root}/secret-link.txt")
    assert [field for field, _ in violations(error)] == ["/path"]


async def test_scopes_outside_every_root_are_refused_before_any_file_is_touched(start_server, tmp_path):
    root, _ = layout(tmp_path)
    server = await serve(start_server, root)
    for scope in ("/proc", "/proc/self", "/proc/self/cwd", "/proc/self/fd", "/proc/1/root", "/", "/etc", "/root",
                  "/dev", "/no/such/dir", f"{root}-sibling", str(tmp_path)):
        error = await refused(server, "search", query="root", scope=scope)
        assert violations(error) == [("/scope", f"{scope!r} is not inside a search root; give a directory under "
                                                f"one of: {root}")]


async def test_proc_paths_to_the_root_are_outside_it(start_server, tmp_path):
    """/proc/self/root/<root> and /proc/self/cwd lead to the root's files, but by another name: not under the root
    as configured, so they are refused and never resolved."""
    root, _ = layout(tmp_path)
    server = await serve(start_server, root)
    for scope in (f"/proc/self/root{root}", f"/proc/{os.getpid()}/root{root}/sub"):
        await refused(server, "search", query="inside", scope=scope)
    for path in (f"/proc/self/root{root}/sub/inside.txt", "/proc/self/environ", "/proc/self/mem"):
        response = await call(server, "get_metadata", path=path)
        assert response.error.code == "FILE_NOT_FOUND", path


def outcome(response: tool_service_pb2.CallToolResponse, path: str) -> str:
    """Everything the caller learns from a get_metadata answer, with the path it asked about taken out."""
    fields = MessageToDict(response, preserving_proto_field_name=True)
    for noise in PER_CALL_FIELDS:
        fields.pop(noise, None)
    return json.dumps(fields, sort_keys=True).replace(path, "<path>")


async def test_get_metadata_cannot_tell_whether_a_file_exists_outside_the_roots(start_server, tmp_path):
    root, outside = layout(tmp_path)
    (outside / "dir").mkdir()
    server = await serve(start_server, root)
    missing_inside = await call(server, "get_metadata", path=f"{root}/sub/missing.txt")
    assert missing_inside.error.code == "FILE_NOT_FOUND"
    expected = outcome(missing_inside, f"{root}/sub/missing.txt")
    probes = [str(outside / f"{SECRET}.txt"), str(outside / "nothing.txt"), str(outside / "dir"),
              str(outside / "dir" / "x"), "/etc/passwd", "/etc/no-such-file", "/etc", "/", str(tmp_path),
              f"{root}x/file", "/dev/null", "/proc/self/status"]
    for path in probes:
        response = await call(server, "get_metadata", path=path)
        assert outcome(response, path) == expected, path
        assert response.output == missing_inside.output
    # Byte for byte, the same response message apart from the path (of the same length, as protobuf prefixes
    # each string with its length) and the per-call fields.
    assert os.path.exists("/etc/passwd") and not os.path.exists("/etc/nopass")
    existing = await call(server, "get_metadata", path="/etc/passwd")
    absent = await call(server, "get_metadata", path="/etc/nopass")
    for per_call in PER_CALL_FIELDS:
        existing.ClearField(per_call)
        absent.ClearField(per_call)
    assert existing.SerializeToString().replace(b"/etc/passwd", b"/etc/nopass") == absent.SerializeToString()


async def test_get_metadata_refusals_inside_a_root_do_not_depend_on_what_exists_outside(start_server, tmp_path):
    """`..` and symlinks out of the root are refused whether or not their target exists, with the same words."""
    root, outside = layout(tmp_path)
    os.symlink(outside / f"{SECRET}.txt", root / "to-existing")
    os.symlink(outside / "nothing.txt", root / "to-missing")
    server = await serve(start_server, root)
    pairs = [(f"{root}/../outside/{SECRET}.txt", f"{root}/../outside/nothing.txt"),
             (f"{root}/sub/../../outside/{SECRET}.txt", f"{root}/sub/../../outside/nothing.txt"),
             (f"{root}/to-existing", f"{root}/to-missing")]
    for existing, missing in pairs:
        first = await refused(server, "get_metadata", path=existing)
        second = await refused(server, "get_metadata", path=missing)
        assert first.details().replace("to-existing", "to-missing").replace(f"{SECRET}.txt", "nothing.txt") == \
            second.details(), (first.details(), second.details())


async def test_huge_and_hostile_queries_are_refused_or_bounded(start_server, tmp_path):
    root, _ = layout(tmp_path)
    server = await serve(start_server, root)
    error = await refused(server, "search", query="a" * 1001, scope=str(root))
    assert [field for field, _ in violations(error)] == ["/query"]
    assert len(error.details()) < 2000  # the query is not echoed back whole
    error = await refused(server, "search", query=" ".join(f"w{i}" for i in range(33)), scope=str(root))
    assert "more than 32" in violations(error)[0][1]
    error = await refused(server, "search", query="!" * 1000, scope=str(root))
    assert "no letter or digit" in violations(error)[0][1] and len(error.details()) < 2000
    error = await refused(server, "search", query="inside\x00words", scope=str(root))
    assert [field for field, _ in violations(error)] == ["/query"]
    # One word as long as the schema allows is a word like any other: searched, nothing found.
    assert await results(server, "search", query="x" * 1000, scope=str(root)) == []
    for argument in ("scope",):
        error = await refused(server, "search", query="inside", **{argument: f"{root}/sub\x00/etc"})
        assert [field for field, _ in violations(error)] == [f"/{argument}"]
    error = await refused(server, "get_metadata", path=f"{root}/sub/inside.txt\x00.png")
    assert [field for field, _ in violations(error)] == ["/path"]


async def test_huge_scopes_paths_and_dates_are_refused_without_being_echoed_whole(start_server, tmp_path):
    """A refusal's message travels three times in its gRPC status, which a client reads only up to 8 KiB of: a
    huge argument must not make the refusal itself unreadable (grpc would fail the call with another error)."""
    root, _ = layout(tmp_path)
    server = await serve(start_server, root)
    huge = "/" + "a" * 100_000
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("search", {"query": "inside", "scope": huge}, "is longer than 4095 bytes; give a shorter path"),
        ("search", {"query": "inside", "scope": "/x" * 2000}, "is not inside a search root"),
        ("search", {"query": "inside", "scope": "x/" * 2000}, "is a relative path"),
        ("search", {"query": "inside", "scope": f"{root}/" + "b/" * 1500}, "has more than 256 components"),
        ("search", {"query": "inside", "scope": f"{root}/" + "c" * 4000}, "longer than 255 bytes"),
        ("recent_files", {"scope": str(root), "since": "9" * 100_000}, "is not a date and time in ISO 8601"),
        ("search_by_kind", {"scope": str(root), "kind": "k" * 100_000}, "the valid kinds are"),
        ("get_metadata", {"path": huge}, "is longer than 4095 bytes; give a shorter path"),
        ("get_metadata", {"path": "y/" * 2000}, "is a relative path"),
    ]
    for tool, arguments, said in cases:
        error = await refused(server, tool, **arguments)
        assert len(error.details()) < 2000, (tool, said)
        [(_, reason)] = violations(error)
        assert said in reason, (tool, reason)


BOTH = {"inside.txt", "or-not-near.txt"}
OPERATORS_FILE = {"or-not-near.txt"}


FTS5_QUERIES: list[tuple[str, set[str]]] = [
    ("inside OR secret", OPERATORS_FILE), ("inside NOT words", set()), ("NEAR(inside words)", set()),
    ("name:inside", OPERATORS_FILE), ("text:inside", OPERATORS_FILE), ("{name text}:inside", OPERATORS_FILE),
    ("inside AND", OPERATORS_FILE), ("inside';DROP TABLE files;--", OPERATORS_FILE), ("inside + words", {"inside.txt"}),
    ("inside*", BOTH), ("^inside", BOTH), ("(inside", BOTH), ("inside)", BOTH), ("-inside", BOTH),
    ('"inside', BOTH), ('inside"" words', {"inside.txt"}), ("\\inside", BOTH), ("col\x01umn:inside", set())]


async def test_fts5_syntax_in_a_query_is_only_words(start_server, tmp_path):
    """Every run of letters and digits is a word each found file must hold (operators are words too); nothing
    else in a query means anything to the index, and no query breaks it."""
    root, _ = layout(tmp_path)
    (root / "sub" / "or-not-near.txt").write_text("inside or not near and drop table files secret name text\n")
    server = await serve(start_server, root)
    for query, expected in FTS5_QUERIES:
        found = await results(server, "search", query=query, scope=str(root))
        assert {Path(r["path"]).name for r in found} == expected, query
    assert len(await results(server, "search", query="inside", scope=str(root))) == 2


async def test_a_query_of_fts5_punctuation_only_is_refused(start_server, tmp_path):
    root, _ = layout(tmp_path)
    server = await serve(start_server, root)
    for query in ('"', '""', "*", "^", ":", "()", "-- ;"):
        error = await refused(server, "search", query=query, scope=str(root))
        assert violations(error)[0][1].endswith("has no letter or digit; give words to search for"), query


async def test_get_metadata_says_nothing_of_files_the_index_excludes(start_server, tmp_path):
    """search_exclude's files (keys, .env, .ssh/) are not in the roots as far as the tools tell: get_metadata
    answers for them, by their name or through a symlink to them, exactly as for a missing file."""
    root, _ = layout(tmp_path)
    (root / ".ssh").mkdir()
    (root / ".ssh" / "config").write_text("Host *\n")
    (root / ".env").write_text("TOKEN=x\n")
    (root / "server.pem").write_text("-----BEGIN-----\n")
    os.symlink(".ssh/config", root / "innocent.txt")
    os.symlink("server.pem", root / "cert.txt")
    server = await serve(start_server, root)
    expected = outcome(await call(server, "get_metadata", path=f"{root}/missing.txt"), f"{root}/missing.txt")
    for name in (".ssh/config", ".env", "server.pem", "innocent.txt", "cert.txt", "sub/../.env", ".//.env"):
        path = f"{root}/{name}"
        assert outcome(await call(server, "get_metadata", path=path), path) == expected, name
    # Nor do the searches find them, by name or content.
    for query in ("config", "TOKEN", "BEGIN", "server"):
        assert await results(server, "search", query=query, scope=str(root)) == [], query
