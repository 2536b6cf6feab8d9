"""search, get_metadata, search_by_kind and recent_files (issue 19) as the Spotlight MCP seed's Testing table lists
them: ArgumentParser, PathSanitizer (scopes), PaginationConfig, ResultFormatter and the tools' error messages,
then each tool through a real server with search roots over real files. Attacks (escapes, probing outside the
roots, hostile queries) are in tests/security/test_security_file_search.py."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.json_format import MessageToDict

from toolhost.v1 import tool_service_pb2
from toolhost_server.errors import InvalidArgumentsError, UnsafePathError
from toolhost_server.search.arguments import (
    MAX_QUERY_WORDS,
    ArgumentParser,
    PaginationConfig,
    ScopeUnavailable,
)
from toolhost_server.search.formatting import ResultFormatter
from toolhost_server.search.kinds import KINDS
from toolhost_server.search.metadata import MAX_LINE_COUNT_BYTES, birth_time, file_metadata, line_count
from toolhost_server.search.service import IndexedFile
from toolhost_server.tools.file_search import NO_SEARCH_ROOTS

from helpers.calls import call
from helpers.file_search_tools import roots_over, serve
from helpers.servers import RunningServer
from helpers.status import violations

NOW = datetime(2026, 11, 25, 12, 0, 0, tzinfo=UTC)


def refusal(exc: pytest.ExceptionInfo[InvalidArgumentsError]) -> tuple[str, str]:
    [violation] = exc.value.violations
    return violation.pointer, violation.reason


# --- PaginationConfig ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("requested", "limit"), [(None, 100), (0, 1), (-7, 1), (1, 1), (250, 250), (1000, 1000),
                                                  (1001, 1000), (10**30, 1000)])
def test_pagination_defaults_to_100_and_clamps_to_1_through_1000(requested, limit):
    assert PaginationConfig.requested(requested).limit == limit


def test_pagination_apply_truncates_to_the_limit():
    assert PaginationConfig.requested(3).apply(list(range(10))) == [0, 1, 2]
    assert PaginationConfig.requested(3).apply([1]) == [1]
    assert PaginationConfig.requested(None).apply([]) == []


# --- ResultFormatter -------------------------------------------------------------------------------------------


def test_dates_are_iso_8601_in_utc_to_the_second():
    assert ResultFormatter.iso8601(0) == "1970-01-01T00:00:00Z"
    assert ResultFormatter.iso8601(1_700_000_000.75) == "2023-11-14T22:13:20Z"
    assert ResultFormatter.iso8601(-1) == "1969-12-31T23:59:59Z"
    moment = datetime(2026, 11, 18, 11, 30, tzinfo=timezone(timedelta(hours=2)))
    assert ResultFormatter.iso8601(moment) == "2026-11-18T09:30:00Z"
    assert ResultFormatter.iso8601(None) is None
    # A timestamp no datetime holds (a file touched into the far future) is clamped, not an exception.
    assert ResultFormatter.iso8601(1e20) == "9999-12-31T23:59:59Z"
    assert ResultFormatter.iso8601(-1e20) == "0001-01-01T00:00:00Z"


def test_results_are_a_json_array_of_entries_with_sorted_keys():
    found = IndexedFile(path="/r/a b.py", name="a b.py", size=12, modified=0.0, kind="code", mime="text/x-python")
    entry = ResultFormatter.entry(found)
    assert entry == {"path": "/r/a b.py", "name": "a b.py", "size": 12, "modified": "1970-01-01T00:00:00Z",
                     "kind": "code", "mime": "text/x-python"}
    text = ResultFormatter.format_results([entry, {**entry, "name": "é"}])
    assert json.loads(text) == [entry, {**entry, "name": "é"}]
    for line in text.splitlines()[1:-1]:  # one entry a line, keys sorted
        keys = list(json.loads(line.rstrip(",")))
        assert keys == sorted(keys)
    assert ResultFormatter.format_results([]) == "[]"


def test_metadata_is_a_json_object_with_sorted_keys():
    text = ResultFormatter.format_metadata({"size": 1, "created": None, "accessed": "x"})
    assert json.loads(text) == {"size": 1, "created": None, "accessed": "x"}
    assert list(json.loads(text)) == ["accessed", "created", "size"]
    assert text.index('"accessed"') < text.index('"created"') < text.index('"size"')


# --- ArgumentParser --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "reason"), [
    (None, "required argument is missing"), ("", "is empty; give a non-empty value"),
    ("   \t", "is empty; give a non-empty value"), (5, "must be a string, not int"),
    ("a\x00b", "holds a NUL character; remove it")])
def test_require_string_refuses_missing_empty_and_non_strings(value, reason):
    with pytest.raises(InvalidArgumentsError) as caught:
        ArgumentParser({"query": value}, tool="search").require_string("query")
    assert refusal(caught) == ("/query", reason)
    assert "tool 'search'" in caught.value.message
    assert ArgumentParser({"query": " x "}).require_string("query") == " x "


def test_require_absolute_path_refuses_a_relative_path_naming_the_argument():
    with pytest.raises(InvalidArgumentsError) as caught:
        ArgumentParser({"path": "docs/a.txt"}).require_absolute_path("path")
    assert refusal(caught) == ("/path", "'docs/a.txt' is a relative path; give an absolute path (starting with '/')")
    assert ArgumentParser({"path": "/docs/a.txt"}).require_absolute_path("path") == "/docs/a.txt"


def test_optional_string_and_int():
    parser = ArgumentParser({"since": "x", "limit": 5.0, "flag": True, "text": 3})
    assert parser.optional_string("since") == "x" and parser.optional_string("absent") is None
    assert parser.optional_int("limit") == 5 and parser.optional_int("absent") is None
    with pytest.raises(InvalidArgumentsError):
        parser.optional_int("flag")  # a bool is no count, although Python says it is an int
    with pytest.raises(InvalidArgumentsError):
        parser.optional_string("text")
    assert ArgumentParser(None).optional_int("limit") is None


def test_query_words_split_on_whitespace_and_punctuation_only_is_refused():
    assert ArgumentParser({"q": "  alpha\tbeta\n g "}).require_words("q") == ["alpha", "beta", "g"]
    assert ArgumentParser({"q": "config.py -- ***"}).require_words("q") == ["config.py", "--", "***"]
    assert ArgumentParser({"q": "héllo 日本"}).require_words("q") == ["héllo", "日本"]
    for query in ("!!!", "- * ( ) \" '", "...", "___"):
        with pytest.raises(InvalidArgumentsError) as caught:
            ArgumentParser({"q": query}).require_words("q")
        assert refusal(caught)[1].endswith("has no letter or digit; give words to search for"), query
    # Words count as the index sees them: runs of letters and digits, repeats once.
    assert ArgumentParser({"q": " ".join(["w"] * 100)}).require_words("q") == ["w"] * 100
    for query in (" ".join(f"w{i}" for i in range(MAX_QUERY_WORDS + 1)),
                  "-".join(f"w{i}" for i in range(MAX_QUERY_WORDS + 1))):
        with pytest.raises(InvalidArgumentsError) as caught:
            ArgumentParser({"q": query}).require_words("q")
        assert refusal(caught)[1] == f"has {MAX_QUERY_WORDS + 1} words, more than {MAX_QUERY_WORDS}; give fewer words"


def test_an_unknown_kind_is_refused_with_the_list_of_valid_kinds():
    for kind in KINDS:
        assert ArgumentParser({"kind": kind}).require_kind("kind") == kind
    with pytest.raises(InvalidArgumentsError) as caught:
        ArgumentParser({"kind": "spreadsheet"}).require_kind("kind")
    assert refusal(caught) == ("/kind", "unknown kind 'spreadsheet'; the valid kinds are: document, image, video, "
                                        "audio, pdf, code")


def test_since_defaults_to_seven_days_ago_and_reads_iso_8601_in_utc():
    assert ArgumentParser({}).optional_since("since", NOW) == NOW - timedelta(days=7)
    utc = UTC
    for text, moment in [("2026-11-18", datetime(2026, 11, 18, tzinfo=utc)),
                         ("2026-11-18T09:30:00Z", datetime(2026, 11, 18, 9, 30, tzinfo=utc)),
                         ("2026-11-18T11:30:00+02:00", datetime(2026, 11, 18, 9, 30, tzinfo=utc)),
                         ("2026-11-18T09:30", datetime(2026, 11, 18, 9, 30, tzinfo=utc)),
                         ("20261118T093000Z", datetime(2026, 11, 18, 9, 30, tzinfo=utc))]:
        parsed = ArgumentParser({"since": text}).optional_since("since", NOW)
        assert parsed == moment and parsed.tzinfo == utc, text


@pytest.mark.parametrize("text", ["yesterday", "", "18/11/2026", "2026-13-01", "2026-11-18T25:00",
                                  "0001-01-01T00:00:00+05:00", "1700000000"])
def test_an_unparsable_since_is_refused_naming_the_expected_format(text):
    with pytest.raises(InvalidArgumentsError) as caught:
        ArgumentParser({"since": text}).optional_since("since", NOW)
    pointer, reason = refusal(caught)
    assert pointer == "/since"
    assert reason.endswith("is not a date and time in ISO 8601, such as 2026-11-18, 2026-11-18T09:30:00Z or "
                           "2026-11-18T09:30:00+02:00")


# --- Scopes: ArgumentParser.require_validated_scope through the roots' PathSanitizer -------------------------------


def tree(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def test_a_scope_inside_a_root_is_its_path_under_the_root_with_symlinks_resolved(tmp_path):
    root = tmp_path / "root"
    tree(root, {"src/lib/a.py": ""})
    os.symlink("src/lib", root / "lib-link")
    roots = roots_over(root, tmp_path / "other")
    scope = ArgumentParser({"scope": str(root)}).require_validated_scope("scope", roots)
    assert (scope.path, scope.root.path) == (str(root), str(root))
    assert ArgumentParser({"scope": f"{root}/src/"}).require_validated_scope("scope", roots).path == f"{root}/src"
    assert ArgumentParser({"scope": f"{root}/lib-link"}).require_validated_scope("scope", roots).path == \
        f"{root}/src/lib"
    assert ArgumentParser({"scope": f"{root}/src/./lib/.."}).require_validated_scope("scope", roots).path == \
        f"{root}/src"


def test_scopes_that_are_relative_missing_files_or_outside_the_roots_are_refused(tmp_path):
    root = tmp_path / "root"
    tree(root, {"file.txt": "x"})
    (tmp_path / "other").mkdir()
    roots = roots_over(root, tmp_path / "other")

    def refused(scope: str) -> tuple[str, str]:
        with pytest.raises(InvalidArgumentsError) as caught:
            ArgumentParser({"scope": scope}, tool="search").require_validated_scope("scope", roots)
        return refusal(caught)

    assert refused("root") == ("/scope", "'root' is a relative path; give an absolute path (starting with '/')")
    assert refused(f"{root}/nope") == ("/scope", f"'{root}/nope' does not exist; give an existing directory under "
                                                 f"{root}")
    assert refused(f"{root}/file.txt") == ("/scope", f"'{root}/file.txt' is a file, not a directory; give the "
                                                     "directory to search")
    assert refused(str(tmp_path)) == ("/scope", f"'{tmp_path}' is not inside a search root; give a directory under "
                                                f"one of: {root}, {tmp_path / 'other'}")
    assert refused(f"{root}x") == ("/scope", f"'{root}x' is not inside a search root; give a directory under one "
                                             f"of: {root}, {tmp_path / 'other'}")
    pointer, reason = refused(f"{root}/../other")
    assert pointer == "/scope" and "leads outside" in reason


def test_a_scope_through_a_symlink_leaving_the_root_is_refused(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", root / "out")
    os.symlink("../outside", root / "out-relative")
    for scope in (f"{root}/out", f"{root}/out-relative"):
        with pytest.raises(UnsafePathError) as caught:
            ArgumentParser({"scope": scope}, tool="search").require_validated_scope("scope", roots_over(root))
        assert caught.value.argument == "scope" and caught.value.tool == "search"


def test_a_root_that_is_gone_is_the_servers_failure_not_a_refused_scope(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    roots = roots_over(root)
    root.rmdir()
    with pytest.raises(ScopeUnavailable) as caught:
        ArgumentParser({"scope": str(root)}).require_validated_scope("scope", roots)
    assert caught.value.code == "SEARCH_ROOT_MISSING" and str(root) in caught.value.message


# --- get_metadata's facts ----------------------------------------------------------------------------------------


def test_file_metadata_reads_every_fact_from_the_descriptor(tmp_path):
    path = tmp_path / "notes.md"
    path.write_text("one\ntwo\nthree")
    os.chmod(path, 0o640)
    os.utime(path, (1_600_000_000, 1_700_000_000))
    fd = os.open(path, os.O_RDONLY)
    try:
        facts = file_metadata(fd, "/root/notes.md")
        st = os.fstat(fd)
    finally:
        os.close(fd)
    assert facts["path"] == "/root/notes.md" and facts["name"] == "notes.md" and facts["size"] == 13
    assert facts["modified"] == "2023-11-14T22:13:20Z" and facts["accessed"] == "2020-09-13T12:26:40Z"
    assert facts["changed"] == ResultFormatter.iso8601(st.st_ctime)
    assert (facts["kind"], facts["mime"]) == ("document", "text/markdown")
    assert (facts["permissions"], facts["permissions_text"]) == ("0640", "rw-r-----")
    assert facts["line_count"] == 3
    import grp
    import pwd
    assert facts["owner"] == pwd.getpwuid(st.st_uid).pw_name and facts["group"] == grp.getgrgid(st.st_gid).gr_name
    assert isinstance(facts["extended_attributes"], list)


def test_owner_and_group_without_names_are_their_numbers(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to a user without a name")
    path = tmp_path / "f"
    path.write_bytes(b"\x00\x01")
    os.chown(path, 54321, 54322)
    os.chmod(path, 0o4755)
    fd = os.open(path, os.O_RDONLY)
    try:
        facts = file_metadata(fd, "/r/f")
    finally:
        os.close(fd)
    assert (facts["owner"], facts["group"]) == (54321, 54322)
    assert (facts["permissions"], facts["permissions_text"]) == ("4755", "rwsr-xr-x")
    assert facts["line_count"] is None  # binary: no line count


def test_created_is_the_birth_time_statx_reports_or_null(tmp_path):
    path = tmp_path / "born"
    path.write_text("x")
    stat_program = shutil.which("stat")
    if stat_program is None:
        pytest.skip("needs coreutils stat")
    # GNU stat asks statx for the birth time too: %W is its seconds, 0 (or "-") when the filesystem has none.
    said = subprocess.run([stat_program, "-c", "%W", str(path)], capture_output=True, text=True, check=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        born = birth_time(fd)
    finally:
        os.close(fd)
    if said.stdout.strip() in ("0", "-"):
        assert born is None
    else:
        assert born is not None and int(born) == int(said.stdout)


def test_line_count_counts_a_last_line_without_newline_and_stops_at_its_cap(tmp_path):
    def count(data: bytes, size: int | None = None) -> int | None:
        path = tmp_path / "f"
        path.write_bytes(data)
        fd = os.open(path, os.O_RDONLY)
        try:
            return line_count(fd, len(data) if size is None else size)
        finally:
            os.close(fd)

    assert count(b"") == 0
    assert count(b"a") == 1
    assert count(b"a\n") == 1
    assert count(b"a\nb") == 2
    assert count(b"\n\n\n") == 3
    assert count(b"x\n" * 700_000) == 700_000  # more than one chunk
    assert count(b"a\n", size=MAX_LINE_COUNT_BYTES + 1) is None
    big = tmp_path / "big"
    with open(big, "wb") as out:
        out.truncate(MAX_LINE_COUNT_BYTES + 2)  # a file that grew past the cap after its size was read
    fd = os.open(big, os.O_RDONLY)
    try:
        assert line_count(fd, 10) is None
    finally:
        os.close(fd)


def test_extended_attribute_names_are_listed(tmp_path):
    path = tmp_path / "tagged.txt"
    path.write_text("x")
    try:
        os.setxattr(path, "user.origin", b"mail")
    except OSError:
        pytest.skip("this filesystem takes no user extended attributes")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert "user.origin" in file_metadata(fd, "/r/tagged.txt")["extended_attributes"]
    finally:
        os.close(fd)


# --- The tools through a real server --------------------------------------------------------------------------


async def refused(server: RunningServer, tool: str, **arguments: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(server, tool, arguments)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    return caught.value


def answer_of(response: tool_service_pb2.CallToolResponse) -> dict[str, Any]:
    """The structured output, checked against the text output: the same results as a JSON array, keys sorted."""
    assert response.success, response.error
    structured: dict[str, Any] = MessageToDict(response.structured_output)
    for entry in structured["results"]:
        if "size" in entry:
            entry["size"] = int(entry["size"])
    assert set(structured) == {"results", "partial", "indexed_at"}
    return structured


def texts_agree(response: tool_service_pb2.CallToolResponse, results: list[dict[str, Any]]) -> None:
    shown = json.loads(response.output)
    assert shown == results
    for line in response.output.splitlines()[1:-1]:
        assert list(json.loads(line.rstrip(","))) == sorted(json.loads(line.rstrip(",")))


async def test_the_four_tools_are_read_only_searches_with_output_schemas(start_server, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    server = await serve(start_server, root)
    for name in ("search", "get_metadata", "search_by_kind", "recent_files"):
        tool = (await server.stub.GetTool(tool_service_pb2.GetToolRequest(name=name))).tool
        assert tool.category == "search", name
        assert tool.annotations.read_only and tool.annotations.idempotent and not tool.annotations.destructive
        schema = MessageToDict(tool.output_schema)
        assert schema["required"] == ["results", "partial", "indexed_at"], name


async def test_without_search_roots_the_tools_are_not_served_and_the_server_says_why(start_server, caplog):
    with caplog.at_level(logging.INFO, logger="toolhost"):
        server = await start_server()
    names = {tool.name for tool in (await server.stub.ListTools(tool_service_pb2.ListToolsRequest())).tools}
    assert not names & {"search", "get_metadata", "search_by_kind", "recent_files"}
    said = [r.getMessage() for r in caplog.records if NO_SEARCH_ROOTS in r.getMessage()]
    assert said == [f"not serving get_metadata, recent_files, search, search_by_kind: {NO_SEARCH_ROOTS}"], said


async def test_search_finds_files_by_every_word_as_prefixes_in_names_and_text(start_server, tmp_path):
    root = tmp_path / "root"
    tree(root, {"src/config_parser.py": "def parse(): pass\n", "notes/retry.md": "Exponential backoff for retries\n",
                "notes/other.md": "nothing to see\n", "src/backoff.py": "# retry with jitter\n"})
    server = await serve(start_server, root)
    response = await call(server, "search", query="conf pars", scope=str(root))
    answer = answer_of(response)
    assert [r["path"] for r in answer["results"]] == [f"{root}/src/config_parser.py"]
    [entry] = answer["results"]
    assert entry["name"] == "config_parser.py" and entry["size"] == 18 and entry["kind"] == "code"
    assert entry["mime"] == "text/x-python" and entry["modified"].endswith("Z")
    texts_agree(response, answer["results"])
    assert answer["partial"] is False and answer["indexed_at"].endswith("Z")

    answer = answer_of(await call(server, "search", query="RETR backoff", scope=str(root)))
    assert {r["path"] for r in answer["results"]} == {f"{root}/notes/retry.md", f"{root}/src/backoff.py"}
    # Ranked: the word in a name first, then in the text only.
    answer = answer_of(await call(server, "search", query="backoff", scope=str(root)))
    assert [r["path"] for r in answer["results"]] == [f"{root}/src/backoff.py", f"{root}/notes/retry.md"]
    # The scope narrows: a subdirectory, given with a trailing slash.
    answer = answer_of(await call(server, "search", query="retry", scope=f"{root}/src/"))
    assert [r["path"] for r in answer["results"]] == [f"{root}/src/backoff.py"]
    answer = answer_of(await call(server, "search", query="absent words", scope=str(root)))
    assert answer["results"] == []


async def test_limit_defaults_to_100_and_is_clamped_to_1_through_1000(start_server, tmp_path):
    root = tmp_path / "root"
    tree(root, {f"d{i % 5}/report{i:03}.txt": "quarterly\n" for i in range(120)})
    server = await serve(start_server, root)
    for arguments, count in [({}, 100), ({"limit": 0}, 1), ({"limit": -3}, 1), ({"limit": 7}, 7),
                             ({"limit": 5000}, 120)]:
        response = await call(server, "search", query="quarterly", scope=str(root), **arguments)
        assert len(answer_of(response)["results"]) == count, arguments
        assert len(json.loads(response.output)) == count


async def test_refused_arguments_name_the_argument_and_say_what_to_give(start_server, tmp_path):
    root = tmp_path / "root"
    tree(root, {"file.txt": "x\n"})
    server = await serve(start_server, root)
    cases: list[tuple[str, dict[str, Any], str, str]] = [
        ("search", {"scope": str(root)}, "/query", "required argument is missing"),
        ("search", {"query": "x"}, "/scope", "required argument is missing"),
        ("search", {"query": "", "scope": str(root)}, "/query", "is empty; give a non-empty value"),
        ("search", {"query": "?!", "scope": str(root)}, "/query", "'?!' has no letter or digit; give words to "
                                                                  "search for"),
        ("search", {"query": "x", "scope": "root"}, "/scope", "'root' is a relative path; give an absolute path "
                                                              "(starting with '/')"),
        ("search", {"query": "x", "scope": f"{root}/gone"}, "/scope", f"'{root}/gone' does not exist; give an "
                                                                      f"existing directory under {root}"),
        ("search", {"query": "x", "scope": f"{root}/file.txt"}, "/scope", f"'{root}/file.txt' is a file, not a "
                                                                          "directory; give the directory to search"),
        ("search_by_kind", {"scope": str(root)}, "/kind", "required argument is missing"),
        ("search_by_kind", {"kind": "pdf"}, "/scope", "required argument is missing"),
        ("search_by_kind", {"kind": "pdf", "scope": "."}, "/scope", "'.' is a relative path; give an absolute path "
                                                                    "(starting with '/')"),
        ("recent_files", {}, "/scope", "required argument is missing"),
        ("recent_files", {"scope": str(root), "since": "last week"}, "/since", (
            "'last week' is not a date and time in ISO 8601, such as 2026-11-18, 2026-11-18T09:30:00Z or "
            "2026-11-18T09:30:00+02:00")),
        ("get_metadata", {}, "/path", "required argument is missing"),
        ("get_metadata", {"path": "file.txt"}, "/path", "'file.txt' is a relative path; give an absolute path "
                                                        "(starting with '/')"),
    ]
    for tool, arguments, field, reason in cases:
        error = await refused(server, tool, **arguments)
        assert violations(error) == [(field, reason)], (tool, arguments, error.details())


async def test_an_unknown_kind_is_refused_with_every_valid_kind_listed(start_server, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    server = await serve(start_server, root)
    error = await refused(server, "search_by_kind", kind="spreadsheet", scope=str(root))
    assert violations(error) == [("/kind", "unknown kind 'spreadsheet'; the valid kinds are: document, image, "
                                           "video, audio, pdf, code")]
    for kind in ("PDF", "other", "", " pdf"):  # exactly as listed: "other" is what the rest are, not a kind
        error = await refused(server, "search_by_kind", kind=kind, scope=str(root))
        assert [field for field, _ in violations(error)] == ["/kind"], kind


async def test_search_by_kind_lists_the_files_of_a_kind_by_path(start_server, tmp_path):
    root = tmp_path / "root"
    tree(root, {"b/photo.png": b"\x89PNG\r\n\x1a\n" + bytes(64), "a/scan.pdf": b"%PDF-1.7\n",
                "a/shot.jpg": b"\xff\xd8\xff\xe0" + bytes(64), "c/disguised.txt": b"\x89PNG\r\n\x1a\n" + bytes(8),
                "main.py": "print(1)\n", "readme.md": "# hi\n"})
    server = await serve(start_server, root)
    response = await call(server, "search_by_kind", kind="image", scope=str(root))
    answer = answer_of(response)
    assert [(r["path"], r["mime"]) for r in answer["results"]] == [
        (f"{root}/a/shot.jpg", "image/jpeg"), (f"{root}/b/photo.png", "image/png"),
        (f"{root}/c/disguised.txt", "image/png")]
    assert all(r["kind"] == "image" for r in answer["results"])
    texts_agree(response, answer["results"])
    assert [r["name"] for r in answer_of(await call(server, "search_by_kind", kind="pdf", scope=str(root)))[
        "results"]] == ["scan.pdf"]
    assert [r["name"] for r in answer_of(await call(server, "search_by_kind", kind="code", scope=str(root)))[
        "results"]] == ["main.py"]
    assert answer_of(await call(server, "search_by_kind", kind="video", scope=str(root)))["results"] == []
    assert [r["name"] for r in answer_of(await call(server, "search_by_kind", kind="image", scope=f"{root}/b"))[
        "results"]] == ["photo.png"]


async def test_recent_files_lists_newest_first_since_a_moment(start_server, tmp_path):
    root = tmp_path / "root"
    now = datetime.now(UTC).timestamp()
    ages = {"today.txt": 3600, "yesterday.txt": 86400, "lastweek.txt": 6 * 86400, "old.txt": 30 * 86400}
    tree(root, {name: name for name in ages})
    for name, age in ages.items():
        os.utime(root / name, (now - age, now - age))
    server = await serve(start_server, root)
    response = await call(server, "recent_files", scope=str(root))  # since: 7 days ago
    answer = answer_of(response)
    assert [r["name"] for r in answer["results"]] == ["today.txt", "yesterday.txt", "lastweek.txt"]
    texts_agree(response, answer["results"])
    since = ResultFormatter.iso8601(now - 2 * 86400)
    answer = answer_of(await call(server, "recent_files", scope=str(root), since=since))
    assert [r["name"] for r in answer["results"]] == ["today.txt", "yesterday.txt"]
    answer = answer_of(await call(server, "recent_files", scope=str(root), since="1970-01-01", limit=2))
    assert [r["name"] for r in answer["results"]] == ["today.txt", "yesterday.txt"]


async def test_a_since_in_the_future_is_an_empty_answer_even_for_files_dated_later(start_server, tmp_path):
    root = tmp_path / "root"
    tree(root, {"from-the-future.txt": "x"})
    later = datetime.now(UTC) + timedelta(days=400)
    os.utime(root / "from-the-future.txt", (later.timestamp(), later.timestamp()))
    server = await serve(start_server, root)
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    response = await call(server, "recent_files", scope=str(root), since=tomorrow)
    assert answer_of(response)["results"] == [] and response.output == "[]"
    # The same file is found from a past moment: the empty answer is the future's, not the file's.
    answer = answer_of(await call(server, "recent_files", scope=str(root), since="2000-01-01"))
    assert [r["name"] for r in answer["results"]] == ["from-the-future.txt"]


async def test_get_metadata_describes_one_file(start_server, tmp_path):
    root = tmp_path / "root"
    tree(root, {"docs/guide.md": "# Guide\n\nline three\n"})
    os.symlink("docs/guide.md", root / "guide-link.md")
    os.utime(root / "docs/guide.md", (1_600_000_000, 1_700_000_000))
    server = await serve(start_server, root)
    response = await call(server, "get_metadata", path=f"{root}/docs/guide.md")
    answer = answer_of(response)
    [facts] = answer["results"]
    assert facts["path"] == f"{root}/docs/guide.md" and facts["name"] == "guide.md" and int(facts["size"]) == 20
    assert facts["modified"] == "2023-11-14T22:13:20Z" and facts["accessed"] == "2020-09-13T12:26:40Z"
    assert facts["kind"] == "document" and facts["mime"] == "text/markdown"
    mode = os.stat(root / "docs/guide.md").st_mode
    assert int(facts["line_count"]) == 3 and facts["permissions"] == f"{mode & 0o7777:04o}"
    assert set(facts) >= {"created", "changed", "owner", "group", "permissions_text", "extended_attributes"}
    assert json.loads(response.output) == facts  # MessageToDict's 20.0 equals the text's 20
    assert list(json.loads(response.output)) == sorted(facts)
    # Through a symlink inside the root: the file it points at, under its own path.
    facts = answer_of(await call(server, "get_metadata", path=f"{root}/guide-link.md"))["results"][0]
    assert facts["path"] == f"{root}/docs/guide.md"


async def test_get_metadata_of_a_missing_file_or_a_directory_is_the_tools_failure(start_server, tmp_path):
    root = tmp_path / "root"
    tree(root, {"docs/guide.md": "x"})
    server = await serve(start_server, root)
    response = await call(server, "get_metadata", path=f"{root}/docs/nope.md")
    assert not response.success and response.error.code == "FILE_NOT_FOUND"
    assert response.error.message == (f"'{root}/docs/nope.md' not found in the search roots; give the absolute path "
                                      "of an existing file under a search root")
    response = await call(server, "get_metadata", path=f"{root}/docs")
    assert not response.success and response.error.code == "IS_A_DIRECTORY"


async def test_calls_are_logged_without_results_refusals_as_warnings_failures_as_errors(start_server, tmp_path,
                                                                                        caplog):
    root = tmp_path / "root"
    tree(root, {"private-name-7f3e.txt": "needle\n"})
    server = await serve(start_server, root)
    with caplog.at_level(logging.DEBUG, logger="toolhost.tool"):
        answer_of(await call(server, "search", query="needle", scope=str(root)))
        answer_of(await call(server, "search_by_kind", kind="document", scope=str(root)))
        answer_of(await call(server, "recent_files", scope=str(root)))
        answer_of(await call(server, "get_metadata", path=f"{root}/private-name-7f3e.txt"))
        await refused(server, "search", query="needle", scope="relative")
        failed = await call(server, "get_metadata", path=f"{root}/missing.txt")
        assert failed.error.code == "FILE_NOT_FOUND"
    records = [r for r in caplog.records if r.name.startswith("toolhost.tool.")]
    assert "private-name-7f3e" not in "\n".join(r.getMessage() for r in records)
    calls = [r for r in records if r.levelno == logging.DEBUG]
    assert {r.name for r in calls} == {"toolhost.tool.search", "toolhost.tool.search_by_kind",
                                       "toolhost.tool.recent_files", "toolhost.tool.get_metadata"}
    [warning] = [r for r in records if r.levelno == logging.WARNING]
    assert warning.name == "toolhost.tool.search" and "/scope" in warning.getMessage()
    [error] = [r for r in records if r.levelno == logging.ERROR]
    assert error.name == "toolhost.tool.get_metadata" and "FILE_NOT_FOUND" in error.getMessage()
