"""`toolhost logs`: the server's log records (its own, its log files, its logs table), and `-f` to follow them."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from datetime import datetime

from toolhost import Client, LogEntry, LogSummary

from ..logs.time_bounds import parse_time_bound
from ._errors import EXIT_OK, EXIT_USAGE
from ._terminal_text import TerminalText

_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _time_bound(text: str) -> datetime:
    try:
        return parse_time_bound(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _count(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 1000:
        raise argparse.ArgumentTypeError("must be a whole number from 1 to 1000")
    return int(text)


def add_logs_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "--lines", type=_count, default=100, metavar="N",
                        help="show the newest N matching records (1-1000; default 100)")
    parser.add_argument("-f", "--follow", action="store_true", help="then keep printing new records (TailLogs)")
    parser.add_argument("--level", type=str.upper, choices=_LEVELS, help="only this level and above")
    parser.add_argument("--since", type=_time_bound, metavar="TIME",
                        help="only records at or after TIME: ISO 8601 or an age (90s, 15m, 2h, 7d)")
    parser.add_argument("--until", type=_time_bound, metavar="TIME", help="only records at or before TIME")
    parser.add_argument("--grep", dest="text", metavar="TEXT", help="only records whose message contains TEXT "
                        "(any case)")
    parser.add_argument("--trace-id", help="only records of this trace (a call result's trace_id)")
    parser.add_argument("--source", choices=("memory", "file", "database"), help="only records from this reader")
    parser.add_argument("--json", action="store_true", help="print one JSON object per record")


def logs(client: Client, args: argparse.Namespace) -> int:
    if args.follow:
        if args.until is not None:
            print("toolhost: --until and --follow do not go together", file=sys.stderr)
            return EXIT_USAGE
        with client.tail_logs(level=args.level, since=args.since, text=args.text, trace_id=args.trace_id,
                              source=args.source, backlog=args.lines) as tail:
            _print(tail, args.json, flush=True)
        return EXIT_OK
    page = client.query_logs_page(level=args.level, since=args.since, until=args.until, text=args.text,
                                  trace_id=args.trace_id, source=args.source, page_size=args.lines)
    # The server answers newest first; a terminal reads best oldest first, like a log file.
    _print(reversed(page.records), args.json, flush=False)
    _report(page.summary)
    return EXIT_OK


def _print(entries: Iterable[LogEntry], as_json: bool, flush: bool) -> None:
    # Log messages quote what callers and tools sent: escaped on a terminal (_terminal_text).
    shown = TerminalText.for_stdout()
    for entry in entries:
        line = shown.json(json.dumps(entry.to_dict(), ensure_ascii=False)) if as_json else shown(format_entry(entry))
        print(line, flush=flush)


def format_entry(entry: LogEntry) -> str:
    """One record as a line (more lines for a multi-line message or a traceback)."""
    moment = entry.time.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    trace = f" trace_id={entry.trace_id}" if entry.trace_id else ""
    text = f"{moment} {entry.level:<8} {entry.logger}: {entry.message}{trace}"
    exception = entry.fields.get("exception")
    return f"{text}\n{exception}" if isinstance(exception, str) and exception else text


def _report(summary: LogSummary) -> None:
    shown = TerminalText.for_stderr()
    for source, reason in sorted(summary.unavailable.items()):
        print(shown(f"toolhost: the {source} log reader is unavailable: {reason}"), file=sys.stderr)
    for note in summary.notes:
        print(shown(f"toolhost: {note}"), file=sys.stderr)
