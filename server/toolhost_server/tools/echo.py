"""The echo tool: returns its input, for checking that the whole path from client to tool works."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..model import Annotations, Example, Intent, Parameter
from .base import Tool, ToolContext


class Echo(Tool):
    name = "echo"
    display_name = "Echo"
    description = "Returns the given text unchanged. Use it to check that tool calls work end to end."
    category = "utility"
    tags = ("utility", "diagnostics")
    parameters = (Parameter("text", "string", "The text to return.", required=True),)
    examples = (Example("Echo a greeting", {"text": "hello"}),)
    annotations = Annotations(read_only=True, idempotent=True)
    # The AI Tool Catalog's chat phrases: "ping" alone answers "pong" (a host after it is shell_ping's).
    intents = (Intent(r"ping[.!]?", {"text": "pong"}), r"please echo this back exactly:\s*(?P<text>.+)")

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> str:
        return str(arguments["text"])
