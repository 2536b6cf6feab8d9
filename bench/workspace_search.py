"""The workspace search tools over a generated tree, each against the bare work in the same run, interleaved.

  grep_50k_files   the grep tool (files_with_matches, a token in 20 files), its Tool class invoked in-process as
                   the pipeline does (sanitizer, Landlock ruleset, rg --json, parsing), against `rg -l` run
                   directly on the same tree. Target: within 1.5x.
  glob_50k_files   the glob tool (`**/*.py`, newest 1000 of ~25,000 matches) against a plain recursive os.scandir
                   walk by path that collects the same files with their mtimes and keeps the newest 1000. Target:
                   within 2x.

    .venv/bin/python -m bench.workspace_search [--quick]      (from the repository root)

The tree has 50,000 files (5,000 in quick mode) of about 1 KiB in 50 x 20 directories. Both sides run on a warm
page cache (a warm-up run each first), so the figures compare the tools' own costs, not the disk's.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import os
import random
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import Figure, Target, interleave_async, run_standalone
from toolhost_server.tools.base import ToolContext, ToolOutput, ToolServices
from toolhost_server.tools.workspace_search import GlobTool, GrepTool
from toolhost_server.workspaces import Workspace
from toolhost_server.workspaces.workspace_set import WorkspaceSet

COMMAND = ".venv/bin/python -m bench.workspace_search"
TOKEN = "zebracorn_4f1d"
WORDS = ("alpha", "beta", "gamma", "delta", "return", "value", "import", "class", "def", "self", "data", "None")


@dataclass(frozen=True)
class Plan:
    files: int
    rounds: int


FULL = Plan(files=50_000, rounds=9)
QUICK = Plan(files=5_000, rounds=3)


def make_tree(root: Path, files: int) -> None:
    """`files` files of about 1 KiB in 50 x 20 directories, half .py, half .txt; TOKEN in 20 of them."""
    rng = random.Random(18)
    holders = set(rng.sample(range(files), 20))
    now = time.time()
    for index in range(files):
        directory = root / f"pkg{index % 50:02}" / f"mod{(index // 50) % 20:02}"
        if index < 1000:
            directory.mkdir(parents=True, exist_ok=True)
        words = [rng.choice(WORDS) for _ in range(160)]
        if index in holders:
            words[rng.randrange(len(words))] = TOKEN
        lines = [" ".join(words[i:i + 8]) for i in range(0, len(words), 8)]
        path = directory / f"f{index:05}{'.py' if index % 2 else '.txt'}"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (now - index, now - index))


def tool_runner(root: Path) -> Callable[[type[GrepTool] | type[GlobTool], dict[str, Any]], Awaitable[ToolOutput]]:
    services = ToolServices(workspaces=WorkspaceSet((Workspace("bench", str(root)),), None))
    logger = logging.getLogger("bench.workspace_search")

    async def invoke(tool: type[GrepTool] | type[GlobTool], arguments: dict[str, Any]) -> ToolOutput:
        context = ToolContext("bench", tool.name, 120.0, logger, services=services)
        output = await tool().run(arguments, context)
        assert isinstance(output, ToolOutput)
        return output

    return invoke


async def seconds(action: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await action()
    return time.perf_counter() - started


def scandir_newest(root: str, suffix: str, limit: int) -> list[str]:
    """The baseline walk: os.scandir by path, no symlink followed, the newest `limit` files ending in `suffix`."""
    found: list[tuple[int, str]] = []
    pending = [root]
    while pending:
        directory = pending.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                elif entry.name.endswith(suffix) and entry.is_file(follow_symlinks=False):
                    found.append((entry.stat(follow_symlinks=False).st_mtime_ns, entry.path))
    return [path for _, path in heapq.nlargest(limit, found)]


async def measure(plan: Plan, root: Path) -> list[Figure]:
    invoke = tool_runner(root)
    rg = shutil.which("rg")
    assert rg is not None, "the bench needs ripgrep"
    grep_arguments = {"pattern": TOKEN, "path": ".", "output_mode": "files_with_matches", "case_insensitive": False,
                      "context": 0, "no_ignore": False, "limit": 100}

    async def grep_tool() -> None:
        output = await invoke(GrepTool, grep_arguments)
        assert len(output.structured["files"]) == 20, output.structured

    async def grep_direct() -> None:
        process = await asyncio.create_subprocess_exec(
            rg, "--no-config", "-l", "-e", TOKEN, "--", ".", cwd=root, stdout=asyncio.subprocess.PIPE)
        stdout, _ = await process.communicate()
        assert len(stdout.splitlines()) == 20

    async def glob_tool() -> None:
        output = await invoke(GlobTool, {"pattern": "**/*.py", "path": "."})
        assert len(output.structured["files"]) == 1000 and output.structured["matched"] == plan.files // 2

    async def glob_direct() -> None:
        assert len(await asyncio.to_thread(scandir_newest, str(root), ".py", 1000)) == 1000

    for action in (grep_tool, grep_direct, glob_tool, glob_direct):  # warm the page cache and the code paths
        await action()
    grep_measured, grep_baseline = await interleave_async(plan.rounds, lambda: seconds(grep_tool),
                                                          lambda: seconds(grep_direct))
    glob_measured, glob_baseline = await interleave_async(plan.rounds, lambda: seconds(glob_tool),
                                                          lambda: seconds(glob_direct))
    size = f"{plan.files:,}-file tree"
    return [
        Figure.from_rounds(
            key="grep_50k_files", title=f"grep tool over a {size}", unit="ms",
            measured=[s * 1e3 for s in grep_measured], baseline=[s * 1e3 for s in grep_baseline],
            baseline_name="rg --no-config -l run directly", target=Target.ratio_at_most(1.5), command=COMMAND,
            note=(f"files_with_matches for a token in 20 files, the tool invoked in-process (sanitizer, Landlock "
                  f"ruleset, rg --json, parsing); {plan.rounds} interleaved rounds, warm page cache")),
        Figure.from_rounds(
            key="glob_50k_files", title=f"glob tool over a {size}", unit="ms",
            measured=[s * 1e3 for s in glob_measured], baseline=[s * 1e3 for s in glob_baseline],
            baseline_name="recursive os.scandir walk by path, newest 1000", target=Target.ratio_at_most(2.0),
            command=COMMAND,
            note=(f"**/*.py, {plan.files // 2:,} matches, the newest 1000 returned; both in a worker thread; "
                  f"{plan.rounds} interleaved rounds, warm page cache")),
    ]


def run(quick: bool) -> list[Figure]:
    plan = QUICK if quick else FULL
    root = Path(tempfile.mkdtemp(prefix="toolhost-bench-search-"))
    try:
        make_tree(root, plan.files)
        return asyncio.run(measure(plan, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    run_standalone("workspace_search", run, __doc__)
