"""`toolhost check`: run every tool's examples against a running server, or against catalog directories served
by a server started in this process, and print a table of how each fared; exit 1 when one failed.

Offline, the server is the real one (bundled tools, a temporary data directory, a gRPC listener on loopback
port 0, since tools such as route_inspector describe the listener), and the examples are called through the
same client as with --target, so both modes check what an agent would get.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import logging
import os
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from toolhost import Client, ErrorReason, ToolhostError, ToolInfo, UnauthenticatedError, UnavailableError

from ..check.cases import CheckCase, ExampleOf, Include, ToolExamples, check_cases
from ..check.expectations import CallOutcome
from ..check.rounds import CaseResult, run_rounds
from ..model import NO_DEFAULT, ExampleExpectation
from ._client_commands import run_client_command
from ._errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, UsageError, report_error
from ._output import format_table, json_text, one_line, plural, terminal_width, trim
from ._terminal_text import TerminalText


def add_check_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                     connection: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "check", parents=[connection], help="run every tool's examples and check what they give",
        description="Run every tool's examples, against the server at --target or, with --offline or "
                    "--catalog-dir, against a server started in this process on a temporary data directory. Each "
                    "example must succeed, or give what its `expect:` says; `check: skip` leaves one out, and so "
                    "does a tool annotated open_world or destructive unless --include names it. An example whose "
                    "call failed runs again after the others, while they still pass: it may need what another "
                    "tool's example makes. Exit status 1 when an example or a catalog file failed.")
    parser.add_argument("--offline", action="store_true",
                        help="check the bundled tools and catalog in a server started here, not at --target")
    parser.add_argument("--catalog-dir", dest="catalog_dirs", action="append", metavar="DIR",
                        help="check the tools of this catalog directory offline (repeatable); its bad files fail "
                             "the check")
    parser.add_argument("--include", type=_include_kinds, action="append", default=[], metavar="KINDS",
                        help="also run the examples of tools annotated so: open_world, destructive, or both "
                             "comma-separated")
    parser.add_argument("--tool", dest="tools", action="append", metavar="NAME",
                        help="only this tool's examples (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the results as one JSON object")
    parser.add_argument("--pipeline-target", default=os.environ.get("TOOLHOST_PIPELINE_TARGET", ""),
                        help="offline: the pipeline toolhost `source: pipeline` tools run on "
                             "[TOOLHOST_PIPELINE_TARGET]")
    parser.add_argument("--python-entrypoint-modules",
                        default=os.environ.get("TOOLHOST_PYTHON_ENTRYPOINT_MODULES", ""),
                        help="offline: module prefixes catalog files may name Python entrypoints in, "
                             "comma-separated, as on the server [TOOLHOST_PYTHON_ENTRYPOINT_MODULES]")
    parser.set_defaults(offline_command=check)


def _include_kinds(text: str) -> frozenset[Include]:
    kinds = set()
    for word in (w.strip() for w in text.split(",")):
        try:
            kinds.add(Include(word.replace("-", "_")))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{word!r} is no kind of tool check leaves out; use open_world, destructive or both, "
                "comma-separated") from None
    return frozenset(kinds)


def check(args: argparse.Namespace) -> int:
    include = frozenset(kind for kinds in args.include for kind in kinds)
    if args.offline or args.catalog_dirs:
        return _check_offline(args, include)
    return run_client_command(functools.partial(_check_server, include=include, within=(), problems=()), args)


# --- offline: a server of our own --------------------------------------------------------------------------


def _check_offline(args: argparse.Namespace, include: frozenset[Include]) -> int:
    # Imported here: only offline checks need the server.
    from ..api.server import GrpcServer, create_toolhost
    from ..catalog.entrypoints import EntrypointPolicy, EntrypointSettingError
    from ..config import Config

    modules = tuple(m.strip() for m in args.python_entrypoint_modules.split(",") if m.strip())
    try:
        EntrypointPolicy.from_setting(modules)
    except EntrypointSettingError as exc:
        print(f"toolhost: {exc}", file=sys.stderr)
        return EXIT_USAGE
    # The server's own log lines would bury the table; catalog problems are reported with it instead.
    logging.getLogger("toolhost").setLevel(logging.CRITICAL)
    directories = tuple(Path(d) for d in args.catalog_dirs or ())

    async def serve_and_check(data_dir: str) -> int:
        # The defaults of `toolhost serve`, not this machine's TOOLHOST_* settings: a check in CI must give
        # the same answer as on a laptop. Loopback port 0, no HTTP listener, no file watching.
        config = dataclasses.replace(
            Config(), grpc_address="127.0.0.1:0", http_address="", data_dir=data_dir, watch_catalog=False,
            catalog_dirs=tuple(str(d) for d in directories), pipeline_target=args.pipeline_target,
            python_entrypoint_modules=modules)
        toolhost = create_toolhost(config)
        try:
            report = await toolhost.start()
            server = GrpcServer(toolhost)
            port = await server.start()
            try:
                problems = [(p.file, p.line, p.reason) for p in report.problems
                            if not directories or _within(p.file, directories)]
                with Client(f"127.0.0.1:{port}", timeout=args.timeout) as client:
                    return await asyncio.to_thread(_check_server, client, args, include=include,
                                                   within=directories, problems=problems)
            finally:
                await server.stop(0)
        finally:
            await toolhost.close()

    with tempfile.TemporaryDirectory(prefix="toolhost-check-") as data_dir:
        try:
            return asyncio.run(serve_and_check(data_dir))
        except UsageError as exc:
            print(TerminalText.for_stderr()(f"toolhost: {exc}"), file=sys.stderr)
            return EXIT_USAGE
        except ToolhostError as exc:
            return report_error(exc, "the server this check started")


def _within(path: str, directories: Sequence[Path]) -> bool:
    candidate = Path(path)
    return any(candidate == d or candidate.is_relative_to(d) or candidate.is_relative_to(d.resolve())
               for d in directories)


# --- the check ---------------------------------------------------------------------------------------------


def _check_server(client: Client, args: argparse.Namespace, *, include: frozenset[Include],
                  within: Sequence[Path], problems: Sequence[tuple[str, int, str]]) -> int:
    """Check the tools `client` lists (only those defined under `within`, when given); `problems` are the
    catalog files' problems (file, line, reason), each a failure too."""
    tools = list(client.list_tools(view="full"))
    if within:
        tools = [tool for tool in tools if _within(tool.origin, within)]
    if args.tools:
        unknown = sorted(set(args.tools) - {tool.name for tool in tools})
        if unknown:
            raise UsageError(f"no tool named {', '.join(unknown)} is checked here (`toolhost tools list` lists the "
                             "served tools; --catalog-dir checks only the tools of its directories)")
        tools = [tool for tool in tools if tool.name in args.tools]
    cases = check_cases((_tool_examples(tool) for tool in tools), include)
    results = run_rounds(cases, functools.partial(_call, client))
    without_examples = [tool.name for tool in tools if not tool.examples]
    if args.json:
        print(TerminalText.for_stdout().json(json_text(_json_report(results, problems, without_examples))))
    else:
        print("\n".join(_text_report(results, problems, without_examples)))
    failed = any(result.problems for result in results)
    return EXIT_FAILED if failed or problems else EXIT_OK


def _tool_examples(tool: ToolInfo) -> ToolExamples:
    examples = []
    for example in tool.examples:
        expect = example.expect
        examples.append(ExampleOf(example.description, example.arguments, ExampleExpectation(
            success=expect.success, output_contains=expect.output_contains,
            structured_subset=expect.structured_subset if expect.has_structured_subset else NO_DEFAULT),
            example.skip_check))
    return ToolExamples(tool.name, examples, tool.annotations.open_world, tool.annotations.destructive)


def _call(client: Client, case: CheckCase) -> CallOutcome:
    try:
        result = client.call_tool(case.tool, dict(case.arguments))
    except (UnavailableError, UnauthenticatedError) as exc:
        if exc.reason in (ErrorReason.STORE_UNAVAILABLE, ErrorReason.STORE_OUTCOME_UNKNOWN):
            return _refused(exc)
        raise  # the server is gone or will not have us: no other example can pass either
    except ToolhostError as exc:
        return _refused(exc)
    has_structured = result.raw.HasField("structured_output")
    return CallOutcome(
        success=result.success, output=result.output,
        structured_output=result.structured_output if has_structured else NO_DEFAULT,
        error_code=result.error.code if result.error is not None else "",
        error_message=result.error.message if result.error is not None else "")


def _refused(exc: ToolhostError) -> CallOutcome:
    return CallOutcome(success=False, error_code=exc.code.name, error_message=exc.message, refused=True)


# --- the report --------------------------------------------------------------------------------------------

_STATUS_WORDS = {"passed": "ok", "failed": "FAIL", "skipped": "skip"}
# The example's description is cut to this: the detail beside it is what matters.
_EXAMPLE_COLUMN = 40


def _detail(result: CaseResult) -> str:
    if result.outcome is None:
        return result.case.skip_reason
    if result.problems:
        return "; ".join(result.problems)
    return f"passed in round {result.round}" if result.round > 1 else ""


def _text_report(results: Sequence[CaseResult], problems: Sequence[tuple[str, int, str]],
                 without_examples: Sequence[str]) -> list[str]:
    # Tool names, descriptions, outputs and catalog problems were written by others: escaped on a terminal.
    shown = TerminalText.for_stdout()
    lines = [shown(f"{file}:{line}: {reason}" if line else f"{file}: {reason}") for file, line, reason in problems]
    rows = [[shown(r.case.tool), shown(trim(f"#{r.case.number} {one_line(r.case.description)}".rstrip(),
                                            _EXAMPLE_COLUMN)),
             _STATUS_WORDS[r.status], shown(one_line(_detail(r)))] for r in results]
    if rows:
        # Wrapped on a terminal, never cut: a failure's reason is what the reader came for. Into a file or a CI
        # log each example stays one line.
        lines += format_table(["TOOL", "EXAMPLE", "RESULT", "DETAIL"], rows, terminal_width(), wrap=True)
    counts = {status: sum(1 for r in results if r.status == status) for status in _STATUS_WORDS}
    summary = f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"
    if problems:
        summary += f", {plural(len(problems), 'catalog problem')}"
    if without_examples:
        summary += f"; {plural(len(without_examples), 'tool')} without examples"
    return [*lines, summary]


def _json_report(results: Iterable[CaseResult], problems: Sequence[tuple[str, int, str]],
                 without_examples: Sequence[str]) -> dict[str, Any]:
    items = []
    for r in results:
        item: dict[str, Any] = {
            "tool": r.case.tool, "example": r.case.number, "description": r.case.description,
            "arguments": dict(r.case.arguments), "status": r.status, "problems": list(r.problems),
        }
        if r.outcome is None:
            item["skip_reason"] = r.case.skip_reason
        else:
            error = {"code": r.outcome.error_code, "message": r.outcome.error_message, "refused": r.outcome.refused}
            item.update(round=r.round, duration_ms=round(r.duration_ms, 3),
                        error=None if r.outcome.success else error)
        items.append(item)
    statuses = [item["status"] for item in items]
    return {
        "passed": statuses.count("passed"), "failed": statuses.count("failed"),
        "skipped": statuses.count("skipped"), "results": items,
        "catalog_problems": [{"file": f, "line": line, "reason": reason} for f, line, reason in problems],
        "tools_without_examples": list(without_examples),
    }
