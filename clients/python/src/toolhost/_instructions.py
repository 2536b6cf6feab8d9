"""The instructions block of GetInstructions, as the clients return it."""

from __future__ import annotations

from dataclasses import dataclass

from .v1 import tool_service_pb2


@dataclass(frozen=True)
class Instructions:
    """The Markdown to put in an agent's system prompt, and the names of the tools it describes, sorted."""

    markdown: str
    tool_names: tuple[str, ...]

    @classmethod
    def from_proto(cls, message: tool_service_pb2.GetInstructionsResponse) -> Instructions:
        return cls(message.markdown, tuple(message.tool_names))
