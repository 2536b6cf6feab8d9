"""`toolhost tools list`, `tools get`, `call`, `instructions`, `logs` and `catalog validate` print what others
wrote (a user tool's description, a tool's output, its failure message, a server's error, a log line, a catalog
file's name) to a person's terminal. Terminal escapes in it (clear the screen, set the title, OSC 52 writes the
clipboard, a C1 CSI, a carriage return that overwrites the line, a right-to-left override) must arrive as visible
escapes there, JSON must still parse, and a pipe must get every byte as it was. The commands run as real children
against a real server; their terminals are real pseudo-terminals."""

from __future__ import annotations

import json
import os
import pty
import tty
from pathlib import Path

import pytest

import toolhost
from toolhost_server.cli._terminal_text import ShownStream

from helpers.catalogs import write_tool
from helpers.cli import Run, cli_env
from helpers.cli import toolhost as toolhost_piped
from helpers.servers import RunningServer, ServerFactory, ServerProcess
from helpers.terminal import toolhost_on_terminals

HOSTILE = "\x1b[2J\x1b]0;owned\x07\x1b]52;c;ZXZpbA==\x07\x9b31m\rok\u202e"
ESCAPED = "\\x1b[2J\\x1b]0;owned\\x07\\x1b]52;c;ZXZpbA==\\x07\\x9b31m\\x0dok\\u202e"
# A call's output is escaped the JSON way, as visible, since it is often JSON that must still parse.
JSON_ESCAPED = "\\u001b[2J\\u001b]0;owned\\u0007\\u001b]52;c;ZXZpbA==\\u0007\\u009b31m\\u000dok\\u202e"
CONTROLS = ("\x1b", "\x07", "\x9b", "\r", "\u202e")
# Written by the scripts below as UTF-8 bytes (printf's octal escapes): what a process really sends.
HOSTILE_PRINTF = r"\033[2J\033]0;owned\007\033]52;c;ZXZpbA==\007\302\23331m\rok\342\200\256"


def assert_no_control(text: str) -> None:
    found = [control for control in CONTROLS if control in text]
    assert not found, (found, text)


@pytest.fixture
async def env(start_server: ServerFactory, tmp_path: Path) -> dict[str, str]:
    """A server with user tools whose description and output are hostile, and a catalog tool that returns its
    arguments as structured output; the environment that points `toolhost` at it."""
    catalog = tmp_path / "catalog"
    write_tool(catalog, "structured", "name: structured\ndescription: Returns its arguments.\n"
               "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:return_arguments'}\n"
               "input_schema: {type: object}\n")
    write_tool(catalog, "choosy", "name: choosy\ndescription: Takes one of two modes.\n"
               "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:return_arguments'}\n"
               "parameters: [{name: mode, type: string, enum: [a, b]}]\n")
    server: RunningServer = await start_server(catalog_dirs=[catalog], process_user="nobody")
    async with toolhost.AsyncClient(server.target, timeout=30) as client:
        await client.create_user_tool(
            "hostile_out", description=f"Looks harmless.{HOSTILE}", category=f"c{HOSTILE}", tags=[f"t{HOSTILE}"],
            script=f"#!/bin/bash\nprintf 'out{HOSTILE_PRINTF}\\n'\nprintf 'err{HOSTILE_PRINTF}\\n' >&2\n")
        await client.create_user_tool(
            "hostile_fail", description="Fails, quoting its stderr.",
            script=f"#!/bin/bash\nprintf 'why{HOSTILE_PRINTF}\\n' >&2\nexit 3\n")
    return cli_env(TOOLHOST_TARGET=server.target, COLUMNS="300")


# --- tools list and tools get ---------------------------------------------------------------------------------

async def test_tools_list_shows_a_hostile_description_escaped(env: dict[str, str]) -> None:
    run = await toolhost_on_terminals("tools", "list", env=env)
    assert run.code == 0, run.err
    assert_no_control(run.out)
    line = next(line for line in run.out.splitlines() if line.startswith("hostile_out "))
    # The table puts each description on one line: its whitespace, \r included, becomes a space first.
    assert f"c{ESCAPED}" in line and "Looks harmless." + ESCAPED.replace("\\x0d", " ") in line


@pytest.mark.parametrize("flag", ["--json", "--jsonl"])
async def test_tools_list_json_on_a_terminal_is_escaped_and_parses_to_the_same_text(env: dict[str, str],
                                                                                     flag: str) -> None:
    run = await toolhost_on_terminals("tools", "list", flag, env=env)
    assert run.code == 0, run.err
    assert_no_control(run.out)
    tools = json.loads(run.out) if flag == "--json" else [json.loads(line) for line in run.out.splitlines()]
    hostile = next(tool for tool in tools if tool["name"] == "hostile_out")
    assert hostile["description"] == f"Looks harmless.{HOSTILE}" and hostile["tags"] == [f"t{HOSTILE}"]


async def test_tools_get_shows_every_field_escaped(env: dict[str, str]) -> None:
    run = await toolhost_on_terminals("tools", "get", "hostile_out", env=env)
    assert run.code == 0, run.err
    assert_no_control(run.out)
    assert f"Looks harmless.{ESCAPED}" in run.out
    assert f"  category:    c{ESCAPED}" in run.out and f"  tags:        t{ESCAPED}" in run.out
    run = await toolhost_on_terminals("tools", "get", "hostile_out", "--json", env=env)
    assert_no_control(run.out)
    assert json.loads(run.out)["description"] == f"Looks harmless.{HOSTILE}"


async def test_a_servers_error_quoting_a_hostile_value_is_escaped_on_a_terminal(env: dict[str, str]) -> None:
    # The server quotes a value that breaks the schema as JSON: C0 escaped, but the C1 CSI and the override raw.
    # Whoever chose the value (a script, a pasted command, a model) chose what the error shows.
    run = await toolhost_on_terminals("call", "choosy", f"mode={HOSTILE}", env=env)
    assert run.code == 2
    assert_no_control(run.err)
    assert "\\x9b31m" in run.err and "\\u202e" in run.err and "is not one of" in run.err
    run = await toolhost_on_terminals("tools", "get", f"x{HOSTILE}", env=env)
    assert run.code == 2 and "NOT_FOUND" in run.err
    assert_no_control(run.err)


# --- call ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("stream", [False, True])
async def test_call_output_and_stderr_are_escaped_on_terminals(env: dict[str, str], stream: bool) -> None:
    run = await toolhost_on_terminals("call", *(["--stream"] if stream else []), "hostile_out", env=env)
    assert run.code == 0, run.err
    assert run.out == f"out{JSON_ESCAPED}\n"
    assert f"err{ESCAPED}\n" in run.err
    assert_no_control(run.err)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_failure_message_quoting_stderr_is_escaped_on_a_terminal(env: dict[str, str], stream: bool) -> None:
    run = await toolhost_on_terminals("call", *(["--stream"] if stream else []), "hostile_fail", env=env)
    assert run.code == 1
    assert_no_control(run.err)
    assert f"why{ESCAPED}" in run.err and "NON_ZERO_EXIT" in run.err


@pytest.mark.parametrize("output_format", ["json", "pretty", None])
async def test_json_output_on_a_terminal_still_parses_to_the_same_text(env: dict[str, str],
                                                                       output_format: str | None) -> None:
    # Without --format, the output is the tool's own text: JSON here, as a Python tool returning a dict writes.
    given = ["--format", output_format] if output_format else []
    run = await toolhost_on_terminals("call", *given, "structured", f"text={HOSTILE}", env=env)
    assert run.code == 0, run.err
    assert_no_control(run.out)
    assert json.loads(run.out) == {"text": HOSTILE}


# --- into a pipe, nothing changes --------------------------------------------------------------------------------

async def test_into_pipes_every_byte_goes_as_the_tool_wrote_it(env: dict[str, str]) -> None:
    for stream in ([], ["--stream"]):
        run: Run = await toolhost_piped("call", *stream, "hostile_out", env=env)
        assert run.code == 0 and run.out == f"out{HOSTILE}\n", stream
        assert run.err == f"err{HOSTILE}\n", stream
        run = await toolhost_piped("call", *stream, "hostile_fail", env=env)
        assert run.code == 1 and f"why{HOSTILE}" in run.err, stream
    run = await toolhost_piped("call", "choosy", f"mode={HOSTILE}", env=env)
    assert "\x9b31m\\rok\u202e\" is not one of" in run.err
    run = await toolhost_piped("tools", "list", env=env)
    assert f"Looks harmless.{HOSTILE.replace(chr(13), ' ')}" in run.out  # one line per tool, as ever
    run = await toolhost_piped("tools", "get", "hostile_out", env=env)
    assert f"category:    c{HOSTILE}" in run.out
    run = await toolhost_piped("call", "--format", "pretty", "structured", f"text={HOSTILE}", env=env)
    assert json.loads(run.out) == {"text": HOSTILE} and "\x9b31m" in run.out  # json.dumps escapes only C0


async def test_each_stream_is_escaped_only_when_it_is_a_terminal(env: dict[str, str]) -> None:
    # Output saved to a file while the person watches stderr: the file gets the bytes, the terminal escapes.
    run = await toolhost_on_terminals("call", "hostile_out", env=env, stdout=False)
    assert run.out == f"out{HOSTILE}\n"
    assert run.err == f"err{ESCAPED}\n"
    run = await toolhost_on_terminals("call", "hostile_out", env=env, stderr=False)
    assert run.out == f"out{JSON_ESCAPED}\n"
    assert run.err == f"err{HOSTILE}\n"
    run = await toolhost_on_terminals("call", "hostile_fail", env=env, stderr=False)
    assert f"why{HOSTILE}" in run.err


def test_a_character_split_between_chunks_is_joined_and_broken_bytes_are_no_csi() -> None:
    # U+009B (CSI) as two bytes in two chunks, then a lone 0x9b byte: a terminal not in UTF-8 mode reads that byte
    # as CSI, so it must reach the terminal as U+FFFD, not as itself; an unfinished character at the end too.
    leader, follower = pty.openpty()
    tty.setraw(follower)
    try:
        with open(follower, "w", encoding="utf-8", closefd=False) as terminal:
            shown = ShownStream(terminal, json=True)
            for chunk in (b"a\xc2", b"\x9bb \x9bc\n\xe2\x80"):
                shown.write(chunk)
            shown.close()
        os.close(follower)
        follower = -1
        written = b""
        while not written.endswith("\ufffd".encode()):
            written += os.read(leader, 1024)
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    assert written.decode() == "a\\u009bb \ufffdc\n\ufffd"


# --- instructions, logs and catalog validate -------------------------------------------------------------------

async def test_instructions_on_a_terminal_escape_a_tools_text_and_a_pipe_gets_it_as_written(
        env: dict[str, str]) -> None:
    run = await toolhost_on_terminals("instructions", "--provider", "claude_code", env=env, stderr=False)
    assert run.code == 0, run.err
    assert_no_control(run.out)
    assert "Looks harmless." + ESCAPED in run.out
    piped = await toolhost_piped("instructions", "--provider", "claude_code", env=env)
    assert "Looks harmless." + HOSTILE in piped.out


async def test_logs_on_a_terminal_escape_a_hostile_path_the_server_logged(tmp_path: Path) -> None:
    # Whoever names a directory chooses its bytes; `toolhost serve` logs the catalog directories it scans.
    catalog = tmp_path / f"catalog{HOSTILE}"
    catalog.mkdir()
    server = ServerProcess("--catalog-dir", str(catalog))
    try:
        await server.start()
        env = cli_env(TOOLHOST_TARGET=server.target)
        run = await toolhost_on_terminals("logs", "--grep", "Scanning catalog directory", env=env, stderr=False)
        piped = await toolhost_piped("logs", "--grep", "Scanning catalog directory", env=env)
    finally:
        await server.stop()
    assert run.code == 0, run.err
    assert_no_control(run.out)
    assert f"catalog{ESCAPED}" in run.out, run.out
    assert f"catalog{HOSTILE}" in piped.out


async def test_catalog_validate_on_a_terminal_escapes_the_catalogs_text(tmp_path: Path) -> None:
    # The file's name is the catalog writer's: a problem is reported under it.
    catalog = tmp_path / "hostile-catalog"
    catalog.mkdir()
    (catalog / f"bad{HOSTILE}.yaml").write_text("name: [unclosed\n")
    run = await toolhost_on_terminals("catalog", "validate", str(catalog), env=cli_env(), stderr=False)
    assert run.code != 0
    assert_no_control(run.out)
    assert f"bad{ESCAPED}.yaml" in run.out, run.out
    piped = await toolhost_piped("catalog", "validate", str(catalog), env=cli_env())
    assert f"bad{HOSTILE}.yaml" in piped.out
