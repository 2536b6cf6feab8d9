"""The entry point: parse the command line, run the chosen command, and turn the outcome into an exit status."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from ._client_commands import ClientCommand, run_client_command
from ._errors import EXIT_FAILED
from ._parser import build_parser
from ._serve import run_serve


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "serve":
            return run_serve(args)
        client_command: ClientCommand | None = getattr(args, "client_command", None)
        if client_command is not None:
            return run_client_command(client_command, args)
        offline_command: Callable[[argparse.Namespace], int] = args.offline_command
        return offline_command(args)
    except BrokenPipeError:
        # The reader went away (`toolhost tools list | head`): stop quietly, and keep Python's exit-time
        # flush of stdout from failing again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130
