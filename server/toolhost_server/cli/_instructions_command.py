"""`toolhost instructions --provider P`: print the block to put in an agent's system prompt (GetInstructions)."""

from __future__ import annotations

import argparse
import sys

from toolhost import Client

from ._errors import EXIT_OK
from ._terminal_text import TerminalText


def add_instructions_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                            connection: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "instructions", parents=[connection], help="print the tool instructions for an agent's system prompt",
        description="Print, in Markdown, what an agent of PROVIDER needs to use the tools it is offered and you may "
                    "see: for a CLI agent (claude_code, codex) how to run them with `toolhost call` and each tool's "
                    "instructions and parameters; for an API provider (anthropic, openai, openai_compatible) the "
                    "tools' system prompts only.")
    parser.add_argument("--provider", required=True,
                        help="the agent's provider: claude_code, codex, anthropic, openai or openai_compatible")
    parser.set_defaults(client_command=instructions)


def instructions(client: Client, args: argparse.Namespace) -> int:
    block = client.get_instructions(args.provider)
    # As the server wrote it, byte for byte, into a file or a pipe: it is meant to be pasted into a prompt, or
    # compared. On a terminal its tools' texts (written by whoever manages tools) are escaped.
    sys.stdout.write(TerminalText.for_stdout()(block.markdown))
    return EXIT_OK
