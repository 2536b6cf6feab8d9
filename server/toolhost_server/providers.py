"""The AI providers a tool list and its instructions are written for, and what each is not offered.

A CLI provider (Claude Code, Codex) runs an agent that has tools of its own and calls toolhost's through the
`toolhost` command; an API provider (Anthropic, OpenAI, an OpenAI-compatible server) calls every tool natively.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .errors import InvalidRequestError

NATIVE_PREFIX = "native:"
# The tools both CLI agents have themselves, named as the conflicts table names them (PocketDev's seeded pairs).
_CLI_NATIVE_TOOLS = frozenset(f"{NATIVE_PREFIX}{name}" for name in ("Bash", "Read", "Edit", "Glob", "Grep"))
# The file tools' category: a CLI agent edits files with its own.
_CLI_EXCLUDED_CATEGORIES = frozenset({"file_ops"})


@dataclass(frozen=True, slots=True)
class Provider:
    """One provider's rules: whether it is a CLI agent, its own tools, and the categories it is not offered."""

    name: str
    cli: bool
    native_tools: frozenset[str] = frozenset()
    excluded_categories: frozenset[str] = frozenset()

    def hidden_tools(self, natives_equivalent: Mapping[str, frozenset[str]]) -> frozenset[str]:
        """The tools `equivalent` to one of this provider's own (ToolConflicts.natives_equivalent): it is not
        offered them, nor their aliases."""
        if not self.native_tools:
            return frozenset()
        return frozenset(name for name, natives in natives_equivalent.items() if natives & self.native_tools)


PROVIDERS: Mapping[str, Provider] = {
    provider.name: provider for provider in (
        Provider("claude_code", cli=True, native_tools=_CLI_NATIVE_TOOLS,
                 excluded_categories=_CLI_EXCLUDED_CATEGORIES),
        Provider("codex", cli=True, native_tools=_CLI_NATIVE_TOOLS, excluded_categories=_CLI_EXCLUDED_CATEGORIES),
        Provider("anthropic", cli=False),
        Provider("openai", cli=False),
        Provider("openai_compatible", cli=False),
    )
}


def provider_named(name: str) -> Provider:
    """The provider called `name`; InvalidRequestError listing the known ones for any other name."""
    provider = PROVIDERS.get(name)
    if provider is None:
        # At most 64 characters of it back: the message must not echo a megabyte of request.
        problem = f"unknown provider {name[:64]!r}" if name else "provider is required"
        raise InvalidRequestError(
            f"{problem}: use one of {', '.join(sorted(PROVIDERS))} (the CLI agents "
            f"{' and '.join(sorted(p.name for p in PROVIDERS.values() if p.cli))} call tools through the "
            "toolhost command; the others call them natively)")
    return provider
