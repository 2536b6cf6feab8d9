"""How the command fails: its exit statuses, the usage error argparse cannot catch, and a person's view of a
gRPC error. A server's message may quote what others wrote (a tool's name, a catalog's text): on a terminal its
control characters are shown escaped (_terminal_text)."""

from __future__ import annotations

import sys

from toolhost import (
    ErrorReason,
    InvalidArgumentError,
    NotFoundError,
    ToolhostError,
    UnauthenticatedError,
    UnavailableError,
)

from ..errors import unknown_tool_sentence
from ._output import one_line
from ._terminal_text import TerminalText

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3


class UsageError(Exception):
    """The command line is wrong in a way argparse cannot see (a key=value that does not fit its type)."""


def report_error(exc: ToolhostError, target: str) -> int:
    """Print one gRPC error for a person and return the exit status it means."""
    shown = TerminalText.for_stderr()

    def say(text: str) -> None:
        print(shown(text), file=sys.stderr)

    if isinstance(exc, UnavailableError) and exc.reason in (ErrorReason.STORE_UNAVAILABLE,
                                                            ErrorReason.STORE_OUTCOME_UNKNOWN):
        # The server answered: only its database is out of reach. Its message says whether to retry.
        say(f"toolhost: {exc.code.name}: {exc.message}")
        return EXIT_FAILED
    if isinstance(exc, UnavailableError):
        if exc.reason == ErrorReason.SHUTTING_DOWN:
            say(f"toolhost: the server at {target} is shutting down: {exc.message}")
        else:
            say(f"toolhost: cannot reach a toolhost server at {target} (is `toolhost serve` running? "
                f"--target or TOOLHOST_TARGET picks another): {one_line(exc.message)}")
        return EXIT_UNREACHABLE
    if isinstance(exc, UnauthenticatedError):
        say(f"toolhost: {exc.code.name}: {exc.message} (--token-file or TOOLHOST_TOKEN_FILE sends a token, "
            "--tls-cert and --tls-key a client certificate)")
        return EXIT_FAILED
    if exc.reason == ErrorReason.TOOL_NOT_FOUND and {"tool", "suggestions"} <= exc.metadata.keys():
        # The server's sentence, but pointing at this command instead of the ListTools RPC.
        suggestions = [name for name in exc.metadata["suggestions"].split(",") if name]
        say(f"toolhost: {exc.code.name}: {unknown_tool_sentence(exc.metadata['tool'], suggestions)} "
            "`toolhost tools list` lists every tool available to you.")
    elif exc.field_violations:
        # The server's message lists the same problems in one line; one per line reads better.
        say(f"toolhost: {exc.code.name}: the arguments do not fit the tool (`toolhost tools get` shows its "
            "parameters):")
    else:
        say(f"toolhost: {exc.code.name}: {exc.message}")
    for violation in exc.field_violations:
        say(f"  {violation.field or '/'}: {violation.description}")
    if isinstance(exc, (InvalidArgumentError, NotFoundError)):
        return EXIT_USAGE
    return EXIT_FAILED
