"""The commands that talk to a running server: tools list, tools get, call and reload.

Tool descriptions, outputs and failure messages were written by others: on a terminal they are shown with their
control characters escaped (_terminal_text); into a pipe or a file they go as they are.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
import textwrap
from collections.abc import Callable, Mapping
from typing import Any

from toolhost import CallProgress, Client, OutputChunk, ToolhostError, ToolInfo, ToolResult

from ._arguments import call_arguments
from ._connection_options import client_security
from ._errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, UsageError, report_error
from ._output import format_reload, format_table, json_text, one_line, summary_width
from ._terminal_text import ShownStream, TerminalText

ClientCommand = Callable[[Client, argparse.Namespace], int]


def run_client_command(command: ClientCommand, args: argparse.Namespace) -> int:
    target: str = args.target
    try:
        try:
            client = Client(target, timeout=args.timeout, **client_security(args))
        except ValueError as exc:  # TLS and token options that do not fit together, or a token in plaintext
            raise UsageError(str(exc)) from None
        with client:
            return command(client, args)
    except UsageError as exc:
        print(TerminalText.for_stderr()(f"toolhost: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    except ToolhostError as exc:
        return report_error(exc, target)


# --- tools list / tools get -------------------------------------------------------------------------------


def tools_list(client: Client, args: argparse.Namespace) -> int:
    full = args.json or args.jsonl
    tools = client.list_tools(platform=args.platform, category=args.category, tags=args.tag or (),
                              provider=args.provider, view="full" if full else "basic")
    shown = TerminalText.for_stdout()
    if args.jsonl:
        for tool in tools:
            print(shown.json(json.dumps(tool.to_dict(), ensure_ascii=False)))
        return EXIT_OK
    if args.json:
        print(shown.json(json_text([tool.to_dict() for tool in tools])))
        return EXIT_OK
    rows = [[shown(t.name), shown(t.category), shown(t.platform), shown(t.source), shown(one_line(t.description))]
            for t in tools]
    if not rows:
        print("no tools match", file=sys.stderr)
        return EXIT_OK
    headers = ["NAME", "CATEGORY", "PLATFORM", "SOURCE", "DESCRIPTION"]
    # One line per tool, cut to fit: a whole description wraps into a wall of text. `tools get` and --json
    # have it whole. A narrow terminal loses SOURCE, then PLATFORM, before the description shrinks to nothing.
    print("\n".join(format_table(headers, rows, summary_width(), optional=(3, 2))))
    return EXIT_OK


def _parameter_rows(tool: ToolInfo) -> list[list[str]]:
    """NAME, TYPE, REQUIRED, DEFAULT, DESCRIPTION of each argument; from the input schema when the tool
    declares one instead of a parameter list. As the tool has them: the caller escapes them for a terminal."""
    rows = []
    for p in tool.parameters:
        description = one_line(p.description)
        if p.enum:
            description += f" (one of: {', '.join(json.dumps(v) for v in p.enum)})"
        default = json.dumps(p.default) if p.has_default else "-"
        rows.append([p.name, p.type, "yes" if p.required else "no", default, description])
    if rows or not tool.input_schema:
        return rows
    required = set(tool.input_schema.get("required", []))
    for name, schema in tool.input_schema.get("properties", {}).items():
        schema = schema if isinstance(schema, dict) else {}
        kind = schema.get("type", "any")
        default = json.dumps(schema["default"]) if "default" in schema else "-"
        rows.append([name, kind if isinstance(kind, str) else "|".join(map(str, kind)),
                     "yes" if name in required else "no", default, one_line(str(schema.get("description", "")))])
    return rows


def _example_command(tool: str, arguments: Mapping[str, Any]) -> str:
    words = ["toolhost", "call", tool]
    for key, value in arguments.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        words.append(shlex.quote(f"{key}={text}"))
    return " ".join(words)


def tools_get(client: Client, args: argparse.Namespace) -> int:
    tool = client.get_tool(args.name)
    shown = TerminalText.for_stdout()
    if args.json:
        print(shown.json(json_text(tool.to_dict())))
        return EXIT_OK
    width = summary_width()
    lines = [shown(f"{tool.name} ({tool.display_name}), version {tool.version}")]
    lines += textwrap.wrap(shown(tool.description), width=max(width - 2, 40), initial_indent="  ",
                           subsequent_indent="  ")
    hints = [name for name, on in dataclasses.asdict(tool.annotations).items() if on]
    facts = [
        ("category", tool.category),
        ("platform", tool.platform),
        ("source", f"{tool.source} ({tool.origin})" if tool.origin else tool.source),
        ("tags", ", ".join(tool.tags) or "-"),
        ("timeout", f"{tool.timeout:g}s" if tool.timeout is not None else "server default"),
        ("admin", "required" if tool.requires_admin else "not required"),
        ("annotations", ", ".join(hints) or "-"),
    ]
    lines.append("")
    lines += [f"  {label + ':':<13}{shown(value)}" for label, value in facts]
    rows = [[shown(cell) for cell in row] for row in _parameter_rows(tool)]
    lines += ["", "Parameters:"]
    if rows:
        # Wrapped, not cut: this is where a person reads what each parameter means.
        lines += format_table(["NAME", "TYPE", "REQUIRED", "DEFAULT", "DESCRIPTION"], rows, width, indent="  ",
                              wrap=True)
    else:
        lines.append("  none")
    if tool.examples:
        lines += ["", "Examples:"]
        for example in tool.examples:
            if example.description:
                lines.append(f"  {shown(example.description)}")
            lines.append(f"    {shown(_example_command(tool.name, example.arguments))}")
    print("\n".join(lines))
    return EXIT_OK


# --- call and reload --------------------------------------------------------------------------------------


def call(client: Client, args: argparse.Namespace) -> int:
    arguments = call_arguments(client, args)
    shape: dict[str, Any] = {"output_format": args.output_format, "filter_empty_fields": args.filter_empty}
    if args.stream:
        streamed = _follow(client, args.name, arguments, args.call_id, shape)
        if streamed is None:
            print("toolhost: the server ended the stream without a result; retry the call", file=sys.stderr)
            return EXIT_FAILED
        result = streamed
    else:
        result = client.call_tool(args.name, arguments, call_id=args.call_id, **shape)
        if result.stderr:
            stderr = TerminalText.for_stderr()(result.stderr)
            sys.stderr.write(stderr if stderr.endswith("\n") else stderr + "\n")
        output = _shown_output(result)
        if output:
            sys.stdout.write(output if output.endswith("\n") else output + "\n")
        sys.stdout.flush()
    return _call_status(result)


def _shown_output(result: ToolResult) -> str:
    """The result's output for stdout (its structured output as JSON when it has no text). On a terminal it is
    escaped the JSON way whatever the format: a tool's own text is often JSON too, and must still parse."""
    output = result.output
    if not output and result.structured_output is not None:
        output = json_text(result.structured_output)
    return TerminalText.for_stdout().json(output)


def _follow(client: Client, name: str, arguments: Mapping[str, Any], call_id: str | None,
            shape: Mapping[str, Any]) -> ToolResult | None:
    """Stream a call: output chunks to stdout and stderr as they come, progress lines to stderr. `shape` is the
    result's output format and filtering."""
    targets = {"stdout": sys.stdout, "stderr": sys.stderr}
    chunks = {"stdout": ShownStream(sys.stdout, json=True), "stderr": ShownStream(sys.stderr)}
    # What each stream's chunks ended with; None while none came (a tool that is no process sends none).
    last_byte: dict[str, bytes | None] = {"stdout": None, "stderr": None}
    with client.stream_call(name, arguments, call_id=call_id, **shape) as stream:
        for event in stream:
            if isinstance(event, OutputChunk):
                chunks[event.stream].write(event.data)
                last_byte[event.stream] = event.data[-1:]
            elif isinstance(event, CallProgress):
                of = f"/{event.total:g}" if event.total is not None else ""
                line = f"toolhost: progress {event.progress:g}{of} {event.message}".rstrip()
                print(TerminalText.for_stderr()(line), file=sys.stderr)
            else:
                texts = {"stdout": _shown_output(event),
                         "stderr": TerminalText.for_stderr()(event.stderr)}
                for stream_name, target in targets.items():
                    chunks[stream_name].close()
                    ending = last_byte[stream_name]
                    text = texts[stream_name] if ending is None else ""
                    if text:
                        target.write(text)
                        ending = text[-1:].encode()
                    if ending not in (None, b"\n"):
                        target.write("\n")
                    target.flush()
                return event
    return None


def _call_status(result: ToolResult) -> int:
    if result.success:
        return EXIT_OK
    error = result.error
    code, message = (error.code, error.message) if error is not None else ("UNKNOWN", "the tool failed")
    exit_note = f" (exit code {result.exit_code})" if result.exit_code is not None else ""
    print(TerminalText.for_stderr()(f"toolhost: tool {result.tool} failed: {code}: {message}{exit_note}"),
          file=sys.stderr)
    return EXIT_FAILED


def reload(client: Client, args: argparse.Namespace) -> int:
    result = client.reload()
    shown = TerminalText.for_stdout()  # catalog files' problems quote what their authors wrote
    print("\n".join(shown(line) for line in format_reload(result)))
    return EXIT_OK if result.success else EXIT_FAILED
