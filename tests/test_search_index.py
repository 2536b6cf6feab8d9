"""The file search index: the first build, following creates, writes, renames and deletes, the rescan, the
fallback walk before the first build, kinds, exclusion, redaction, the index file's mode, and the degraded
state when the file watcher cannot run. Real files, real SQLite, real inotify; tests wait for the index's own
generation counter, never for time."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from toolhost_server.config import DEFAULT_SEARCH_EXCLUDE, Config, ConfigError, load_config
from toolhost_server.sanitize import LearningRedactor, Redactor
from toolhost_server.search.index_store import FILE_NAME
from toolhost_server.search.kinds import classify, is_text
from toolhost_server.search.service import SearchAnswer, SearchService

from helpers.waiting import within

LONG_AGO = datetime(2000, 1, 1, tzinfo=UTC)


def make_service(root: Path, data: Path, **overrides: object) -> SearchService:
    settings: dict[str, object] = {
        "data_dir": data, "exclude": DEFAULT_SEARCH_EXCLUDE, "max_text_bytes": 1024 * 1024,
        "rescan_seconds": 3600.0, "redactor": LearningRedactor(Redactor()), "debounce_ms": 20}
    settings.update(overrides)
    return SearchService([str(root)], **settings)  # type: ignore[arg-type]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "docs" / "quarterly_report.md").write_text("Revenue grew in the third quarter.\n")
    (root / "docs" / "notes.txt").write_text("Remember the zeppelin meeting.\n")
    (root / "src" / "main.py").write_text("def main():\n    return 'aubergine'\n")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    return root


@pytest.fixture
async def service(tree: Path, tmp_path: Path) -> AsyncIterator[SearchService]:
    running = make_service(tree, tmp_path / "data")
    await running.start()
    await until(running, lambda: built_and_watching(running), "the first build and the watcher")
    yield running
    await running.close()


def built_and_watching(service: SearchService) -> bool:
    return all(status.state == "ready" and status.watching for status in service.status())


async def until(service: SearchService, condition: Callable[[], bool], what: str) -> None:
    """Wait, on the index's own events, until `condition()` holds."""
    async def wait() -> None:
        generation = service.generation
        while not condition():
            generation = await service.changed(generation)
    await within(wait(), what)


async def until_answer(service: SearchService, ask: Callable[[], Awaitable[SearchAnswer]],
                       check: Callable[[list[str]], bool], what: str) -> list[str]:
    """Wait, on the index's events, until the answer's paths satisfy `check`; those paths."""
    async def wait() -> list[str]:
        while True:
            generation = service.generation
            paths = [result.path for result in (await ask()).results]
            if check(paths):
                return paths
            await service.changed(generation)
    return await within(wait(), what)


def paths_of(answer: SearchAnswer) -> list[str]:
    return [result.path for result in answer.results]


# --- the first build and the questions ------------------------------------------------------------------------


async def test_the_first_build_indexes_names_text_kinds_and_times(service: SearchService, tree: Path):
    report = str(tree / "docs" / "quarterly_report.md")
    by_name = await service.search(["quarterly"], str(tree), 10)
    assert paths_of(by_name) == [report] and not by_name.partial and by_name.indexed_at is not None
    # Words are ANDed prefixes, over name and text, without case.
    assert paths_of(await service.search(["QUART", "rev"], str(tree), 10)) == [report]
    assert paths_of(await service.search(["quart", "zeppelin"], str(tree), 10)) == []
    assert paths_of(await service.search(["aubergi"], str(tree), 10)) == [str(tree / "src" / "main.py")]
    # The scope limits the answer.
    assert paths_of(await service.search(["zeppelin"], str(tree / "src"), 10)) == []
    assert paths_of(await service.by_kind("image", str(tree), 10)) == [str(tree / "logo.png")]
    assert paths_of(await service.by_kind("code", str(tree), 10)) == [str(tree / "src" / "main.py")]
    documents = await service.by_kind("document", str(tree), 10)
    assert paths_of(documents) == [str(tree / "docs" / "notes.txt"), report]  # by path
    os.utime(tree / "docs" / "notes.txt", (1_000_000_000, 1_000_000_000))
    os.utime(tree / "src" / "main.py", (2_000_000_000, 2_000_000_000))
    await until_answer(service, lambda: service.recent(str(tree), LONG_AGO, 10),
                       lambda paths: paths[0] == str(tree / "src" / "main.py") and paths[-1].endswith("notes.txt"),
                       "recent files newest first after their times changed")
    since = datetime.fromtimestamp(1_500_000_000, UTC)
    assert paths_of(await service.recent(str(tree / "src"), since, 10)) == [str(tree / "src" / "main.py")]
    result = (await service.search(["aubergine"], str(tree), 1)).results[0]
    assert (result.name, result.kind, result.mime) == ("main.py", "code", "text/x-python")


async def test_a_name_match_ranks_above_a_text_match(service: SearchService, tree: Path):
    (tree / "docs" / "mentions.txt").write_text("the word galaxy appears here, galaxy again\n")
    (tree / "docs" / "galaxy.txt").write_text("nothing\n")
    paths = await until_answer(service, lambda: service.search(["galaxy"], str(tree), 10),
                               lambda paths: len(paths) == 2, "both galaxy files indexed")
    assert paths == [str(tree / "docs" / "galaxy.txt"), str(tree / "docs" / "mentions.txt")]


async def test_the_limit_is_honoured_and_nothing_matches_punctuation(service: SearchService, tree: Path):
    assert len((await service.by_kind("document", str(tree), 1)).results) == 1
    assert paths_of(await service.search(["?!", "--"], str(tree), 10)) == []


# --- following changes -------------------------------------------------------------------------------------------


async def test_a_created_file_is_found(service: SearchService, tree: Path):
    (tree / "docs" / "created.txt").write_text("a brand new pomegranate\n")
    await until_answer(service, lambda: service.search(["pomegranate"], str(tree), 10),
                       lambda paths: paths == [str(tree / "docs" / "created.txt")], "the created file found")


async def test_a_created_directory_tree_is_found(service: SearchService, tree: Path):
    # Files made before the watch on the new directory exists are found by walking it.
    (tree / "new" / "deep" / "er").mkdir(parents=True)
    (tree / "new" / "deep" / "er" / "inner.txt").write_text("kumquat\n")
    await until_answer(service, lambda: service.search(["kumquat"], str(tree), 10),
                       lambda paths: paths == [str(tree / "new" / "deep" / "er" / "inner.txt")],
                       "the file inside the new directories found")


async def test_a_written_file_is_indexed_again(service: SearchService, tree: Path):
    notes = tree / "docs" / "notes.txt"
    notes.write_text("Now about a xylophone.\n")
    await until_answer(service, lambda: service.search(["xylophone"], str(tree), 10),
                       lambda paths: paths == [str(notes)], "the new text found")
    assert paths_of(await service.search(["zeppelin"], str(tree), 10)) == []


async def test_a_renamed_file_and_directory_are_found_under_their_new_names(service: SearchService, tree: Path):
    (tree / "docs" / "notes.txt").rename(tree / "docs" / "renamed_notes.txt")
    await until_answer(service, lambda: service.search(["zeppelin"], str(tree), 10),
                       lambda paths: paths == [str(tree / "docs" / "renamed_notes.txt")], "the renamed file")
    (tree / "src").rename(tree / "source")
    await until_answer(service, lambda: service.search(["aubergine"], str(tree), 10),
                       lambda paths: paths == [str(tree / "source" / "main.py")], "the renamed directory's file")
    assert paths_of(await service.search(["renamed"], str(tree), 10)) == [str(tree / "docs" / "renamed_notes.txt")]


async def test_a_deleted_file_and_directory_are_forgotten(service: SearchService, tree: Path):
    (tree / "docs" / "notes.txt").unlink()
    shutil.rmtree(tree / "src")
    await until(service, lambda: service.status()[0].files == 2, "the deleted files forgotten by the index")
    assert paths_of(await service.search(["zeppelin"], str(tree), 10)) == []
    assert paths_of(await service.by_kind("code", str(tree), 10)) == []


async def test_files_deleted_after_indexing_are_left_out_of_answers_at_once(tree: Path, tmp_path: Path):
    service = make_service(tree, tmp_path / "data", watch=False)
    await service.start()
    try:
        await until(service, lambda: service.status()[0].state == "ready", "the first build")
        (tree / "docs" / "notes.txt").unlink()
        (tree / "src" / "main.py").unlink()
        (tree / "src" / "main.py").symlink_to(tree / "docs" / "quarterly_report.md")  # no longer a file
        # Nothing told the index (no watcher): the answer checks each file itself.
        assert service.status()[0].files == 4
        assert paths_of(await service.search(["zeppelin"], str(tree), 10)) == []
        assert paths_of(await service.by_kind("code", str(tree), 10)) == []
        assert [p for p in paths_of(await service.recent(str(tree), LONG_AGO, 10)) if "notes" in p] == []
    finally:
        await service.close()


async def test_the_periodic_rescan_finds_what_no_watcher_saw(tree: Path, tmp_path: Path):
    service = make_service(tree, tmp_path / "data", watch=False, rescan_seconds=0.05)
    await service.start()
    try:
        await until(service, lambda: service.status()[0].state == "ready", "the first build")
        first = service.status()[0].indexed_at
        (tree / "docs" / "late.txt").write_text("tamarind\n")
        (tree / "docs" / "notes.txt").unlink()
        await until_answer(service, lambda: service.search(["tamarind"], str(tree), 10),
                           lambda paths: paths == [str(tree / "docs" / "late.txt")], "the rescan's new file")
        await until(service, lambda: service.status()[0].files == 4, "the rescan forgetting the deleted file")
        status = service.status()[0]
        assert first is not None and status.indexed_at is not None and status.indexed_at > first
    finally:
        await service.close()


# --- before the first build: the walk within a budget -----------------------------------------------------------


async def test_before_the_first_build_a_question_walks_the_tree_and_says_when_it_ran_out(tree: Path, tmp_path: Path):
    service = make_service(tree, tmp_path / "data")  # not started: nothing is indexed
    whole = await service.search(["zeppelin"], str(tree), 10)
    assert paths_of(whole) == [str(tree / "docs" / "notes.txt")]
    assert (whole.partial, whole.indexed_at) == (False, None)
    assert paths_of(await service.by_kind("image", str(tree), 10)) == [str(tree / "logo.png")]
    assert [Path(p).name for p in paths_of(await service.recent(str(tree), LONG_AGO, 10))].count("main.py") == 1
    assert paths_of(await service.search(["aubergine"], str(tree / "docs"), 10)) == []
    service.fallback_budget_seconds = 0.0  # the budget is gone before the first file
    cut = await service.search(["zeppelin"], str(tree), 10)
    assert cut.partial and paths_of(cut) == []
    assert (await service.by_kind("image", str(tree), 10)).partial
    assert (await service.recent(str(tree), LONG_AGO, 10)).partial


# --- kinds -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "head", "expected"), [
    ("report.pdf", b"%PDF-1.7\n", ("pdf", "application/pdf")),
    ("photo.jpg", b"\xff\xd8\xff\xe0\x00\x10JFIF", ("image", "image/jpeg")),
    ("renamed.txt", b"\x89PNG\r\n\x1a\n\x00\x00", ("image", "image/png")),  # the content wins
    ("clip.mp4", b"\x00\x00\x00\x18ftypmp42", ("video", "video/mp4")),
    ("song.m4a", b"\x00\x00\x00\x20ftypM4A ", ("audio", "audio/mp4")),
    ("sound.wav", b"RIFF\x00\x00\x00\x00WAVEfmt ", ("audio", "audio/wav")),
    ("letter.docx", b"PK\x03\x04\x14\x00", ("document",
                                            "application/vnd.openxmlformats-officedocument.wordprocessingml.document")),
    ("bundle.zip", b"PK\x03\x04\x14\x00", ("other", "application/zip")),
    ("main.rs", b"fn main() {}\n", ("code", "text/x-rust")),
    ("app.ts", b"export const a = 1;\n", ("code", "text/x-typescript")),
    ("Makefile", b"all:\n", ("code", "text/x-makefile")),
    ("run", b"#!/usr/bin/env python3\nprint(1)\n", ("code", "text/x-python")),
    ("README", b"plain words\n", ("other", "text/plain")),
    ("notes.md", b"# Title\n", ("document", "text/markdown")),
    ("fake.png", b"just text, not an image\n", ("other", "text/plain")),
    ("blob", bytes(range(256)), ("other", "application/octet-stream")),
    ("unreadable.mp3", b"", ("audio", "audio/mpeg")),  # no bytes: the name alone
])
def test_kinds_come_from_content_signatures_then_the_name(name: str, head: bytes, expected: tuple[str, str]):
    assert classify(name, head) == expected


def test_text_is_told_from_binary_by_its_first_bytes():
    assert is_text("naïve café, UTF-8\n".encode()) and is_text("Latin-1 caf\xe9\n".encode("latin-1"))
    assert not is_text(b"text with a NUL\x00") and not is_text(bytes(range(1, 32)) * 4)


# --- exclusion, redaction, the index file ----------------------------------------------------------------------


async def test_excluded_names_are_never_indexed(tree: Path, tmp_path: Path):
    for relative in (".env", ".env.production", "deploy/server.pem", "deploy/tls.key", "home/.ssh/config",
                     "home/id_ed25519", ".git/config", "web/node_modules/pkg/index.js", "home/.aws/credentials",
                     "home/.netrc", "vault.kdbx"):
        (tree / relative).parent.mkdir(parents=True, exist_ok=True)
        (tree / relative).write_text("marmalade inside an excluded file\n")
    (tree / "home" / ".ssh.txt").write_text("marmalade in a file that only looks like .ssh/\n")
    service = make_service(tree, tmp_path / "data")
    await service.start()
    try:
        await until(service, lambda: built_and_watching(service), "the first build")
        assert paths_of(await service.search(["marmalade"], str(tree), 100)) == [str(tree / "home" / ".ssh.txt")]
        (tree / "home" / ".ssh" / "known_hosts").write_text("marmalade again\n")
        (tree / "home" / "visible.txt").write_text("marmalade visible\n")
        await until_answer(service, lambda: service.search(["marmalade"], str(tree), 100),
                           lambda paths: len(paths) == 2, "the new visible file, and not the excluded one")
        # A scope inside an excluded directory holds nothing, walked or indexed.
        assert paths_of(await service.search(["marmalade"], str(tree / "home" / ".ssh"), 100)) == []
    finally:
        await service.close()
    index = (tmp_path / "data" / FILE_NAME).read_bytes()
    assert b"marmalade inside" not in index


async def test_a_configured_credential_in_a_file_cannot_be_found_by_any_prefix(start_server, tmp_path: Path):
    secret = "Zq8vLx3mPw7kRt2nBf9s"
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "warehouse.password").write_text(secret)
    root = tmp_path / "root"
    root.mkdir()
    (root / "settings.txt").write_text(f"warehouse login with {secret} for the nightly export\n")
    server = await start_server(search_roots=(str(root),), credentials_dir=str(credentials))
    service = server.toolhost.search
    assert service is not None and server.toolhost.runner_settings.tool_services is not None
    assert server.toolhost.runner_settings.tool_services.search is service
    await until(service, lambda: service.status()[0].state == "ready", "the first build")
    assert paths_of(await service.search(["nightly", "export"], str(root), 10)) == [str(root / "settings.txt")]
    for prefix in (secret[:3], secret[:8], secret, secret.lower()):
        assert paths_of(await service.search([prefix], str(root), 10)) == [], prefix
    for suffix in ("", "-wal"):
        stored = server.toolhost.config.effective_data_dir() / f"{FILE_NAME}{suffix}"
        assert secret.encode() not in stored.read_bytes() and b"nightly" in b"".join(
            (server.toolhost.config.effective_data_dir() / f"{FILE_NAME}{end}").read_bytes() for end in ("", "-wal"))
    # The walk before a build redacts the same way.
    walker = make_service(root, tmp_path / "walker", redactor=server.toolhost.redactor)
    assert paths_of(await walker.search([secret[:6]], str(root), 10)) == []
    assert paths_of(await walker.search(["nightly"], str(root), 10)) == [str(root / "settings.txt")]


async def test_the_index_file_is_private_from_its_creation(tree: Path, tmp_path: Path):
    data = tmp_path / "fresh" / "data"
    service = make_service(tree, data)
    old_umask = os.umask(0)  # whatever the umask, the file is created 0600 (and its directory 0700)
    try:
        await service.start()
    finally:
        os.umask(old_umask)
    try:
        await until(service, lambda: service.status()[0].state == "ready", "the first build")
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
        for suffix in ("", "-wal", "-shm"):
            path = data / f"{FILE_NAME}{suffix}"
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    finally:
        await service.close()


async def test_a_restart_keeps_kinds_and_times_but_searches_text_only_after_its_own_build(tree: Path, tmp_path: Path):
    first = make_service(tree, tmp_path / "data")
    await first.start()
    await until(first, lambda: first.status()[0].state == "ready", "the first build")
    await first.close()
    again = make_service(tree, tmp_path / "data", watch=False)
    again.fallback_budget_seconds = 0.0
    await again.start(maintain=False)  # the state between opening the index and this run's first build
    try:
        kinds = await again.by_kind("image", str(tree), 10)
        assert (paths_of(kinds), kinds.partial) == ([str(tree / "logo.png")], False)
        assert (await again.search(["zeppelin"], str(tree), 10)).partial  # text: walked until rebuilt
    finally:
        await again.close()


# --- degraded: no file watcher ----------------------------------------------------------------------------------


async def test_a_root_whose_watcher_failed_is_degraded_logged_once_and_kept_by_the_rescan(
        tree: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture):
    service = make_service(tree, tmp_path / "data", watch=False, rescan_seconds=0.05)
    await service.start()
    try:
        await until(service, lambda: service.status()[0].state == "ready", "the first build")
        service.mark_degraded(str(tree), "OS file watch limit reached")
        service.mark_degraded(str(tree), "OS file watch limit reached")
        status = service.status()[0]
        assert (status.state, status.watching, status.degraded_reason) == (
            "degraded", False, "OS file watch limit reached")
        assert sum("no longer watched" in record.getMessage() for record in caplog.records) == 1
        (tree / "docs" / "later.txt").write_text("persimmon\n")
        await until_answer(service, lambda: service.search(["persimmon"], str(tree), 10),
                           lambda paths: len(paths) == 1, "the rescan finding the file")
    finally:
        await service.close()


WATCH_LIMIT_SCRIPT = """
import asyncio, json, sys
from pathlib import Path
from toolhost_server.sanitize import LearningRedactor, Redactor
from toolhost_server.search.service import SearchService

async def main():
    root, data = sys.argv[1], sys.argv[2]
    service = SearchService([root], data_dir=Path(data), exclude=(), max_text_bytes=4096, rescan_seconds=3600,
                            redactor=LearningRedactor(Redactor()))
    await service.start()
    generation = 0
    while not (service.status()[0].state != "building" and (service.status()[0].degraded_reason
                                                              or service.status()[0].watching)):
        generation = await service.changed(generation)
    answer = await service.search(["needle"], root, 10)
    status = service.status()[0]
    print(json.dumps({"state": status.state, "reason": status.degraded_reason, "found": len(answer.results)}))
    await service.close()

asyncio.run(main())
"""


def test_running_out_of_inotify_watches_degrades_the_root(tmp_path: Path):
    # The limit is lowered in a user namespace of the test's own (/proc/sys/user/max_inotify_watches there
    # bounds that namespace only), never for the machine: other processes keep their watches.
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    root = tmp_path / "root"
    for index in range(40):
        (root / f"d{index}" / "e").mkdir(parents=True)
    (root / "d3" / "e" / "needle.txt").write_text("needle\n")
    script = tmp_path / "watch_limit.py"
    script.write_text(WATCH_LIMIT_SCRIPT)
    command = (f"echo 10 > /proc/sys/user/max_inotify_watches && exec {sys.executable} {script} {root} "
               f"{tmp_path / 'data'}")
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "true"], capture_output=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"user namespaces are not available here: {probe.stderr.decode().strip()}")
    result = subprocess.run(["unshare", "--user", "--map-root-user", "sh", "-c", command], capture_output=True,
                            text=True, timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["state"] == "degraded" and "limit" in outcome["reason"], outcome
    assert outcome["found"] == 1  # the index still answers
    assert result.stderr.count("no longer watched") == 1


# --- the server: metrics and settings ---------------------------------------------------------------------------


async def test_the_server_shows_the_index_on_metrics(start_server, tree: Path):
    server = await start_server(search_roots=(str(tree),))
    service = server.toolhost.search
    await until(service, lambda: built_and_watching(service), "the first build")
    text = server.toolhost.metrics.render().decode()
    assert f'toolhost_search_index_files{{root="{tree}"}} 4.0' in text
    assert f'toolhost_search_index_state{{root="{tree}",state="ready"}} 1.0' in text
    assert f'toolhost_search_index_state{{root="{tree}",state="building"}} 0.0' in text


async def test_without_search_roots_there_is_no_search_service(start_server):
    server = await start_server()
    assert server.toolhost.search is None
    assert "toolhost_search_index" not in server.toolhost.metrics.render().decode()


def test_search_settings_are_read_and_checked(tmp_path: Path):
    (tmp_path / "a" / "inner").mkdir(parents=True)
    (tmp_path / "b").mkdir()
    config = load_config(environ={"TOOLHOST_SEARCH_ROOTS": f"{tmp_path / 'a'}:{tmp_path / 'b'}/",
                                  "TOOLHOST_SEARCH_EXCLUDE": "*.bak,cache/",
                                  "TOOLHOST_SEARCH_INDEX_MAX_TEXT_BYTES": "4096",
                                  "TOOLHOST_SEARCH_RESCAN_SECONDS": "60"})
    assert config.search_roots == (str(tmp_path / "a"), str(tmp_path / "b"))
    assert config.search_exclude == ("*.bak", "cache/")
    assert (config.search_index_max_text_bytes, config.search_rescan_seconds) == (4096, 60.0)
    assert Config().search_exclude == DEFAULT_SEARCH_EXCLUDE and Config().search_roots == ()
    for bad, message in (("relative/dir", "must be an absolute directory"),
                         (str(tmp_path / "missing"), "not an existing directory"),
                         (f"{tmp_path / 'a'}:{tmp_path / 'a' / 'inner'}", "overlap")):
        with pytest.raises(ConfigError, match=message):
            load_config(environ={"TOOLHOST_SEARCH_ROOTS": bad})
    with pytest.raises(ConfigError, match="greater than 0"):
        load_config(environ={"TOOLHOST_SEARCH_RESCAN_SECONDS": "0"})


async def test_the_text_beyond_the_limit_is_not_searchable(tree: Path, tmp_path: Path):
    (tree / "long.txt").write_text("beginning " + "filler " * 100 + "ending\n")
    service = make_service(tree, tmp_path / "data", max_text_bytes=200, watch=False)
    await service.start()
    try:
        await until(service, lambda: service.status()[0].state == "ready", "the first build")
        assert paths_of(await service.search(["beginning"], str(tree), 10)) == [str(tree / "long.txt")]
        assert paths_of(await service.search(["ending"], str(tree), 10)) == []
    finally:
        await service.close()
