"""Attacks on the file search index: symlinks out of a root (at the build, through the watcher, swapped in for a
directory), FTS5 query syntax smuggled in words, hostile names and contents, and files the server may not read.
Real files, real SQLite, real inotify; waits are on the index's own events."""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from toolhost_server.config import DEFAULT_SEARCH_EXCLUDE
from toolhost_server.sanitize import LearningRedactor, Redactor
from toolhost_server.search.index_store import FILE_NAME
from toolhost_server.search.service import SearchAnswer, SearchService

from helpers.waiting import within


def make_service(root: Path, data: Path, **overrides: object) -> SearchService:
    settings: dict[str, object] = {
        "data_dir": data, "exclude": DEFAULT_SEARCH_EXCLUDE, "max_text_bytes": 1024 * 1024,
        "rescan_seconds": 3600.0, "redactor": LearningRedactor(Redactor()), "debounce_ms": 20}
    settings.update(overrides)
    return SearchService([str(root)], **settings)  # type: ignore[arg-type]


async def until(service: SearchService, condition: Callable[[], bool], what: str) -> None:
    async def wait() -> None:
        generation = service.generation
        while not condition():
            generation = await service.changed(generation)
    await within(wait(), what)


async def until_answer(service: SearchService, ask: Callable[[], Awaitable[SearchAnswer]],
                       check: Callable[[list[str]], bool], what: str) -> list[str]:
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


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A root, and an outside directory full of a word that must never be found."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "inside").mkdir(parents=True)
    (outside / "deeper").mkdir(parents=True)
    (outside / "secret.txt").write_text("outsider confidential\n")
    (outside / "deeper" / "more.txt").write_text("outsider deeper\n")
    (root / "inside" / "plain.txt").write_text("insider words\n")
    (root / "dir_link").symlink_to(outside)
    (root / "file_link.txt").symlink_to(outside / "secret.txt")
    (root / "inside" / "relative_link").symlink_to("../../outside")
    return root, outside


@pytest.fixture
async def watched(layout: tuple[Path, Path], tmp_path: Path) -> AsyncIterator[SearchService]:
    service = make_service(layout[0], tmp_path / "data")
    await service.start()
    await until(service, lambda: all(s.state == "ready" and s.watching for s in service.status()), "the build")
    yield service
    await service.close()


async def test_symlinks_out_of_the_root_are_never_followed_by_the_build(watched: SearchService,
                                                                         layout: tuple[Path, Path]):
    root, _ = layout
    assert paths_of(await watched.search(["outsider"], str(root), 100)) == []
    assert paths_of(await watched.search(["confidential"], str(root), 100)) == []
    assert paths_of(await watched.search(["insider"], str(root), 100)) == [str(root / "inside" / "plain.txt")]
    assert watched.status()[0].files == 1  # the links themselves are not indexed either
    recent = paths_of(await watched.recent(str(root), datetime(2000, 1, 1, tzinfo=UTC), 100))
    assert recent == [str(root / "inside" / "plain.txt")]


async def test_symlinks_made_after_the_build_are_not_followed_by_the_watcher(watched: SearchService,
                                                                              layout: tuple[Path, Path]):
    root, outside = layout
    (root / "inside" / "late_link").symlink_to(outside)
    (root / "inside" / "late_file.txt").symlink_to(outside / "secret.txt")
    (outside / "deeper" / "new.txt").write_text("outsider fresh\n")  # written through nothing of ours
    # A later change inside proves the watcher applied the batches before it.
    (root / "inside" / "marker.txt").write_text("checkpoint\n")
    await until_answer(watched, lambda: watched.search(["checkpoint"], str(root), 10), lambda p: len(p) == 1,
                       "the marker file indexed")
    assert paths_of(await watched.search(["outsider"], str(root), 100)) == []


async def test_a_directory_swapped_for_a_symlink_out_is_forgotten_not_followed(watched: SearchService,
                                                                                layout: tuple[Path, Path]):
    root, outside = layout
    shutil.rmtree(root / "inside")
    (root / "inside").symlink_to(outside)
    await until(watched, lambda: watched.status()[0].files == 0, "the swapped directory's files forgotten")
    assert paths_of(await watched.search(["outsider"], str(root), 100)) == []
    assert paths_of(await watched.search(["insider"], str(root), 100)) == []


async def test_answers_never_follow_a_directory_swapped_for_a_symlink_between_index_and_answer(
        layout: tuple[Path, Path], tmp_path: Path):
    root, outside = layout
    service = make_service(root, tmp_path / "data", watch=False)
    await service.start()
    try:
        await until(service, lambda: service.status()[0].state == "ready", "the build")
        # The same relative path now exists through a symlink out: the answer must not count it as there.
        (outside / "plain.txt").write_text("insider words\n")
        shutil.rmtree(root / "inside")
        (root / "inside").symlink_to(outside)
        assert paths_of(await service.search(["insider"], str(root), 100)) == []
    finally:
        await service.close()


async def test_the_fallback_walk_never_follows_symlinks_out(layout: tuple[Path, Path], tmp_path: Path):
    root, _ = layout
    service = make_service(root, tmp_path / "data")  # not started: questions walk
    answer = await service.search(["outsider"], str(root), 100)
    assert (paths_of(answer), answer.partial) == ([], False)
    assert paths_of(await service.search(["insider"], str(root), 100)) == [str(root / "inside" / "plain.txt")]


@pytest.mark.parametrize("words", [
    ['"'], ['"alpha" OR "zzz"'], ["alpha", "OR", "zzz"], ["NEAR(alpha", "zzz)"], ["text:alpha"],
    ["name:alpha"], ["{name}:alpha"], ["^alpha", "zzz"], ["alpha*", "zzz"], ["NOT", "zzz"], ["alpha", "-zzz"],
    ["(alpha)", "AND", "zzz"], ["alpha\x00zzz"], ["'; DROP TABLE files; --"], ["alpha +zzz"],
])
async def test_fts_syntax_in_words_is_data(watched: SearchService, layout: tuple[Path, Path], words: list[str]):
    root, _ = layout
    (root / "inside" / "alpha.txt").write_text("alpha beta\n")
    await until_answer(watched, lambda: watched.search(["alpha"], str(root), 10), lambda p: len(p) == 1,
                       "the alpha file indexed")
    # Read as syntax, each query would match alpha.txt (or fail); read as words, each holds a word the file lacks.
    answer = await watched.search(words, str(root), 10)
    assert paths_of(answer) == [], words
    assert paths_of(await watched.search(['alpha"'], str(root), 10)) == [str(root / "inside" / "alpha.txt")]
    assert paths_of(await watched.search(["alpha"], str(root), 10)) == [str(root / "inside" / "alpha.txt")]


async def test_hostile_names_and_contents_are_indexed_as_data(layout: tuple[Path, Path], tmp_path: Path):
    root, _ = layout
    hostile = root / "hostile"
    hostile.mkdir()
    (hostile / "name with ' quote and \" dq; DROP TABLE files.txt").write_text("rhubarb\n")
    (hostile / "\u202eevil\u202dtxt.exe").write_text("rhubarb bidi\n")
    os.mkfifo(hostile / "fifo.txt")  # never opened: the build would hang on it
    (hostile / os.fsdecode(b"bad\xffname.txt")).write_text("rhubarb undecodable\n")
    (hostile / "huge_line.txt").write_text("rhubarb " + "x" * (2 * 1024 * 1024) + "\n")
    (hostile / "binary.bin").write_bytes(b"rhubarb\x00" * 100)
    deep = hostile
    for _ in range(140):  # deeper than the walk enters
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / "bottom.txt").write_text("rhubarb at the bottom\n")
    service = make_service(root, tmp_path / "data", max_text_bytes=4096)
    await service.start()
    try:
        await until(service, lambda: service.status()[0].state == "ready", "the build")
        found = sorted(Path(p).name for p in paths_of(await service.search(["rhubarb"], str(root), 100)))
        assert found == sorted(["name with ' quote and \" dq; DROP TABLE files.txt", "\u202eevil\u202dtxt.exe",
                                "huge_line.txt"])
        others = paths_of(await service.by_kind("other", str(root), 100))
        assert str(hostile / "binary.bin") in others and not any("fifo" in path for path in others)
    finally:
        await service.close()
    assert os.path.getsize(tmp_path / "data" / FILE_NAME) < 1024 * 1024  # the 2 MiB line was cut at 4 KiB


def _answers_as_nobody(root: Path, data: Path) -> dict[str, list[object]]:
    """A service over `root` built and asked in a forked child that first becomes nobody (root reads every
    file whatever its mode)."""
    nobody = pwd.getpwnam("nobody")
    reading, writing = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no pytest machinery from here on, only os._exit
        status = 1
        try:
            os.close(reading)
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            os.write(writing, json.dumps(asyncio.run(_build_and_ask(root, data))).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(writing)
    with os.fdopen(reading, "rb") as answer:
        text = answer.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return json.loads(text)  # type: ignore[no-any-return]


async def _build_and_ask(root: Path, data: Path) -> dict[str, list[object]]:
    service = SearchService([str(root)], data_dir=data, exclude=(), max_text_bytes=4096, rescan_seconds=3600,
                            redactor=LearningRedactor(Redactor()), watch=False)
    await service.start()
    generation = 0
    while service.status()[0].state == "building":
        generation = await service.changed(generation)
    answers = {"by_word": paths_of(await service.search(["hidden"], str(root), 10)),
               "by_name": paths_of(await service.search(["locked"], str(root), 10)),
               "pdfs": [[r.path, r.size] for r in (await service.by_kind("pdf", str(root), 10)).results]}
    await service.close()
    return answers  # type: ignore[return-value]


def test_unreadable_files_are_indexed_by_metadata_only():
    if os.geteuid() != 0:
        pytest.skip("needs root to become another user")
    base = Path(tempfile.mkdtemp(prefix="toolhost-search-"))
    try:
        base.chmod(0o755)
        root = base / "root"
        root.mkdir()
        (root / "locked.pdf").write_text("hidden words\n")
        (root / "locked.pdf").chmod(0)
        (root / "open.txt").write_text("nothing here\n")
        data = base / "data"
        data.mkdir()
        nobody = pwd.getpwnam("nobody")
        os.chown(data, nobody.pw_uid, nobody.pw_gid)
        outcome = _answers_as_nobody(root, data)
        assert outcome["by_word"] == []  # its content was never read
        assert outcome["by_name"] == [str(root / "locked.pdf")]
        assert outcome["pdfs"] == [[str(root / "locked.pdf"), len("hidden words\n")]]  # kind from the name
    finally:
        shutil.rmtree(base)
