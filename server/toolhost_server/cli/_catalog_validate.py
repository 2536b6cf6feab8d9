"""`toolhost catalog validate`: check catalog directories offline with the server's own loader."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path

from ._errors import EXIT_FAILED, EXIT_OK
from ._output import plural


def _within(path: str, directories: Sequence[Path]) -> bool:
    candidate = Path(path)
    return any(candidate == d or candidate.is_relative_to(d) for d in directories)


def catalog_validate(args: argparse.Namespace) -> int:
    # Imported here: only this command needs the loader (and the runners and tool packs behind it).
    from ..catalog.loader import ToolLoader
    from ..runners import RunnerSettings

    # The loader logs what a server operator needs (built-in packs, names a later directory overrides);
    # this command reports the problems of the given directories itself.
    logging.getLogger("toolhost").setLevel(logging.CRITICAL)
    directories = [Path(d) for d in args.directories]
    loader = ToolLoader(directories, (), RunnerSettings(pipeline_target=args.pipeline_target))
    result = loader.load()
    problems = [p for p in result.problems if _within(p.file, directories)]
    for problem in problems:
        where = f"{problem.file}:{problem.line}" if problem.line else problem.file
        print(f"{where}: {problem.reason}")
    tools = result.tools or {}
    good = sum(1 for tool in tools.values() if _within(tool.spec.origin, directories))
    summary = f"{plural(good, 'tool')} OK"
    print(f"{summary}, {plural(len(problems), 'problem')}" if problems else summary)
    return EXIT_FAILED if problems else EXIT_OK
