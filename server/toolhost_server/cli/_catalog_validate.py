"""`toolhost catalog validate`: check catalog directories offline with the server's own loader."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ._errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from ._output import plural
from ._terminal_text import TerminalText

if TYPE_CHECKING:
    from ..model import ToolSpec


def _within(path: str, directories: Sequence[Path]) -> bool:
    candidate = Path(path)
    return any(candidate == d or candidate.is_relative_to(d) for d in directories)


def catalog_validate(args: argparse.Namespace) -> int:
    # Imported here: only this command needs the loader (and the runners and tool packs behind it).
    from ..catalog.entrypoints import EntrypointPolicy, EntrypointSettingError
    from ..catalog.loader import ToolLoader
    from ..runners import RunnerSettings

    # The loader logs what a server operator needs (built-in packs, names a later directory overrides);
    # this command reports the problems of the given directories itself.
    logging.getLogger("toolhost").setLevel(logging.CRITICAL)
    modules = [m.strip() for m in args.python_entrypoint_modules.split(",") if m.strip()]
    try:
        entrypoints = EntrypointPolicy.from_setting(modules)
    except EntrypointSettingError as exc:
        print(f"toolhost: {exc}", file=sys.stderr)
        return EXIT_USAGE
    directories = [Path(d) for d in args.directories]
    loader = ToolLoader(directories, (), RunnerSettings(pipeline_target=args.pipeline_target), entrypoints)
    result = loader.load()
    problems = [p for p in result.problems if _within(p.file, directories)]
    # File names and problems quote the catalog's own text: escaped on a terminal.
    shown = TerminalText.for_stdout()
    for problem in problems:
        where = f"{problem.file}:{problem.line}" if problem.line else problem.file
        print(shown(f"{where}: {problem.reason}"))
    tools = [tool for tool in (result.tools or {}).values() if _within(tool.spec.origin, directories)]
    warnings = _print_warnings(tool.spec for tool in tools)
    summary = f"{plural(len(tools), 'tool')} OK"
    if problems:
        summary += f", {plural(len(problems), 'problem')}"
    if warnings:
        summary += f", {plural(warnings, 'warning')}"
    print(summary)
    return EXIT_FAILED if problems else EXIT_OK


def _print_warnings(specs: Iterable[ToolSpec]) -> int:
    """Print what the loader would warn about (an argv that passes a parameter to inline code); how many."""
    from ..catalog.inline_code import inline_code_warnings
    from ..catalog.strict_yaml import line_of

    count = 0
    for spec in sorted(specs, key=lambda s: s.origin):
        for warning in inline_code_warnings(spec.runner):
            try:
                line = line_of(Path(spec.origin).read_text("utf-8"), warning.path)
            except (OSError, UnicodeDecodeError):
                line = 0  # changed or gone since the load: the file is still worth naming
            where = f"{spec.origin}:{line}" if line else spec.origin
            print(TerminalText.for_stdout()(f"{where}: warning: tool {spec.name!r}: {warning.message}"))
            count += 1
    return count
