"""The instructions block for an agent's system prompt (PocketDev's "System Prompt Injection"), in Markdown.

A CLI agent (Claude Code, Codex) runs toolhost's tools with the `toolhost` command through its own shell tool,
so its block says how, then describes each tool; an API provider is given the tools natively, so its block holds
only the tools' system prompts. The same tools always give the same text: tools in name order, parameters in
their declared order (or the input schema's properties in name order), nothing that depends on time or place.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .model import ToolSource, ToolSpec
from .providers import Provider


@dataclass(frozen=True, slots=True)
class Instructions:
    """The Markdown block, and the names of the tools it describes, sorted."""

    markdown: str
    tool_names: tuple[str, ...]


def write_instructions(provider: Provider, tools: Iterable[ToolSpec]) -> Instructions:
    """The block for `provider` about `tools` (those ListTools with that provider shows the caller)."""
    specs = sorted(tools, key=lambda spec: spec.name)
    if provider.cli:
        return Instructions(_cli_block(specs), tuple(spec.name for spec in specs))
    prompted = [spec for spec in specs if spec.system_prompt.strip()]
    return Instructions(_api_block(prompted), tuple(spec.name for spec in prompted))


_CLI_HEADER = """\
# Toolhost Tools

These tools run on a toolhost server. Run them with the `toolhost` command, through your own shell tool.

## How to Invoke

```bash
toolhost call NAME key=value key=value ...
```

Each `key=value` is one argument. Integer, number and boolean values are parsed (`count=3`, `force=true`);
array and object values are JSON (`paths='["a.txt","b.txt"]'`); anything else is sent as a string. Quote a
value that holds spaces or shell characters. `--json '{"key": "value"}'` gives the arguments as one JSON object
instead, and `toolhost tools get NAME` describes a tool.

The command finds the server through its environment:

- `TOOLHOST_TARGET`: the server's address, host:port.
- `TOOLHOST_TOKEN_FILE`: the file holding the token the command sends, when the server requires one.
- `TOOLHOST_TLS_CA`: the certificate of the authority that signed the server's, when it uses TLS.

They are already set in your environment. Do not read, print or copy the token file: the command sends the
token itself.
"""

# A parameter without a default (None is a default: JSON null).
_NONE = object()

_API_HEADER = """\
# Toolhost Tool Instructions

How to use some of the tools you have been given, beyond their descriptions.
"""


def _cli_block(specs: Sequence[ToolSpec]) -> str:
    parts = [_CLI_HEADER]
    system = [spec for spec in specs if spec.source is not ToolSource.USER]
    custom = [spec for spec in specs if spec.source is ToolSource.USER]
    if system:
        parts.append("## System Tools\n\nBuilt into toolhost or defined in its catalog.\n")
        parts.extend(_cli_tool(spec) for spec in system)
    if custom:
        parts.append("## Custom Tools\n\nCreated on this server while it runs.\n")
        parts.extend(_cli_tool(spec) for spec in custom)
    if not specs:
        parts.append("No tools are offered to you at the moment.\n")
    return "\n".join(parts)


def _cli_tool(spec: ToolSpec) -> str:
    lines = [f"### {spec.name}", "", _text_of(spec)]
    if spec.alias_of:
        lines += ["", f"Another name for `{spec.alias_of}`."]
    parameters = _parameter_lines(spec)
    lines += ["", "Parameters:", "", *parameters] if parameters else ["", "No parameters."]
    lines += ["", f"```bash\n{_example_call(spec)}\n```"]
    return "\n".join(lines) + "\n"


def _api_block(specs: Sequence[ToolSpec]) -> str:
    if not specs:
        return ""
    parts = [_API_HEADER]
    parts.extend(f"## {spec.name}\n\n{spec.system_prompt.strip()}\n" for spec in specs)
    return "\n".join(parts)


def _text_of(spec: ToolSpec) -> str:
    """The tool's instructions: its system prompt, else its description."""
    return (spec.system_prompt.strip() or spec.description.strip()) or "No description."


def _parameter_lines(spec: ToolSpec) -> list[str]:
    if spec.parameters:
        return [_parameter_line(p.name, p.type, p.required, p.description, p.default if p.has_default else _NONE,
                                p.enum) for p in spec.parameters]
    properties = spec.input_schema.get("properties")
    if not isinstance(properties, Mapping):
        return []
    required = spec.input_schema.get("required")
    required_names = frozenset(n for n in required if isinstance(n, str)) if isinstance(required, list) else ()
    lines = []
    for name in sorted(properties):
        schema = properties[name] if isinstance(properties[name], Mapping) else {}
        enum = schema.get("enum")
        lines.append(_parameter_line(
            " ".join(str(name).split()), _type_of(schema), name in required_names, str(schema.get("description", "")),
            schema.get("default", _NONE), tuple(enum) if isinstance(enum, list) else ()))
    return lines


def _parameter_line(name: str, kind: str, required: bool, description: str, default: Any,
                    enum: Sequence[Any]) -> str:
    facts = [kind, "required" if required else "optional"]
    if default is not _NONE:
        facts.append(f"default {_json(default)}")
    line = f"- `{name}` ({', '.join(facts)})"
    text = " ".join(description.split())
    if enum:
        text = f"{text} One of: {', '.join(_json(v) for v in enum)}.".strip()
    return f"{line}: {text}" if text else line


def _type_of(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, str):
        return kind
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    return "any"


def _example_call(spec: ToolSpec) -> str:
    """`toolhost call NAME` with each required argument as key=<type>."""
    if spec.parameters:
        required = [(p.name, p.type) for p in spec.parameters if p.required]
    else:
        properties = spec.input_schema.get("properties")
        names = spec.input_schema.get("required")
        required = [(n, _type_of(properties.get(n, {}) if isinstance(properties, Mapping) else {}))
                    for n in sorted(names) if isinstance(n, str)] if isinstance(names, list) else []
    return " ".join(["toolhost call", spec.name, *(f"{name}=<{kind}>" for name, kind in required)])


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
