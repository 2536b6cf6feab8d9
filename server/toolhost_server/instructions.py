"""The instructions block for an agent's system prompt (PocketDev's "System Prompt Injection"), in Markdown.

A CLI agent (Claude Code, Codex) runs toolhost's tools with the `toolhost` command through its own shell tool,
so its block says how, then describes each tool; an API provider is given the tools natively, so its block holds
only the tools' system prompts. The same tools always give the same text: tools in name order, parameters in
their declared order (or the input schema's properties in name order), nothing that depends on time or place.

A block has a byte budget (a user tool's system prompt alone may be 64 KB, and GetInstructions answers in one
message): the tools whose instructions would not fit are listed by name only, under a line that says how many
were left out and how to read them; were even their names too many, the last line says how many are not named.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .model import ToolSource, ToolSpec
from .providers import Provider

# The most bytes of Markdown a block holds, whatever the server's message limit.
MAX_INSTRUCTIONS_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Instructions:
    """The Markdown block, and the names of the tools it describes (in full or by name only), sorted."""

    markdown: str
    tool_names: tuple[str, ...]


def instructions_budget(max_message_bytes: int) -> int:
    """The byte budget of a block sent in messages of at most `max_message_bytes`: MAX_INSTRUCTIONS_BYTES, or a
    quarter of the limit when that is less (the tool names travel beside the Markdown)."""
    return min(MAX_INSTRUCTIONS_BYTES, max_message_bytes // 4)


def write_instructions(provider: Provider, tools: Iterable[ToolSpec],
                       max_bytes: int = MAX_INSTRUCTIONS_BYTES) -> Instructions:
    """The block for `provider` about `tools` (those ListTools with that provider shows the caller), in at most
    `max_bytes` of UTF-8 (or only its fixed lines, should `max_bytes` be smaller than they are)."""
    specs = sorted(tools, key=lambda spec: spec.name)
    if provider.cli:
        if not specs:
            return Instructions("\n".join([_CLI_HEADER, "No tools are offered to you at the moment.\n"]), ())
        system = [_Entry(_SYSTEM_HEADING, spec.name, spec, _cli_tool) for spec in specs
                  if spec.source is not ToolSource.USER]
        custom = [_Entry(_CUSTOM_HEADING, spec.name, spec, _cli_tool) for spec in specs
                  if spec.source is ToolSource.USER]
        return _fitted(_CLI_HEADER, [*system, *custom], max_bytes, _CLI_LEFT_OUT)
    prompted = [_Entry("", spec.name, spec, _api_tool) for spec in specs if spec.system_prompt.strip()]
    if not prompted:
        return Instructions("", ())
    return _fitted(_API_HEADER, prompted, max_bytes, _API_LEFT_OUT)


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


_SYSTEM_HEADING = "## System Tools\n\nBuilt into toolhost or defined in its catalog.\n"
_CUSTOM_HEADING = "## Custom Tools\n\nCreated on this server while it runs.\n"
_CLI_LEFT_OUT = ("## More Tools\n\n{count} instructions left out, to keep this block small; call "
                 "`toolhost tools get NAME` for one's description and parameters:\n")
_API_LEFT_OUT = ("## More Tools\n\n{count} instructions left out, to keep this block small; their "
                 "descriptions say how to use them:\n")
_UNNAMED = "- and {count} more, not named here: `toolhost tools list` lists every tool.\n"
# Room kept for the line that counts the tools left out (its count filled in), and for the one that counts
# those not even named.
_LEFT_OUT_BYTES = max(len(_CLI_LEFT_OUT), len(_API_LEFT_OUT)) + 32
_UNNAMED_BYTES = len(_UNNAMED) + 32


@dataclass(frozen=True, slots=True)
class _Entry:
    """A tool of a block: the heading of its group ("" for none), its name, and how its section is written."""

    heading: str
    name: str
    spec: ToolSpec
    write: Callable[[ToolSpec], str]


def _size(part: str) -> int:
    """The bytes `part` adds to a block after the header: its UTF-8 and the newline that joins it on."""
    return len(part.encode("utf-8")) + 1


def _fitted(header: str, entries: Sequence[_Entry], max_bytes: int, left_out: str) -> Instructions:
    """`header` and every entry's section, when they fit in `max_bytes`. Otherwise the sections in order while
    they fit with room kept for the names of the rest, then the rest by name (as many as fit) under
    `left_out`."""
    # Written one by one, and only until the budget is spent: a section may be hundreds of kilobytes.
    sections: list[tuple[str, str]] = []  # (the heading that opens a new group, or ""; the section)
    total, heading = _size(header) - 1, ""
    for entry in entries:
        opens = entry.heading if entry.heading != heading else ""
        heading = entry.heading
        sections.append((opens, entry.write(entry.spec)))
        total += sum(_size(part) for part in sections[-1] if part)
        if total > max_bytes:
            return _cut(header, entries, sections, max_bytes, left_out)
    parts = [header, *(part for pair in sections for part in pair if part)]
    return Instructions("\n".join(parts), tuple(sorted(entry.name for entry in entries)))


def _cut(header: str, entries: Sequence[_Entry], sections: Sequence[tuple[str, str]], max_bytes: int,
         left_out: str) -> Instructions:
    """The block of `_fitted` that does not fit whole; `sections` are those of the first entries, past the
    budget already."""
    name_lines = [f"- `{entry.name}`" for entry in entries]
    # names_after[i]: the bytes of the name lines of entries[i:], were they all left out.
    names_after = [0] * (len(entries) + 1)
    for index in range(len(entries) - 1, -1, -1):
        names_after[index] = names_after[index + 1] + _size(name_lines[index])
    parts, used = [header], _size(header) - 1
    described: list[str] = []
    for index, pair in enumerate(sections):
        cost = sum(_size(part) for part in pair if part)
        reserve = _LEFT_OUT_BYTES + min(names_after[index + 1], max_bytes) + _UNNAMED_BYTES
        if used + cost + reserve > max_bytes:
            break
        parts.extend(part for part in pair if part)
        used += cost
        described.append(entries[index].name)
    rest = len(entries) - len(described)
    parts.append(left_out.format(count=f"{rest} tool's" if rest == 1 else f"{rest} tools'"))
    used += _size(parts[-1])
    named = 0
    for index in range(len(described), len(entries)):
        reserve = _UNNAMED_BYTES if index + 1 < len(entries) else 0
        if used + _size(name_lines[index]) + reserve > max_bytes:
            break
        parts.append(name_lines[index])
        used += _size(name_lines[index])
        described.append(entries[index].name)
        named += 1
    if named < rest:
        parts.append(_UNNAMED.format(count=rest - named))
    else:
        parts[-1] += "\n"  # the block ends with a newline, as a section does
    return Instructions("\n".join(parts), tuple(sorted(described)))


def _cli_tool(spec: ToolSpec) -> str:
    lines = [f"### {spec.name}", "", _text_of(spec)]
    if spec.alias_of:
        lines += ["", f"Another name for `{spec.alias_of}`."]
    parameters = _parameter_lines(spec)
    lines += ["", "Parameters:", "", *parameters] if parameters else ["", "No parameters."]
    lines += ["", f"```bash\n{_example_call(spec)}\n```"]
    return "\n".join(lines) + "\n"


def _api_tool(spec: ToolSpec) -> str:
    return f"## {spec.name}\n\n{spec.system_prompt.strip()}\n"


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
