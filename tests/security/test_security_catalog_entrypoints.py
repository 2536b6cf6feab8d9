"""Security review finding 5 (issue 16): a catalog file named any importable callable as a Python entrypoint
(`os:system` gave callers a shell). Now it may name only functions defined in, and Tool classes of, modules under
python_entrypoint_modules, never the standard library; and an argv that hands a parameter to a shell or an
interpreter as code is warned about, by `toolhost catalog validate` and in the server's log."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from toolhost.v1 import tool_service_pb2, tool_service_pb2_grpc

from helpers.catalogs import write_tool
from helpers.cli import cli_env, toolhost
from helpers.servers import ServerProcess

HOW_TO_ALLOW = "to allow a module of your own, add it or a package above it to python_entrypoint_modules"

ALLOWED_SOURCE = '''\
from os import system            # re-exported: reachable under this module's name, defined elsewhere
from subprocess import run

from toolhost_server.model import Parameter
from toolhost_server.tools.base import Tool


def shout(text: str) -> str:
    return text.upper()


class Whisper(Tool):
    name = "whisper"
    description = "Lower-cases text."
    parameters = (Parameter("text", "string", required=True),)

    async def run(self, arguments, context):
        return arguments["text"].lower()
'''
# Importing it leaves a file next to it: the module of a refused entrypoint must never be imported (its code runs).
OUTSIDE_SOURCE = '''\
from pathlib import Path

Path(__file__).with_suffix(".imported").touch()


def harmless() -> str:
    return "imported"
'''


@dataclass(frozen=True)
class Modules:
    """Two modules of the test's own on sys.path: `allowed` (the test lists it) and `outside` (it does not)."""

    directory: Path
    allowed: str
    outside: str

    @property
    def outside_was_imported(self) -> bool:
        return (self.directory / f"{self.outside}.imported").exists() or self.outside in sys.modules


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Modules]:
    key = uuid.uuid4().hex[:12]
    found = Modules(tmp_path / "modules", f"entry_allowed_{key}", f"entry_outside_{key}")
    found.directory.mkdir()
    (found.directory / f"{found.allowed}.py").write_text(ALLOWED_SOURCE)
    (found.directory / f"{found.outside}.py").write_text(OUTSIDE_SOURCE)
    monkeypatch.syspath_prepend(str(found.directory))
    yield found
    for name in (found.allowed, found.outside):
        sys.modules.pop(name, None)


def python_tool(name: str, entrypoint: str) -> str:
    return (f"name: {name}\ndescription: Runs {entrypoint}.\n"
            f"runner: {{type: python, entrypoint: '{entrypoint}'}}\n"
            "input_schema: {type: object}\n")


REFUSED = [
    pytest.param("os:system", "'os' is Python's standard library", id="os.system"),
    pytest.param("builtins:eval", "'builtins' is Python's standard library", id="builtins.eval"),
    pytest.param("subprocess:run", "'subprocess' is Python's standard library", id="subprocess.run"),
    pytest.param("json:loads", "'json' is Python's standard library", id="json.loads"),
    pytest.param("{allowed}:system", "it is a builtin_function_or_method, not a function or a Tool subclass",
                 id="os.system-re-exported"),
    pytest.param("{allowed}:run", "a function defined in 'subprocess', not in '{allowed}'",
                 id="subprocess.run-re-exported"),
    pytest.param("{outside}:harmless", "module '{outside}' is not under python_entrypoint_modules",
                 id="module-outside-the-prefixes"),
]


@pytest.mark.parametrize(("entrypoint", "why"), REFUSED)
async def test_an_entrypoint_outside_the_allowed_modules_is_not_loaded_and_the_rest_of_the_catalog_is(
        start_server, tmp_path, modules, entrypoint, why):
    entrypoint = entrypoint.format(allowed=modules.allowed, outside=modules.outside)
    why = why.format(allowed=modules.allowed, outside=modules.outside)
    catalog = tmp_path / "catalog"
    bad = write_tool(catalog, "bad", python_tool("bad", entrypoint))
    write_tool(catalog, "good")  # toolhost_server.tools.samples:greet
    server = await start_server(catalog_dirs=[catalog],
                                python_entrypoint_modules=("toolhost_server.tools", modules.allowed))

    report = await server.stub.Reload(tool_service_pb2.ReloadRequest())
    assert "good" in report.tools and "bad" not in report.tools
    [problem] = report.errors
    assert (problem.file, problem.line) == (str(bad), 3)  # the runner's line
    assert problem.reason.startswith(f"entrypoint {entrypoint!r} is refused: ")
    assert why in problem.reason
    assert "python_entrypoint_modules (toolhost_server.tools, " in problem.reason and HOW_TO_ALLOW in problem.reason
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await server.stub.CallTool(tool_service_pb2.CallToolRequest(name="bad", arguments_json='{"command": "id"}'))
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    # The module's name was checked before anything was imported.
    assert not modules.outside_was_imported


async def test_a_function_and_a_tool_class_of_an_allowed_module_load_and_run(start_server, tmp_path, modules):
    catalog = tmp_path / "catalog"
    write_tool(catalog, "shout", python_tool("shout", f"{modules.allowed}:shout"))
    write_tool(catalog, "whisper", python_tool("whisper", f"{modules.allowed}:Whisper"))
    # Allowed on dotted boundaries: the prefix toolhost_server.tools covers toolhost_server.tools.samples.
    write_tool(catalog, "greet")
    server = await start_server(catalog_dirs=[catalog],
                                python_entrypoint_modules=("toolhost_server.tools", modules.allowed))

    report = await server.stub.Reload(tool_service_pb2.ReloadRequest())
    assert list(report.errors) == []
    for name, arguments, output in (("shout", {"text": "Hey"}, "HEY"), ("whisper", {"text": "Hey"}, "hey"),
                                    ("greet", {"name": "you"}, "Hello, you.")):
        response = await server.stub.CallTool(
            tool_service_pb2.CallToolRequest(name=name, arguments_json=json.dumps(arguments)))
        assert response.success and response.output == output, (name, response.error)


async def test_a_prefix_matches_only_on_dotted_boundaries(start_server, tmp_path, modules):
    catalog = tmp_path / "catalog"
    bad = write_tool(catalog, "shout", python_tool("shout", f"{modules.allowed}:shout"))
    # The allowed module's name without its last character: a prefix of the text, not of the dotted name.
    server = await start_server(catalog_dirs=[catalog],
                                python_entrypoint_modules=("toolhost_server.tools", modules.allowed[:-1]))
    report = await server.stub.Reload(tool_service_pb2.ReloadRequest())
    assert "shout" not in report.tools
    assert [(e.file, f"module '{modules.allowed}' is not under" in e.reason) for e in report.errors] == [
        (str(bad), True)]


@pytest.mark.parametrize("prefix", ["os", "json.decoder", "builtins"])
async def test_the_setting_refuses_the_standard_library_at_start(tmp_path, prefix):
    server = ServerProcess("--catalog-dir", str(tmp_path),
                           env={"TOOLHOST_PYTHON_ENTRYPOINT_MODULES": f"toolhost_server.tools,{prefix}"})
    try:
        with pytest.raises(RuntimeError, match="server exited before listening"):
            await server.start()
        assert await server.wait() == 1
    finally:
        await server.stop()
    assert (f"cannot start: python_entrypoint_modules: {prefix!r} is Python's standard library, which catalog "
            "files may never name") in server.log.decode()


SHELL_TOOL = ("name: run_anything\ndescription: Runs a command line.\n"
              "runner: {type: process, argv: ['sh', '-c', '{command}']}\n"
              "parameters: [{name: command, type: string, required: true}]\n")
# The script is fixed and the value its argument $1: safe while the script treats it as data, which only a
# reader of the script can tell, so it is warned about too (less sternly).
PASS_ALONG_TOOL = ("name: count_words\ndescription: Counts the words of a text.\n"
                   "runner: {type: process, argv: ['sh', '-c', 'echo \"$1\" | wc -w', 'sh', '{text}']}\n"
                   "parameters: [{name: text, type: string, required: true}]\n")
FIXED_SHELL_TOOL = ("name: root_usage\ndescription: Shows how full the root filesystem is.\n"
                    "runner: {type: process, argv: ['sh', '-c', 'df -P / | tail -n 1']}\n")


async def test_catalog_validate_reports_refused_entrypoints_and_warns_about_code_from_a_parameter(
        tmp_path, modules):
    catalog = tmp_path / "catalog"
    system = write_tool(catalog, "system", python_tool("system", "os:system"))
    outside = write_tool(catalog, "outside", python_tool("outside", f"{modules.outside}:harmless"))
    write_tool(catalog, "shout", python_tool("shout", f"{modules.allowed}:shout"))
    shell = write_tool(catalog, "run_anything", SHELL_TOOL)
    pass_along = write_tool(catalog, "count_words", PASS_ALONG_TOOL)
    write_tool(catalog, "root_usage", FIXED_SHELL_TOOL)
    allowed = f"toolhost_server.tools,{modules.allowed}"
    path = cli_env(PYTHONPATH=str(modules.directory))

    flag = await toolhost("catalog", "validate", str(catalog), "--python-entrypoint-modules", allowed, env=path)
    from_env = await toolhost("catalog", "validate", str(catalog),
                              env={**path, "TOOLHOST_PYTHON_ENTRYPOINT_MODULES": allowed})
    for run in (flag, from_env):
        assert run.code == 1, run.err
        lines = run.out.splitlines()
        assert [line.partition(": ")[0] for line in lines[:-1]] == [
            f"{outside}:3", f"{system}:3", f"{pass_along}:3", f"{shell}:3"]
        assert f"entrypoint '{modules.outside}:harmless' is refused: module '{modules.outside}' is not under " \
               "python_entrypoint_modules" in lines[0] and HOW_TO_ALLOW in lines[0]
        assert "entrypoint 'os:system' is refused: 'os' is Python's standard library" in lines[1]
        assert lines[2].startswith(f"{pass_along}:3: warning: tool 'count_words': argv runs `sh -c` with inline "
                                   "code and passes {text} after it: if that code evaluates the value")
        assert lines[3].startswith(f"{shell}:3: warning: tool 'run_anything': argv runs `sh -c {{command}}`: the "
                                   "parameter is the code sh runs")
        assert lines[-1] == "4 tools OK, 2 problems, 2 warnings"
    assert not modules.outside_was_imported

    stdlib = await toolhost("catalog", "validate", str(catalog), "--python-entrypoint-modules", "builtins", env=path)
    assert stdlib.code == 2 and "python_entrypoint_modules: 'builtins' is Python's standard library" in stdlib.err


async def test_the_server_warns_in_its_log_about_code_from_a_parameter_and_serves_the_default_modules(tmp_path):
    catalog = tmp_path / "catalog"
    shell = write_tool(catalog, "run_anything", SHELL_TOOL)
    write_tool(catalog, "root_usage", FIXED_SHELL_TOOL)
    write_tool(catalog, "greet")  # toolhost_server.tools.samples:greet
    system = write_tool(catalog, "system", python_tool("system", "os:system"))
    # The setting empty: its default, toolhost_server.tools and the installed tool packs.
    server = ServerProcess("--catalog-dir", str(catalog), "--watch-catalog", "false",
                           env={"TOOLHOST_PYTHON_ENTRYPOINT_MODULES": "", "TOOLHOST_LOG_FORMAT": "json"})
    try:
        await server.start()
        async with grpc.aio.insecure_channel(server.target) as channel:
            stub = tool_service_pb2_grpc.ToolServiceStub(channel)
            report = await stub.Reload(tool_service_pb2.ReloadRequest())
            greeted = await stub.CallTool(tool_service_pb2.CallToolRequest(
                name="greet", arguments_json='{"name": "you"}'))
    finally:
        await server.stop()
    assert {"run_anything", "root_usage", "greet"} <= set(report.tools) and "system" not in report.tools
    assert greeted.output == "Hello, you."
    assert [(e.file, "python_entrypoint_modules (the default: toolhost_server.tools" in e.reason)
            for e in report.errors] == [(str(system), True)]
    records = [json.loads(line) for line in server.log.splitlines() if line.startswith(b"{")]
    warnings = [r["message"] for r in records if r["level"] == "WARNING" and "argv runs" in r["message"]]
    # Once, when the file was read: the reload found it unchanged. The fixed script is not warned about.
    assert warnings == [f"catalog file {shell}, tool 'run_anything': argv runs `sh -c {{command}}`: the parameter "
                        "is the code sh runs, so any caller runs any command with the server's rights. Prefer a "
                        "fixed program that takes the value as one argument, or a script runner (arguments arrive "
                        "as environment variables)"]
