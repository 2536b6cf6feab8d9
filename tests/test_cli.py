"""The `toolhost` command run as a real subprocess: client commands against a server, and offline validation.

The client commands talk to the fixture's server, which runs on the test's event loop; the CLI therefore runs
through asyncio.create_subprocess_exec so that the loop keeps serving while it waits.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import pty
import shutil
import socket
import struct
import sys
import termios
from pathlib import Path

import pytest

from helpers.auth import Tokens, auth_file_text, write_catalog
from helpers.catalogs import write_tool
from helpers.cli import Run, cli_env, toolhost, toolhost_offline
from helpers.servers import RunningServer, ServerFactory, ServerProcess

TOOLS = {
    "nap": ("Sleeps for `delay` seconds.", "nap", "[{name: delay, type: number, required: true}]"),
    "parse_json": ("Parses JSON text.", "parse_json", "[{name: s, type: string, required: true}]"),
    "to_text": ("Writes an integer as text.", "to_text", "[{name: object, type: integer, required: true}]"),
}
# Several hundred characters, as real tools describe themselves; its parameter's description is long too.
LONG_DESCRIPTION = " ".join(f"Sentence {i} of a description that goes on and on." for i in range(1, 9)) + " The end."
LONG_TOOL = f"""\
name: long_winded
description: {LONG_DESCRIPTION}
runner: {{type: python, entrypoint: 'toolhost_server.tools.samples:to_text'}}
parameters:
  - {{name: object, type: string, description: "{LONG_DESCRIPTION}"}}
"""
TYPED_TOOL = """\
name: typed
description: Shows the types of its arguments.
category: testing
runner: {type: python, entrypoint: 'toolhost_server.tools.samples:return_arguments'}
parameters:
  - {name: count, type: integer, required: true}
  - {name: ratio, type: number}
  - {name: verbose, type: boolean}
  - {name: items, type: array}
  - {name: options, type: object}
  - {name: label, type: string}
"""


@pytest.fixture
async def server(start_server: ServerFactory, tmp_path: Path) -> RunningServer:
    catalog = tmp_path / "catalog"
    write_tool(catalog, "greet_someone")
    write_tool(catalog, "typed", TYPED_TOOL)
    write_tool(catalog, "long_winded", LONG_TOOL)
    write_tool(catalog, "chatty", (
        "name: chatty\ndescription: Writes to both streams.\n"
        "runner: {type: script, script: \"#!/bin/sh\\necho out one\\necho err one >&2\\nprintf 'out two'\\n\"}\n"))
    for name, (description, function, parameters) in TOOLS.items():
        write_tool(catalog, name, (
            f"name: {name}\ndescription: {description}\n"
            f"runner: {{type: python, entrypoint: 'toolhost_server.tools.samples:{function}'}}\n"
            f"parameters: {parameters}\n"))
    return await start_server(catalog_dirs=[catalog])


# --- tools list / get -------------------------------------------------------------------------------------


async def test_tools_list_prints_an_aligned_table(server):
    run = await toolhost("--target", server.target, "tools", "list", env=cli_env(COLUMNS="200"))
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert lines[0].split() == ["NAME", "CATEGORY", "PLATFORM", "SOURCE", "DESCRIPTION"]
    echo = next(line for line in lines if line.startswith("echo "))
    assert echo.split()[:4] == ["echo", "utility", "cross-platform", "builtin"]
    assert echo.index("Returns the given") == lines[0].index("DESCRIPTION")
    assert any(line.split()[:4] == ["typed", "testing", "cross-platform", "catalog"] for line in lines)


def squeezed(text: str) -> str:
    """`text` without whitespace: wrapped text compared with the text it wraps."""
    return "".join(text.split())


def without_columns(**extra: str) -> dict[str, str]:
    env = cli_env(**extra)
    env.pop("COLUMNS", None)
    return env


def assert_one_cut_line_per_tool(out: str, width: int) -> None:
    """Every line fits in `width`, each tool is one line, and the long description is cut with an ellipsis."""
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= width, out
    assert [line.split()[0] for line in lines[1:]] == sorted(line.split()[0] for line in lines[1:])
    assert sum(line.startswith("long_winded ") for line in lines) == 1
    cut = next(line for line in lines if line.startswith("long_winded "))
    # One short of the width where the cut falls just after a space, which is not kept before the ellipsis.
    assert len(cut) in (width - 1, width) and cut.endswith("\N{HORIZONTAL ELLIPSIS}"), cut


@pytest.mark.parametrize("columns", [60, 200])
async def test_tools_list_cuts_each_line_to_columns(server, columns):
    run = await toolhost("tools", "list", env=cli_env(TOOLHOST_TARGET=server.target, COLUMNS=str(columns)))
    assert run.code == 0, run.err
    assert_one_cut_line_per_tool(run.out, columns)
    tools = json.loads((await toolhost("tools", "list", "--target", server.target, "--json")).out)
    assert len(run.out.splitlines()) == 1 + len(tools)
    lines = run.out.splitlines()
    cut = next(line for line in lines if line.startswith("long_winded "))
    start = cut.rindex("  ") + 2  # the description follows the last gap between columns (the header may be cut)
    assert LONG_DESCRIPTION.startswith(cut[start:-1])
    if columns == 200:  # a description that fits is not cut
        assert next(line for line in lines if line.startswith("nap ")).endswith("Sleeps for `delay` seconds.")


async def test_a_narrow_table_drops_source_then_platform_before_the_description_shrinks(server):
    """Long tool names (memory_structure_create) would leave a description a few letters wide at 80 columns:
    SOURCE, then PLATFORM, make way first."""
    full = ["NAME", "CATEGORY", "PLATFORM", "SOURCE", "DESCRIPTION"]
    without_source, without_both = full[:3] + full[4:], full[:2] + full[4:]
    for columns in (200, 80, 60):
        run = await toolhost("tools", "list", env=cli_env(TOOLHOST_TARGET=server.target, COLUMNS=str(columns)))
        header = run.out.splitlines()[0]
        shown = header.split()
        assert shown in (full, without_source, without_both), shown
        if shown != without_both:  # a column goes only while the description would get fewer than 24
            assert columns - header.index("DESCRIPTION") >= 24, header
        if columns == 200:
            assert shown == full
        if columns == 60:
            assert shown == without_both


async def test_tools_list_into_a_pipe_fits_80_columns_without_a_terminal(server):
    run = await toolhost("tools", "list", env=without_columns(TOOLHOST_TARGET=server.target))
    assert run.code == 0, run.err
    assert_one_cut_line_per_tool(run.out, 80)


async def test_tools_list_into_a_pipe_fits_the_terminal_that_stderr_shows(server):
    # `toolhost tools list | less`: stdout is a pipe, but the lines end up on the terminal stderr writes to.
    leader, follower = pty.openpty()
    try:
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 70, 0, 0))
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "toolhost_server.cli", "tools", "list",
            env=without_columns(TOOLHOST_TARGET=server.target), stdout=asyncio.subprocess.PIPE, stderr=follower)
        out, _ = await asyncio.wait_for(process.communicate(), 60)
    finally:
        os.close(follower)
        os.close(leader)
    assert process.returncode == 0
    assert_one_cut_line_per_tool(out.decode(), 70)


async def test_json_and_tools_get_keep_the_whole_description(server):
    env = cli_env(TOOLHOST_TARGET=server.target, COLUMNS="60")
    for form in ("--json", "--jsonl"):
        run = await toolhost("tools", "list", form, env=env)
        assert run.code == 0, run.err
        listed = json.loads(run.out) if form == "--json" else [json.loads(line) for line in run.out.splitlines()]
        [tool] = [t for t in listed if t["name"] == "long_winded"]
        assert tool["description"] == LONG_DESCRIPTION
        assert tool["parameters"][0]["description"] == LONG_DESCRIPTION

    run = await toolhost("tools", "get", "long_winded", env=env)
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    described = lines[1:lines.index("")]
    assert squeezed(" ".join(described)) == squeezed(LONG_DESCRIPTION)
    assert all(len(line) <= 60 for line in described)
    # The parameter's description is wrapped under its column, whole, not cut.
    parameters = lines[lines.index("Parameters:") + 2:]
    assert squeezed(" ".join(parameters)) == squeezed(f"object string no - {LONG_DESCRIPTION}")
    assert "\N{HORIZONTAL ELLIPSIS}" not in run.out

    run = await toolhost("tools", "get", "long_winded", "--json", env=env)
    assert json.loads(run.out)["description"] == LONG_DESCRIPTION


async def test_tools_list_filters_and_prints_json(server):
    run = await toolhost("tools", "list", "--target", server.target, "--category", "testing", "--json")
    assert run.code == 0, run.err
    tools = json.loads(run.out)
    assert [t["name"] for t in tools] == ["typed"]
    assert tools[0]["input_schema"]["properties"]["count"]["type"] == "integer"
    assert tools[0]["source"] == "catalog"

    run = await toolhost("tools", "list", "--target", server.target, "--tag", "utility", "--jsonl")
    assert run.code == 0, run.err
    lines = [json.loads(line) for line in run.out.splitlines()]
    assert "echo" in [t["name"] for t in lines] and all("utility" in t["tags"] for t in lines)
    assert all(t["input_schema"] is not None for t in lines)


async def test_tools_get_describes_parameters_annotations_and_examples(server):
    run = await toolhost("--target", server.target, "tools", "get", "echo")
    assert run.code == 0, run.err
    assert run.out.startswith("echo (Echo), version ")
    assert "Returns the given text unchanged." in run.out
    assert "annotations: read_only, idempotent" in run.out
    parameter = next(line for line in run.out.splitlines() if line.strip().startswith("text "))
    assert parameter.split()[:4] == ["text", "string", "yes", "-"]
    assert "toolhost call echo text=hello" in run.out

    run = await toolhost("--target", server.target, "tools", "get", "typed", "--json")
    assert run.code == 0, run.err
    tool = json.loads(run.out)
    assert tool["name"] == "typed" and [p["name"] for p in tool["parameters"]][:2] == ["count", "ratio"]


LIST_HINT = "`toolhost tools list` lists every tool available to you."


async def test_tools_get_of_an_unknown_tool_exits_2_with_a_suggestion(server):
    run = await toolhost("--target", server.target, "tools", "get", "ecko")
    assert run.code == 2
    assert run.err == f"toolhost: NOT_FOUND: no tool named 'ecko'; did you mean 'echo'? {LIST_HINT}\n"


@pytest.mark.parametrize("arguments", [[], ["text=hi"]])  # CallTool, and GetTool to type the argument first
async def test_call_of_an_unknown_tool_says_so_in_sentences(server, arguments):
    run = await toolhost("--target", server.target, "call", "ecoh", *arguments)
    assert (run.code, run.out) == (2, "")
    assert run.err == f"toolhost: NOT_FOUND: no tool named 'ecoh'; did you mean 'echo'? {LIST_HINT}\n"
    run = await toolhost("--target", server.target, "call", "nosuch", *arguments)
    assert run.err == f"toolhost: NOT_FOUND: no tool named 'nosuch'. {LIST_HINT}\n"
    run = await toolhost("--target", server.target, "call", "to_txt", *arguments)
    assert run.err == f"toolhost: NOT_FOUND: no tool named 'to_txt'; did you mean 'to_text'? {LIST_HINT}\n"


async def test_an_empty_tool_name_is_a_usage_error(server):
    run = await toolhost("--target", server.target, "tools", "get", "")
    assert run.code == 2
    assert run.err.startswith("toolhost: INVALID_ARGUMENT: name is required"), run.err


async def test_the_cli_never_suggests_a_hidden_tool(start_server, tmp_path):
    tokens = Tokens.generate()
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text(auth_file_text(tokens))
    server = await start_server(catalog_dirs=[write_catalog(tmp_path / "catalog")], auth_file=auth_file)

    async def get(token: str, name: str) -> Run:
        token_file = tmp_path / "token"
        token_file.write_text(token)
        return await toolhost("--target", server.target, "--token-file", str(token_file), "tools", "get", name)

    # The admin sees secret_tool, so the name is close enough to suggest; the agent does not see it.
    assert "did you mean 'secret_tool'" in (await get(tokens.admin, "secret_tol")).err  # (or 'search_tools')
    run = await get(tokens.agent, "secret_tol")
    assert run.code == 2
    assert run.err == f"toolhost: NOT_FOUND: no tool named 'secret_tol'. {LIST_HINT}\n"


# --- call -------------------------------------------------------------------------------------------------


async def test_call_echo_prints_the_output(server):
    run = await toolhost("--target", server.target, "call", "echo", "text=hi")
    assert (run.code, run.out) == (0, "hi\n"), run.err


async def test_call_types_values_by_the_tools_parameters(server):
    run = await toolhost("--target", server.target, "call", "typed", "count=12345678901234567890123",
                         "ratio=0.5", "verbose=yes", "items=[1, \"a\"]", 'options={"k": null}', "label=42")
    assert run.code == 0, run.err
    assert json.loads(run.out) == {"count": 12345678901234567890123, "ratio": 0.5, "verbose": True,
                                   "items": [1, "a"], "options": {"k": None}, "label": "42"}


async def test_call_prints_the_format_asked_for_without_empty_fields(server):
    arguments = ("count=3", 'options={"k": null, "kept": ""}', "items=[]", "label=x")
    run = await toolhost("--target", server.target, "call", "--format", "pretty", "--filter-empty", "typed",
                         *arguments)
    assert (run.code, run.out) == (0, '{\n  "count": 3,\n  "label": "x"\n}\n'), run.err
    run = await toolhost("--target", server.target, "call", "--stream", "--format", "json", "typed", *arguments)
    assert (run.code, run.out) == (0, '{"count":3,"items":[],"label":"x","options":{"k":null,"kept":""}}\n'), run.err
    run = await toolhost("--target", server.target, "call", "--format", "yaml", "typed", "count=3")
    assert run.code == 2 and "invalid choice: 'yaml'" in run.err


async def test_call_takes_json_arguments(server):
    run = await toolhost("--target", server.target, "call", "to_text", "--json", '{"object": 12345678901234567890}')
    assert (run.code, run.out) == (0, "12345678901234567890\n"), run.err


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["typed"], "/count"),
        (["typed", "count=1", "extra=x"], "/extra"),
        (["typed", "count=many"], "count must be an integer"),
        (["typed", "count=1", "verbose=maybe"], "verbose must be true or false"),
        (["typed", "count=1", "items={"], "items must be a JSON array"),
        (["typed", "count"], "'count' is not key=value"),
        (["echo", "--json", "[1]"], "--json must be a JSON object"),
    ],
)
async def test_call_with_bad_arguments_exits_2_and_names_the_field(server, arguments, expected):
    run = await toolhost("--target", server.target, "call", *arguments)
    assert run.code == 2, (run.out, run.err)
    assert expected in run.err
    assert "Traceback" not in run.err


async def test_call_stream_prints_both_streams_as_they_come(server):
    run = await toolhost("--target", server.target, "call", "--stream", "chatty")
    assert (run.code, run.out, run.err) == (0, "out one\nout two\n", "err one\n")
    run = await toolhost("--target", server.target, "call", "--stream", "to_text", "object=7")
    assert (run.code, run.out) == (0, "7\n"), run.err


async def test_call_of_a_failing_tool_exits_1_with_the_error_code(server):
    run = await toolhost("--target", server.target, "call", "parse_json", "s=not json")
    assert run.code == 1
    assert "tool parse_json failed: TOOL_EXCEPTION: tool 'parse_json' failed with an unexpected error" in run.err


async def test_call_past_the_timeout_exits_1_with_deadline_exceeded(server):
    run = await toolhost("--target", server.target, "--timeout", "0.3", "call", "nap", "delay=5")
    assert run.code == 1
    assert "DEADLINE_EXCEEDED" in run.err


# --- reload -----------------------------------------------------------------------------------------------


async def test_reload_prints_a_summary_and_exits_1_when_it_fails(server, tmp_path):
    catalog = tmp_path / "catalog"
    write_tool(catalog, "fresh")
    (catalog / "greet_someone.yaml").unlink()
    write_tool(catalog, "typo", "name: typo\ndescription: Typo.\ntimeout_second: 5\n")
    run = await toolhost("--target", server.target, "reload")
    assert run.code == 0, run.err
    assert run.out.startswith("reloaded: generation 2, ")
    assert "  added:   fresh" in run.out and "  removed: greet_someone" in run.out
    assert f"{catalog / 'typo.yaml'}:3: unknown key 'timeout_second'" in run.out

    shutil.rmtree(catalog)
    run = await toolhost("--target", server.target, "reload")
    assert run.code == 1
    assert run.out.startswith("reload failed: generation 2 ")
    assert f"{catalog}: catalog directory does not exist" in run.out


# --- catalog validate (offline) ---------------------------------------------------------------------------


def test_catalog_validate_reports_every_bad_file_with_its_line(tmp_path):
    write_tool(tmp_path, "good")
    syntax = write_tool(tmp_path / "nested", "syntax", "name: syntax\ndescription: Broken.\ntags: [a, b\n"
                                                       "category: x\n")
    typo = write_tool(tmp_path, "typo", "name: typo\ndescription: Typo.\nversion: '1'\ntimeout_second: 5\n")
    run = toolhost_offline("catalog", "validate", str(tmp_path))
    assert run.code == 1
    assert run.out.splitlines() == [
        f"{syntax}:4: YAML syntax error: did not find expected ',' or ']'",
        f"{typo}:4: unknown key 'timeout_second'; did you mean 'timeout_seconds'?",
        "1 tool OK, 2 problems",
    ]


def test_catalog_validate_of_good_directories_exits_0(tmp_path):
    for name in ("one", "two"):
        write_tool(tmp_path / "a", name)
    write_tool(tmp_path / "b", "three")
    run = toolhost_offline("catalog", "validate", str(tmp_path / "a"), str(tmp_path / "b"))
    assert (run.code, run.out) == (0, "3 tools OK\n"), run.err


def test_catalog_validate_of_a_missing_directory_fails(tmp_path):
    run = toolhost_offline("catalog", "validate", str(tmp_path / "absent"))
    assert run.code == 1
    assert f"{tmp_path / 'absent'}: catalog directory does not exist" in run.out


# --- connection problems and usage ------------------------------------------------------------------------


async def test_an_unreachable_server_exits_3_with_one_clean_line():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        target = f"127.0.0.1:{sock.getsockname()[1]}"
    for command in (["tools", "list"], ["call", "echo", "text=hi"], ["reload"]):
        run = await toolhost(*command, env=cli_env(TOOLHOST_TARGET=target))
        assert run.code == 3, (command, run.err)
        assert run.err.startswith(f"toolhost: cannot reach a toolhost server at {target}")
        assert len(run.err.strip().splitlines()) == 1 and "Traceback" not in run.err


async def test_usage_errors_exit_2():
    assert (await toolhost()).code == 2
    assert (await toolhost("tools")).code == 2
    assert (await toolhost("--timeout", "-1", "reload")).code == 2


@pytest.mark.server
async def test_client_commands_work_against_a_toolhost_serve_process(tmp_path):
    write_tool(tmp_path, "served_tool")
    process = ServerProcess("--catalog-dir", str(tmp_path), "--watch-catalog", "false")
    try:
        await process.start()
        run = await toolhost("--target", process.target, "call", "served_tool", "name=Ada")
        assert (run.code, run.out) == (0, "Hello, Ada.\n"), run.err
    finally:
        await process.stop()
