"""`toolhost tools search "QUERY"`: the tools for a need in words (SearchTools), as a table or JSON; for a
phrase one of a tool's intents answers, the `toolhost call` line that does it."""

from __future__ import annotations

import argparse
import sys

from toolhost import Client

from ._client_commands import _example_command
from ._errors import EXIT_OK
from ._output import format_table, json_text, one_line, summary_width
from ._terminal_text import TerminalText


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= 50:
        raise argparse.ArgumentTypeError("must be from 1 to 50")
    return value


def add_tools_search_parser(tools_sub: argparse._SubParsersAction[argparse.ArgumentParser],
                            connection: argparse.ArgumentParser) -> None:
    parser = tools_sub.add_parser(
        "search", parents=[connection], help="find the tools for a need written in words",
        description="Find the tools for a need written in words, best first. When the query is a phrase one of "
                    "a tool's intents answers (\"check port 5432 on db.example.com\"), that tool comes first with "
                    "the `toolhost call` line that runs it; then the tools whose name, description and tags match "
                    "the words best.")
    parser.add_argument("query", help="what you need, in words (at most 1,000 characters)")
    parser.add_argument("--limit", type=_limit, default=0, help="how many results at most, 1 to 50 (default 10)")
    parser.add_argument("--platform", help="only tools for this platform, e.g. linux")
    parser.add_argument("--category", help="only tools in this category, e.g. network")
    parser.add_argument("--tag", action="append", help="only tools with this tag (repeatable: every tag)")
    parser.add_argument("--provider", help="the AI provider the results are for, e.g. claude_code")
    parser.add_argument("--json", action="store_true", help="print a JSON array of the results")
    parser.set_defaults(client_command=tools_search)


def tools_search(client: Client, args: argparse.Namespace) -> int:
    found = client.search_tools(args.query, limit=args.limit, platform=args.platform, category=args.category,
                                tags=args.tag or (), provider=args.provider)
    shown = TerminalText.for_stdout()
    if args.json:
        print(shown.json(json_text([result.to_dict() for result in found])))
        return EXIT_OK
    if not found.results:
        print("no tool matches: try other words, or fewer filters", file=sys.stderr)
        return EXIT_OK
    lines = []
    first = found.results[0]
    if first.arguments is not None:
        # The command goes first and whole: it is what the person asked for, and a table cell would cut it.
        # Arguments sorted: a Struct is a map, which keeps no order across the wire.
        command = _example_command(first.tool.name, dict(sorted(first.arguments.items())))
        lines += [shown(f"{first.tool.name} answers this request (intent {first.matched_intent!r}):"),
                  "  " + shown(command), ""]
    rows = [[shown(r.tool.name), "intent" if r.arguments is not None else f"{r.score:.3g}", shown(r.tool.category),
             shown(one_line(r.tool.description))] for r in found]
    # As `tools list`: one line per tool, cut to fit; a narrow terminal loses CATEGORY before the description.
    lines += format_table(["NAME", "SCORE", "CATEGORY", "DESCRIPTION"], rows, summary_width(), optional=(2,))
    print("\n".join(lines))
    return EXIT_OK
