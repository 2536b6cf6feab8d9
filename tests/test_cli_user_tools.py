"""`toolhost user-tools` as a real child process against a real server: the walk-through from create to restore,
scripts from files and stdin, schemas from JSON files, the refusals a person gets in sentences, and what others
wrote shown on a terminal with its control characters escaped. The servers run user tools as `nobody`."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from toolhost_server.auth import hash_token

from helpers.cli import Run, cli_env, toolhost
from helpers.servers import RunningServer, ServerFactory
from helpers.terminal import toolhost_on_terminals

SCHEMA = {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]}


@pytest.fixture
async def server(start_server: ServerFactory) -> RunningServer:
    return await start_server(process_user="nobody")


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "greet.sh").write_text('echo "hello $TOOL_ARG_WHO"\n')
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    return tmp_path


async def test_create_call_update_versions_restore_disable_delete(server, files):
    target = ("--target", server.target)
    code, out, err = await toolhost("user-tools", "create", "hello_user", "--script", str(files / "greet.sh"),
                                    "--schema", str(files / "schema.json"), "--description", "Greets someone.",
                                    "--tags", "demo,people", *target)
    assert (code, out) == (0, "created user tool hello_user, version 1\n"), err
    code, out, _ = await toolhost("call", "hello_user", "who=ann", *target)
    assert (code, out) == (0, "hello ann\n")

    # The new script from stdin.
    code, out, err = await toolhost("user-tools", "update", "hello_user", "--script", "-", *target,
                                    stdin=b'echo "bye $TOOL_ARG_WHO"\n')
    assert (code, out) == (0, "updated user tool hello_user, version 2\n"), err
    code, out, _ = await toolhost("call", "hello_user", "who=ann", *target)
    assert out == "bye ann\n"

    code, out, _ = await toolhost("user-tools", "versions", "hello_user", *target)
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["VERSION", "TIME", "BY", "CHANGE"]
    assert [line.split()[0] for line in lines[1:]] == ["2", "1"] and lines[2].endswith("create")
    code, out, _ = await toolhost("user-tools", "versions", "hello_user", "--json", *target)
    assert [v["script"] for v in json.loads(out)] == ['echo "bye $TOOL_ARG_WHO"\n', 'echo "hello $TOOL_ARG_WHO"\n']

    code, out, err = await toolhost("user-tools", "restore", "hello_user", "1", *target)
    assert (code, out) == (0, "restored version 1 of user tool hello_user, version 3\n"), err
    code, out, _ = await toolhost("call", "hello_user", "who=ann", *target)
    assert out == "hello ann\n"

    code, out, _ = await toolhost("user-tools", "show", "hello_user", *target)
    assert code == 0 and out.startswith("hello_user (hello_user), version 3\n")
    assert "  tags:        demo, people" in out and 'Script:\n  echo "hello $TOOL_ARG_WHO"' in out
    code, out, _ = await toolhost("user-tools", "show", "hello_user", "--json", *target)
    shown = json.loads(out)
    assert shown["input_schema"] == SCHEMA and shown["version"] == 3 and shown["category"] == "custom"

    code, out, _ = await toolhost("user-tools", "disable", "hello_user", *target)
    assert (code, out) == (0, "disabled user tool hello_user\n")
    code, out, _ = await toolhost("user-tools", "list", *target)
    assert out.splitlines()[1].split()[:4] == ["hello_user", "3", "disabled", "custom"]
    code, _, err = await toolhost("call", "hello_user", "who=ann", *target)
    assert code == 2 and "no tool named 'hello_user'" in err
    code, out, _ = await toolhost("user-tools", "enable", "hello_user", *target)
    assert (code, out) == (0, "enabled user tool hello_user\n")

    code, out, _ = await toolhost("user-tools", "delete", "hello_user", *target)
    assert (code, out) == (0, "deleted user tool hello_user (it was at version 3)\n")
    code, out, err = await toolhost("user-tools", "list", *target)
    assert (code, out) == (0, "") and "no user tools" in err


async def test_update_changes_only_what_is_given(server, files):
    target = ("--target", server.target)
    await toolhost("user-tools", "create", "hello_user", "--script", str(files / "greet.sh"), "--description", "Hi.",
                   "--tags", "a", "--tool-timeout", "7", *target)
    code, out, err = await toolhost("user-tools", "update", "hello_user", "--description", "Hello.", "--tags", "",
                                    *target)
    assert code == 0, err
    code, out, _ = await toolhost("user-tools", "show", "hello_user", "--json", *target)
    shown = json.loads(out)
    assert (shown["description"], shown["tags"], shown["timeout_seconds"]) == ("Hello.", [], 7)
    assert shown["script"] == 'echo "hello $TOOL_ARG_WHO"\n'
    assert shown["input_schema"] == {"type": "object"}  # create's default: an object of any arguments
    code, _, err = await toolhost("user-tools", "update", "hello_user", *target)
    assert code == 2 and "nothing to change" in err


@pytest.mark.parametrize(("content", "problem"), [
    (b"{not json", "is not JSON: Expecting property name"),
    (b"[1, 2]", "must be a JSON object"),
    (b"\xff\xfe{}", "is not UTF-8"),
])
async def test_a_schema_file_that_is_no_json_object_is_a_usage_error(server, files, content, problem):
    (files / "bad.json").write_bytes(content)
    code, _, err = await toolhost("user-tools", "create", "hello_user", "--script", str(files / "greet.sh"),
                                  "--schema", str(files / "bad.json"), "--description", "x",
                                  "--target", server.target)
    assert code == 2 and problem in err, err


async def test_files_that_cannot_be_read_and_two_stdins_are_usage_errors(server, files):
    target = ("--target", server.target)
    code, _, err = await toolhost("user-tools", "create", "hello_user", "--script", str(files / "missing.sh"),
                                  "--description", "x", *target)
    assert code == 2 and "cannot read the script from" in err and "No such file" in err
    code, _, err = await toolhost("user-tools", "create", "hello_user", "--script", "-", "--system-prompt-file", "-",
                                  "--description", "x", *target, stdin=b"")
    assert code == 2 and "only one of --script and --system-prompt-file" in err


async def test_the_servers_refusals_are_sentences_with_exit_codes(server, files):
    target = ("--target", server.target)
    script = ("--script", str(files / "greet.sh"), "--description", "x")
    code, _, err = await toolhost("user-tools", "create", "echo", *script, *target)
    assert code == 1 and "ALREADY_EXISTS" in err
    code, _, err = await toolhost("user-tools", "create", "Bad", *script, *target)
    assert code == 2 and "INVALID_ARGUMENT" in err
    code, _, err = await toolhost("user-tools", "show", "nothing", *target)
    assert code == 2 and "NOT_FOUND" in err
    code, _, err = await toolhost("user-tools", "restore", "nothing", "0", *target)
    assert code == 2 and "is not a version number" in err
    code, _, err = await toolhost("user-tools", "create", "hello_user", *script, "--tool-timeout", "nan", *target)
    assert code == 2 and "--tool-timeout" in err


async def test_the_token_file_option_reaches_the_service(start_server, files, tmp_path):
    token = secrets.token_urlsafe(32)
    (tmp_path / "auth.yaml").write_text(
        "roles:\n  toolsmith: {manage_tools: true}\n"
        f"tokens:\n  - {{name: smith, sha256: {hash_token(token)}, roles: [toolsmith]}}\n")
    (tmp_path / "token").write_text(token)
    server = await start_server(auth_file=str(tmp_path / "auth.yaml"), process_user="nobody")
    code, _, err = await toolhost("user-tools", "list", "--target", server.target)
    assert code == 1 and "UNAUTHENTICATED" in err
    env = cli_env(TOOLHOST_TOKEN_FILE=str(tmp_path / "token"), TOOLHOST_TARGET=server.target)
    code, out, err = await toolhost("user-tools", "create", "hello_user", "--script", str(files / "greet.sh"),
                                    "--description", "x", env=env)
    assert code == 0, err
    code, out, _ = await toolhost("user-tools", "versions", "hello_user", env=env)
    assert out.splitlines()[1].split()[2:] == ["smith", "create"]


# --- text others wrote, on a terminal ---------------------------------------------------------------------------

# Clear the screen, set the window title, write "evil" to the clipboard (OSC 52), a C1 CSI, a carriage return
# that would overwrite the line, and a right-to-left override (Trojan Source).
HOSTILE = "\x1b[2J\x1b]0;owned\x07\x1b]52;c;ZXZpbA==\x07\x9b31m\rok\u202e"
ESCAPED = "\\x1b[2J\\x1b]0;owned\\x07\\x1b]52;c;ZXZpbA==\\x07\\x9b31m\\x0dok\\u202e"


async def toolhost_on_a_terminal(*args: str, env: dict[str, str]) -> Run:
    """`toolhost *args` with its stdout on a pseudo-terminal, its stderr a pipe."""
    return await toolhost_on_terminals(*args, env=env, stderr=False)


@pytest.fixture
async def hostile_tool(server: RunningServer, files: Path) -> dict[str, str]:
    """A user tool whose description, system prompt, name, tags and script hold terminal escapes."""
    (files / "hostile.sh").write_text(f"echo hi # {HOSTILE}\n")
    (files / "prompt.txt").write_text(f"Use it well.{HOSTILE}\n\tIndented.\n")
    code, _, err = await toolhost("user-tools", "create", "hostile", "--script", str(files / "hostile.sh"),
                                  "--description", f"Looks harmless.{HOSTILE}", "--name", f"N{HOSTILE}",
                                  "--system-prompt-file", str(files / "prompt.txt"), "--tags", f"t{HOSTILE}",
                                  "--target", server.target)
    assert code == 0, err
    return cli_env(TOOLHOST_TARGET=server.target, COLUMNS="200")


@pytest.mark.parametrize("command", [("show", "hostile"), ("list",), ("versions", "hostile")])
async def test_a_terminal_gets_control_characters_as_escapes(hostile_tool: dict[str, str],
                                                             command: tuple[str, ...]) -> None:
    run = await toolhost_on_a_terminal("user-tools", *command, env=hostile_tool)
    assert run.code == 0, run.err
    for control in ("\x1b", "\x07", "\x9b", "\r", "\u202e"):
        assert control not in run.out, (control, run.out)
    if command[0] != "versions":  # the versions table holds no text the tool's author wrote
        assert "\\x1b]52;c;ZXZpbA==\\x07" in run.out


async def test_show_escapes_every_field_and_keeps_newlines_and_tabs(hostile_tool: dict[str, str]) -> None:
    run = await toolhost_on_a_terminal("user-tools", "show", "hostile", env=hostile_tool)
    assert run.code == 0, run.err
    assert f"Looks harmless.{ESCAPED}" in run.out  # the description
    assert f"(N{ESCAPED}), version 1" in run.out  # the name
    assert f"  tags:        t{ESCAPED}" in run.out
    assert f"System prompt:\n  Use it well.{ESCAPED}\n  \tIndented." in run.out
    assert f"Script:\n  echo hi # {ESCAPED}" in run.out


async def test_json_on_a_terminal_is_escaped_and_still_parses_to_the_same_text(hostile_tool: dict[str, str]) -> None:
    for command in (("show", "hostile", "--json"), ("list", "--json"), ("versions", "hostile", "--json")):
        run = await toolhost_on_a_terminal("user-tools", *command, env=hostile_tool)
        assert run.code == 0, run.err
        assert not any(c in run.out for c in ("\x1b", "\x07", "\x9b", "\r", "\u202e")), command
        shown = json.loads(run.out)
        tool = shown[0] if isinstance(shown, list) else shown
        assert HOSTILE in tool["script"], command


async def test_output_into_a_pipe_or_a_file_stays_byte_for_byte(hostile_tool: dict[str, str]) -> None:
    run = await toolhost("user-tools", "show", "hostile", env=hostile_tool)
    assert run.code == 0 and "Script:\n  echo hi # \x1b[2J\x1b]0;owned\x07\x1b]52;c;ZXZpbA==\x07\x9b31m" in run.out
    run = await toolhost("user-tools", "show", "hostile", "--json", env=hostile_tool)
    assert json.loads(run.out)["description"] == f"Looks harmless.{HOSTILE}"
