"""What a catalog file may name as a Python entrypoint (catalog.entrypoints), and which argv templates hand a
parameter to a shell or interpreter as code (catalog.inline_code). The server-level behaviour is in
tests/security/test_security_catalog_entrypoints.py."""

from __future__ import annotations

import pytest

from toolhost_server.catalog.entrypoints import EntrypointPolicy, EntrypointRefusedError, EntrypointSettingError
from toolhost_server.catalog.inline_code import inline_code_warnings
from toolhost_server.tools.echo import Echo
from toolhost_server.tools.samples import greet

DEFAULT = EntrypointPolicy.default()


def test_the_default_allows_the_server_tool_modules_and_what_they_define():
    assert DEFAULT.prefixes[0] == "toolhost_server.tools" and DEFAULT.is_default
    assert DEFAULT.check("toolhost_server.tools.samples:greet") is greet
    assert DEFAULT.check("toolhost_server.tools.echo:Echo") is Echo
    assert EntrypointPolicy.from_setting([]) == DEFAULT


@pytest.mark.parametrize(("entrypoint", "why"), [
    ("toolhost_server.toolsx:anything", "module 'toolhost_server.toolsx' is not under python_entrypoint_modules"),
    ("toolhost_server.tools.base:Tool", "not a concrete Tool subclass"),
    ("toolhost_server.model:Parameter", "module 'toolhost_server.model' is not under"),
    ("toolhost_server.tools.net_http:httpx.get", "a function defined in 'httpx'"),
    ("toolhost_server.tools.samples:json.loads", "a function defined in 'json'"),
    ("toolhost_server.tools.log_inspector:_time", "a private attribute"),
    ("toolhost_server.tools.samples:asyncio", "it is a module"),
])
def test_what_the_default_refuses(entrypoint, why):
    with pytest.raises(EntrypointRefusedError, match="is refused: ") as refused:
        DEFAULT.check(entrypoint)
    assert why in str(refused.value) and "python_entrypoint_modules (the default: toolhost_server.tools" in str(
        refused.value)


@pytest.mark.parametrize("modules", [["os"], ["toolhost_server.tools", "json"], ["builtins"], ["asyncio.tasks"]])
def test_the_setting_may_not_list_the_standard_library(modules):
    with pytest.raises(EntrypointSettingError, match="is Python's standard library"):
        EntrypointPolicy.from_setting(modules)


def test_the_setting_lists_module_names_only():
    with pytest.raises(EntrypointSettingError, match="'my tools' is not a module name"):
        EntrypointPolicy.from_setting(["my tools"])


@pytest.mark.parametrize(("argv", "at", "the_code"), [
    (["sh", "-c", "{cmd}"], 2, True),
    (["/bin/bash", "-lc", "{cmd}"], 2, True),
    (["bash", "-o", "pipefail", "-c", "--", "{cmd}"], 5, True),
    (["env", "python3", "-c", "{code}"], 3, True),
    (["python3.12", "-Ic", "{code}"], 2, True),
    (["busybox", "sh", "-c", "{cmd}"], 3, True),
    (["kubectl", "exec", "{pod}", "--", "bash", "-c", "{cmd}"], 6, True),
    (["node", "--eval", "{js}"], 2, True),
    (["ruby", "-e", "{code}"], 2, True),
    (["php", "-r", "{code}"], 2, True),
    (["lua5.4", "-e", "{code}"], 2, True),
    (["pwsh", "-Command", "{script}"], 2, True),
    (["powershell.exe", "-enc", "{script}"], 2, True),
    (["cmd", "/C", "{line}"], 2, True),
    (["perl", "-ne", "print", "{file}"], 3, False),  # perl -n opens it: "|cmd" runs cmd
    (["sh", "-c", 'echo "$1"', "sh", "{text}"], 4, False),
])
def test_an_argv_that_passes_a_parameter_to_inline_code_is_warned_about(argv, at, the_code):
    [warning] = inline_code_warnings({"type": "process", "argv": argv})
    assert warning.path == ("runner", "argv", at)
    assert ("the parameter is the code" in warning.message) is the_code
    assert "any caller runs any command with the server's rights" in warning.message


@pytest.mark.parametrize("argv", [
    ["sh", "-c", "df -P / | tail -n 1"],
    ["ping", "-c", "{count}", "--", "{host}"],
    ["grep", "-e", "{pattern}", "{file}"],
    ["python3", "script.py", "{x}"],
    ["python3", "-Wonce", "script.py", "{x}"],
    ["ssh", "{host}", "uptime"],
    ["which", "bash"],
])
def test_an_argv_without_inline_code_from_a_parameter_is_not_warned_about(argv):
    assert inline_code_warnings({"type": "process", "argv": argv}) == []


def test_only_process_runners_are_looked_at():
    assert inline_code_warnings({"type": "script", "script": "#!/bin/sh\nsh -c \"$TOOL_ARG_CMD\"\n"}) == []
