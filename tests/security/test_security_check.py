"""`toolhost check` run on a catalog nobody has reviewed yet (a pull request's, in CI): its examples run in a
server of the command's own, configured by toolhost's defaults rather than the machine's TOOLHOST_* settings,
with process tools dropped to nobody under root, on a data directory that is gone afterwards; what the catalog
wrote is shown escaped on a terminal; an expectation that no call could meet is refused when the file is read."""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path

import pytest

from toolhost_server.catalog.definition import DefinitionError, parse_definition
from toolhost_server.catalog.strict_yaml import load_catalog_yaml
from toolhost_server.model import ToolSource

from helpers.cli import cli_env, toolhost
from helpers.terminal import toolhost_on_terminals

GREET = "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:greet'}\n" \
        "parameters: [{name: name, type: string, required: true}]\n"


def write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.yaml").write_text(text, encoding="utf-8")
    return directory


async def test_the_offline_check_ignores_the_machines_toolhost_settings(tmp_path: Path):
    # A CI runner's environment may configure a real server (here: the whole filesystem as a workspace, and
    # search roots): the examples of an unreviewed catalog must not get those tools.
    env = cli_env(TOOLHOST_WORKSPACES="everything=/", TOOLHOST_SEARCH_ROOTS="/")
    for tool in ("read", "search"):
        run = await toolhost("check", "--offline", "--tool", tool, env=env)
        assert run.code == 2 and f"no tool named {tool} is checked here" in run.err, run


async def test_a_catalogs_process_examples_do_not_run_as_root(tmp_path: Path):
    # Under root the check's server runs process tools as nobody, as `toolhost serve` does; an example that
    # printed 0 here would have run as root.
    uid = pwd.getpwnam("nobody").pw_uid if os.geteuid() == 0 else os.geteuid()
    catalog = write(tmp_path / "catalog", "whoami", "name: whoami\ndescription: Prints its user id.\n"
                    "runner: {type: process, argv: [id, -u]}\n"
                    f"examples: [{{description: who, arguments: {{}}, expect: {{output_contains: '{uid}'}}}}]\n")
    run = await toolhost("check", "--catalog-dir", str(catalog), "--json")
    assert run.code == 0, run.out + run.err
    assert json.loads(run.out)["results"][0]["status"] == "passed"


async def test_the_offline_checks_data_directory_is_removed(tmp_path: Path):
    # The examples' data (memory rows, user tools, audit records) is the catalog's sample data, yet it lives
    # only as long as the check.
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    catalog = write(tmp_path / "catalog", "greeter", f"name: greeter\ndescription: Greets.\n{GREET}"
                    "examples: [{arguments: {name: Ada}}]\n")
    run = await toolhost("check", "--catalog-dir", str(catalog), env=cli_env(TMPDIR=str(temporary)))
    assert run.code == 0, run.out + run.err
    assert list(temporary.iterdir()) == []


async def test_what_the_catalog_wrote_is_escaped_on_a_terminal(tmp_path: Path):
    # A description that would set the terminal's title and an expected text that would clear the screen.
    catalog = write(tmp_path / "catalog", "greeter", f"name: greeter\ndescription: Greets.\n{GREET}"
                    'examples: [{description: "hi \\e]0;pwned\\a", arguments: {name: Ada}, '
                    'expect: {output_contains: "\\e[2J"}}]\n')
    code, out, _ = await toolhost_on_terminals("check", "--catalog-dir", str(catalog), env=cli_env())
    assert code == 1
    assert "\x1b" not in out and "\x07" not in out
    assert "hi \\x1b]0;pwned\\x07" in out and "\\u001b[2J" in out
    for form in ((), ("--json",)):
        code, out, _ = await toolhost_on_terminals("check", "--catalog-dir", str(catalog), *form, env=cli_env(),
                                                   stderr=False)
        assert code == 1 and "\x1b" not in out
    # Into a pipe every byte goes as it came.
    run = await toolhost("check", "--catalog-dir", str(catalog), "--json")
    assert json.loads(run.out)["results"][0]["description"] == "hi \x1b]0;pwned\x07"


def test_a_structured_subset_deeper_than_any_output_is_refused():
    subset = "{a: " * 40 + "1" + "}" * 40
    document = load_catalog_yaml(f"name: deep\ndescription: Deep.\n{GREET}"
                                 f"examples: [{{arguments: {{name: a}}, expect: {{structured_subset: {subset}}}}}]\n")
    with pytest.raises(DefinitionError, match=r"expect\.structured_subset nests deeper than 32 levels"):
        parse_definition(document, "/catalog/deep.yaml", ToolSource.CATALOG)


def test_nan_cannot_be_expected():
    document = load_catalog_yaml(f"name: nan\ndescription: NaN.\n{GREET}"
                                 "examples: [{arguments: {name: a}, expect: {structured_subset: [.nan]}}]\n")
    with pytest.raises(DefinitionError, match="holds NaN or an infinity, which JSON has no number for"):
        parse_definition(document, "/catalog/nan.yaml", ToolSource.CATALOG)
