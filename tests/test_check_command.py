"""`toolhost check`: every tool's examples run, offline (a server the command starts) and against a running
server, each judged by its `expect:`; `check: skip` and the open-world/destructive rule leave examples out; the
catalog's `expect:`/`check:` parsing; ToolExample's expect and skip_check on the wire.

Offline runs are real child processes serving real catalogs; the tools of the crafted catalogs are Python
functions of tests/check_functions.py, which leave marks on disk so a test can tell whether a check called them.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from toolhost import AsyncClient
from toolhost import ExampleExpectation as ClientExpectation
from toolhost_server.catalog.builtins import spec_from_tool_class
from toolhost_server.catalog.definition import DefinitionError, parse_definition
from toolhost_server.catalog.strict_yaml import load_catalog_yaml
from toolhost_server.check.cases import ExampleOf, Include, ToolExamples, check_cases
from toolhost_server.check.expectations import CallOutcome, subset_mismatch, unmet
from toolhost_server.check.rounds import run_rounds
from toolhost_server.model import NO_DEFAULT, Example, ExampleExpectation, Parameter, ToolSource
from toolhost_server.tools.base import Tool
from toolhost_server.workspaces.workspace import Workspace

from helpers.cli import Run, cli_env, toolhost
from helpers.paths import TESTS_DIR
from helpers.servers import ServerFactory

ENTRYPOINTS = "toolhost_server.tools,check_functions"


def catalog_tool(name: str, entrypoint: str, examples: str, extra: str = "",
                 parameters: str = "[{name: name, type: string, required: true}]") -> str:
    """A catalog file of a Python tool with `examples` (YAML, the list under `examples:`)."""
    return (f"name: {name}\ndescription: Test tool {name}.\n"
            f"runner: {{type: python, entrypoint: '{entrypoint}'}}\nparameters: {parameters}\n{extra}"
            f"examples:\n{textwrap.indent(textwrap.dedent(examples).strip(), '  ')}\n")


def write_catalog(directory: Path, tools: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in tools.items():
        (directory / f"{name}.yaml").write_text(text, encoding="utf-8")
    return directory


async def check_offline(catalog: Path, *args: str) -> Run:
    return await toolhost("check", "--catalog-dir", str(catalog), "--python-entrypoint-modules", ENTRYPOINTS, *args,
                          env=cli_env(PYTHONPATH=str(TESTS_DIR)))


def json_results(run: Run) -> dict[tuple[str, int], dict[str, Any]]:
    report = json.loads(run.out)
    return {(item["tool"], item["example"]): item for item in report["results"]}


def table_row(run: Run, tool: str, number: int) -> list[str]:
    """The table's row of example `number` of `tool`, split into its columns (not cut: stdout is a pipe)."""
    for line in run.out.splitlines():
        if line.startswith(f"{tool} ") and re.search(rf"\s#{number}\b", line):
            return re.split(r"\s{2,}", line.strip())
    raise AssertionError(f"no row for {tool} #{number} in:\n{run.out}")


# --- the bundled catalog -----------------------------------------------------------------------------------


async def test_the_bundled_catalog_passes_offline():
    run = await toolhost("check", "--offline")
    assert run.code == 0, run.out + run.err
    assert re.fullmatch(r"\d+ passed, 0 failed, \d+ skipped; \d+ tools without examples", run.out.splitlines()[-1])
    # memory_create stores into the structure memory_structure_create's example makes, which runs after it.
    assert table_row(run, "memory_create", 1)[2:] == ["ok", "passed in round 2"]
    # Answered only with a gRPC listener: the check serves one.
    assert table_row(run, "route_inspector", 2)[2:] == ["ok"]
    assert table_row(run, "config_access", 3)[2:] == ["skip", "check: skip"]
    assert table_row(run, "dns_lookup", 1)[2:] == ["skip", "open world (--include open_world)"]
    assert table_row(run, "tool_run", 1)[2:] == ["skip", "open world, destructive (--include open_world,destructive)"]


async def test_the_bundled_examples_pass_against_a_server_with_a_workspace_and_a_search_root(
        start_server: ServerFactory, tmp_path: Path):
    # As `make run` serves them: the file tools' examples name files an empty workspace lacks.
    (tmp_path / "w").mkdir()
    (tmp_path / "s").mkdir()
    server = await start_server(workspaces=(Workspace("w", str(tmp_path / "w")),), search_roots=(str(tmp_path / "s"),))
    run = await toolhost("--target", server.target, "check", "--json")
    report = json.loads(run.out)
    failures = [item for item in report["results"] if item["status"] == "failed"]
    assert run.code == 0 and not failures, failures
    results = json_results(run)
    assert results[("ls", 1)]["status"] == "passed"
    assert results[("read", 1)]["status"] == "skipped"


# --- crafted catalogs, offline ----------------------------------------------------------------------------


async def test_a_failing_example_fails_the_check_and_the_table_names_it(tmp_path: Path):
    catalog = write_catalog(tmp_path / "catalog", {
        "broken": catalog_tool("broken", "catalog_functions:fail", "- {description: Always fails, arguments: "
                                                                   "{message: boom}}",
                               parameters="[{name: message, type: string, required: true}]"),
        "fine": catalog_tool("fine", "toolhost_server.tools.samples:greet", "- {description: Greets, parameters: "
                                                                            "{name: Ada}}"),
    })
    run = await toolhost("check", "--catalog-dir", str(catalog), "--python-entrypoint-modules",
                         "toolhost_server.tools,catalog_functions", env=cli_env(PYTHONPATH=str(TESTS_DIR)))
    assert run.code == 1, run.out + run.err
    row = table_row(run, "broken", 1)
    assert row[:3] == ["broken", "#1 Always fails", "FAIL"]
    assert row[3].startswith("the call failed: TOOL_EXCEPTION: tool 'broken' failed")
    assert table_row(run, "fine", 1)[2:] == ["ok"]
    # Only the directory's tools: not the built-in ones the server also serves.
    assert not any(line.startswith("echo ") for line in run.out.splitlines())
    assert run.out.splitlines()[-1] == "1 passed, 1 failed, 0 skipped"


async def test_each_part_of_expect_must_hold(tmp_path: Path):
    greet = "toolhost_server.tools.samples:greet"
    arguments = "toolhost_server.tools.samples:return_arguments"
    anything = "[{name: a, type: object}, {name: flag, type: boolean}]"
    catalog = write_catalog(tmp_path / "catalog", {
        "greeter": catalog_tool("greeter", greet, """
            - {description: contains, arguments: {name: Ada}, expect: {output_contains: "Hello, Ada."}}
            - {description: lacks, arguments: {name: Ada}, expect: {output_contains: Goodbye}}
            - {description: should fail, arguments: {name: Ada}, expect: {success: false}}
            - {description: explicit success, arguments: {name: Ada}, expect: {success: true}}
            - {description: no structured output, arguments: {name: Ada}, expect: {structured_subset: x}}
        """),
        "shaped": catalog_tool("shaped", arguments, """
            - {description: subset, arguments: {a: {b: [1, 2, 3], c: x}}, expect: {structured_subset: {a: {b: [1, 3]}}}}
            - {description: out of order, arguments: {a: {b: [1, 2, 3]}}, expect: {structured_subset: {a: {b: [3, 1]}}}}
            - {description: bool is no number, arguments: {flag: true}, expect: {structured_subset: {flag: 1}}}
            - {description: missing key, arguments: {a: {}}, expect: {structured_subset: {a: {"x/y": 1}}}}
        """, parameters=anything),
        "failing": catalog_tool("failing", "catalog_functions:fail", """
            - {description: expected failure, arguments: {message: boom}, expect: {success: false,
               output_contains: unexpected error}}
        """, parameters="[{name: message, type: string, required: true}]"),
    })
    run = await toolhost("check", "--catalog-dir", str(catalog), "--python-entrypoint-modules",
                         "toolhost_server.tools,catalog_functions", "--json", env=cli_env(PYTHONPATH=str(TESTS_DIR)))
    assert run.code == 1, run.err
    results = {key: (item["status"], item["problems"]) for key, item in json_results(run).items()}
    assert results == {
        ("failing", 1): ("passed", []),
        ("greeter", 1): ("passed", []),
        ("greeter", 2): ("failed", ['the output does not contain "Goodbye"']),
        ("greeter", 3): ("failed", ["the call succeeded, but the example expects it to fail"]),
        ("greeter", 4): ("passed", []),
        ("greeter", 5): ("failed", ["the call returned no structured output, but the example expects one"]),
        ("shaped", 1): ("passed", []),
        ("shaped", 2): ("failed", ["the structured output at /a/b has no item containing 1 (expected item 1, in "
                                   "order)"]),
        ("shaped", 3): ("failed", ["the structured output at /flag is true, not 1"]),
        ("shaped", 4): ("failed", ["the structured output lacks /a/x~1y"]),
    }


async def test_check_skip_leaves_the_example_uncalled(tmp_path: Path):
    skipped, called = tmp_path / "skipped", tmp_path / "called"
    catalog = write_catalog(tmp_path / "catalog", {"marker": catalog_tool("marker", "check_functions:mark", f"""
        - {{description: left out, arguments: {{path: "{skipped}"}}, check: skip}}
        - {{description: run, arguments: {{path: "{called}"}}}}
    """, parameters="[{name: path, type: string, required: true}]")})
    run = await check_offline(catalog, "--json")
    assert run.code == 0, run.out + run.err
    results = json_results(run)
    assert results[("marker", 1)]["status"] == "skipped" and results[("marker", 1)]["skip_reason"] == "check: skip"
    assert results[("marker", 2)]["status"] == "passed"
    assert called.exists() and not skipped.exists()


@pytest.mark.parametrize(("include", "marked"), [
    ((), set()),
    (("--include", "open_world"), {"open"}),
    (("--include", "destructive"), {"destroys"}),
    (("--include", "open_world,destructive"), {"open", "destroys", "both"}),
    (("--include", "destructive", "--include", "open-world"), {"open", "destroys", "both"}),
])
async def test_open_world_and_destructive_tools_run_only_when_included(tmp_path: Path, include: tuple[str, ...],
                                                                       marked: set[str]):
    annotations = {"open": "{open_world: true}", "destroys": "{destructive: true}",
                   "both": "{open_world: true, destructive: true}", "plain": "{}"}
    catalog = write_catalog(tmp_path / "catalog", {
        name: catalog_tool(name, "check_functions:mark", f'- {{arguments: {{path: "{tmp_path / name}"}}}}',
                           extra=f"annotations: {value}\n", parameters="[{name: path, type: string}]")
        for name, value in annotations.items()})
    run = await check_offline(catalog, "--json", *include)
    assert run.code == 0, run.out + run.err
    assert {name for name in annotations if (tmp_path / name).exists()} == marked | {"plain"}
    reasons = {tool: item.get("skip_reason") for (tool, _), item in json_results(run).items()}
    if not include:
        assert reasons == {"open": "open world (--include open_world)",
                           "destroys": "destructive (--include destructive)",
                           "both": "open world, destructive (--include open_world,destructive)", "plain": None}


async def test_an_unknown_include_kind_is_a_usage_error(tmp_path: Path):
    run = await check_offline(tmp_path, "--include", "open_world,network")
    assert run.code == 2
    assert "'network' is no kind of tool check leaves out; use open_world, destructive" in run.err


async def test_an_example_that_needs_another_tools_example_passes_in_a_later_round(tmp_path: Path):
    need = "[{name: name, type: string, required: true}]"
    catalog = write_catalog(tmp_path / "catalog", {
        "a_needs": catalog_tool("a_needs", "check_functions:need", "- {arguments: {name: x}, expect: "
                                                                   "{structured_subset: {found: x}}}", parameters=need),
        "b_makes": catalog_tool("b_makes", "check_functions:make", "- {arguments: {name: x}}", parameters=need),
        "c_needs": catalog_tool("c_needs", "check_functions:need", "- {arguments: {name: never}}", parameters=need),
    })
    run = await check_offline(catalog, "--json")
    results = json_results(run)
    assert (results[("a_needs", 1)]["status"], results[("a_needs", 1)]["round"]) == ("passed", 2)
    assert (results[("b_makes", 1)]["status"], results[("b_makes", 1)]["round"]) == ("passed", 1)
    # Run again while the round before passed something; the last round passed nothing, so it ends.
    assert (results[("c_needs", 1)]["status"], results[("c_needs", 1)]["round"]) == ("failed", 3)
    assert run.code == 1


async def test_a_bad_catalog_file_fails_the_check_with_its_line(tmp_path: Path):
    catalog = write_catalog(tmp_path / "catalog", {
        "fine": catalog_tool("fine", "toolhost_server.tools.samples:greet", "- {arguments: {name: Ada}}"),
        "typo": catalog_tool("typo", "toolhost_server.tools.samples:greet", "- {arguments: {name: Ada}, "
                                                                            "expected: {success: true}}"),
    })
    run = await check_offline(catalog)
    assert run.code == 1
    lines = run.out.splitlines()
    assert lines[0] == (f"{catalog / 'typo.yaml'}:6: unknown key 'expected' in example #1; did you mean 'expect'?")
    assert lines[-1] == "1 passed, 0 failed, 0 skipped, 1 catalog problem"


async def test_a_catalog_without_examples_passes_and_says_so(tmp_path: Path):
    catalog = write_catalog(tmp_path / "catalog", {"bare": "name: bare\ndescription: No examples.\n"
                                                           "runner: {type: python, entrypoint: "
                                                           "'toolhost_server.tools.samples:greet'}\n"})
    run = await check_offline(catalog)
    assert (run.code, run.out) == (0, "0 passed, 0 failed, 0 skipped; 1 tool without examples\n")


# --- against a running server -----------------------------------------------------------------------------


async def test_check_against_a_server_runs_only_the_tools_asked_for(start_server: ServerFactory, tmp_path: Path):
    catalog = write_catalog(tmp_path / "catalog", {
        "greeter": catalog_tool("greeter", "toolhost_server.tools.samples:greet",
                                "- {arguments: {name: Ada}, expect: {output_contains: 'Hello, Ada.'}}"),
        "broken": catalog_tool("broken", "toolhost_server.tools.samples:greet",
                               "- {arguments: {name: Ada}, expect: {output_contains: Bye}}"),
    })
    server = await start_server(catalog_dirs=(catalog,))
    run = await toolhost("check", "--target", server.target, "--tool", "greeter", "--json")
    assert run.code == 0, run.out + run.err
    assert list(json_results(run)) == [("greeter", 1)]
    run = await toolhost("check", "--target", server.target, "--tool", "broken", "--tool", "greeter")
    assert run.code == 1
    assert table_row(run, "broken", 1)[2:] == ["FAIL", 'the output does not contain "Bye"']
    run = await toolhost("check", "--target", server.target, "--tool", "nonesuch")
    assert run.code == 2 and "no tool named nonesuch is checked here" in run.err


async def test_check_of_an_unreachable_server_exits_3(tmp_path: Path):
    run = await toolhost("check", "--target", "127.0.0.1:1", "--timeout", "5")
    assert run.code == 3 and "cannot reach a toolhost server at 127.0.0.1:1" in run.err


# --- the catalog's examples and the wire ------------------------------------------------------------------


def parse(text: str) -> Any:
    return parse_definition(load_catalog_yaml(text), "/catalog/t.yaml", ToolSource.CATALOG)


def test_expect_and_check_are_read_from_the_catalog():
    spec = parse(catalog_tool("t", "toolhost_server.tools.samples:greet", """
        - description: all of it
          parameters: {name: Ada}
          expect: {success: false, output_contains: Ada, structured_subset: {a: [1, null]}}
          check: skip
        - arguments: {name: Bo}
    """))
    assert spec.examples == (
        Example("all of it", {"name": "Ada"}, ExampleExpectation(False, "Ada", {"a": [1, None]}), skip_check=True),
        Example("", {"name": "Bo"}, ExampleExpectation(True, "", NO_DEFAULT), skip_check=False),
    )


@pytest.mark.parametrize(("example", "reason", "path"), [
    ("{arguments: {name: a}, expect: yes}", "example #1: expect must be a mapping of output_contains, "
                                            "structured_subset, success", ("examples", 0, "expect")),
    ("{arguments: {name: a}, expect: {success: 'yes'}}", "example #1: expect.success must be true or false",
     ("examples", 0, "expect", "success")),
    ("{arguments: {name: a}, expect: {output_contains: 5}}",
     "example #1: expect.output_contains must be a string (quote it)", ("examples", 0, "expect", "output_contains")),
    ("{arguments: {name: a}, expect: {succes: true}}", "unknown key 'succes' in example #1's expect; did you mean "
                                                       "'success'?", ("examples", 0, "expect", "succes")),
    ("{arguments: {name: a}, check: maybe}", "example #1: check must be `skip` (leaves the example out of "
                                             "`toolhost check`), or left out", ("examples", 0, "check")),
    ("{arguments: {name: a}, comment: hi}", "unknown key 'comment' in example #1; known keys: arguments, check, "
                                            "description, expect, parameters", ("examples", 0, "comment")),
    ("{arguments: {name: a}, parameters: {name: a}}", "example #1: give either `parameters` or `arguments`, not both",
     ("examples", 0, "arguments")),
    ("{arguments: {name: a}, expect: {structured_subset: {when: 2024-01-01}}}",
     "example #1: expect.structured_subset holds a date, which is no JSON value (quote a date or time as a string)",
     ("examples", 0, "expect", "structured_subset")),
    ("{arguments: {name: a}, expect: {structured_subset: {1: x}}}",
     "example #1: expect.structured_subset has a key that is not a string; quote it",
     ("examples", 0, "expect", "structured_subset")),
])
def test_a_bad_example_is_a_catalog_problem_at_its_place(example: str, reason: str, path: tuple[Any, ...]):
    with pytest.raises(DefinitionError) as caught:
        parse(catalog_tool("t", "toolhost_server.tools.samples:greet", f"- {example}"))
    assert (caught.value.reason, caught.value.path) == (reason, path)


def test_a_python_tools_examples_are_checked_like_a_catalogs():
    class Bad(Tool):
        name = "bad_example"
        description = "Has an example whose expectation is no JSON."
        parameters = (Parameter("x", "string"),)
        examples = (Example("a set", {"x": "y"}, ExampleExpectation(structured_subset={1, 2})),)

    with pytest.raises(DefinitionError, match=r"example #1: expect.structured_subset holds a set, which is no JSON"):
        spec_from_tool_class(Bad)


async def test_get_tool_carries_expect_and_skip_check(start_server: ServerFactory, tmp_path: Path):
    catalog = write_catalog(tmp_path / "catalog", {"t": catalog_tool("t", "toolhost_server.tools.samples:greet", """
        - {arguments: {name: a}, expect: {success: false, output_contains: x, structured_subset: null}, check: skip}
        - {arguments: {name: b}, expect: {output_contains: y}}
        - {arguments: {name: c}}
    """)})
    server = await start_server(catalog_dirs=(catalog,))
    async with AsyncClient(server.target) as client:
        tool = await client.get_tool("t")
        basic = await client.get_tool("t", view="basic")
    examples = tool.examples
    assert [(e.expect, e.skip_check) for e in examples] == [
        (ClientExpectation(False, "x", None, has_structured_subset=True), True),
        (ClientExpectation(True, "y"), False),
        (ClientExpectation(), False),
    ]
    # The default asks nothing beyond success: left off the wire.
    assert not tool.raw.examples[2].HasField("expect")
    assert examples[0].to_dict()["expect"] == {"success": False, "output_contains": "x", "structured_subset": None}
    assert basic.examples == ()


async def test_a_reload_that_changes_only_an_expectation_serves_the_new_one(start_server: ServerFactory,
                                                                           tmp_path: Path):
    catalog = tmp_path / "catalog"
    write_catalog(catalog, {"t": catalog_tool("t", "toolhost_server.tools.samples:greet",
                                              "- {arguments: {name: a}, expect: {output_contains: before}}")})
    server = await start_server(catalog_dirs=(catalog,))
    write_catalog(catalog, {"t": catalog_tool("t", "toolhost_server.tools.samples:greet",
                                              "- {arguments: {name: a}, expect: {output_contains: after!}}")})
    async with AsyncClient(server.target) as client:
        assert (await client.reload()).changed == ("t",)
        assert (await client.get_tool("t")).examples[0].expect.output_contains == "after!"


# --- the parts, directly ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("actual", "subset", "mismatch"), [
    ({"a": 1, "b": [1, 2, {"c": 3, "d": 4}]}, {"b": [{"c": 3}]}, ""),
    ([1, 2, 3], [1, 3], ""),
    ([1, 2, 3], [3, 1], "at / has no item containing 1 (expected item 1, in order)"),
    ([1, 1], [1, 1, 1], "at / has no item containing 1 (expected item 2, in order)"),
    (1.0, 1, ""),
    (True, 1, "at / is true, not 1"),
    (0, False, "at / is 0, not false"),
    (None, None, ""),
    ("1", 1, 'at / is "1", not 1'),
    ({"a": [1]}, {"a": {}}, "at /a is an array, not an object"),
    ({"a": {}}, {"a": []}, "at /a is an object, not an array"),
    ({"a~b": {"c": 1}}, {"a~b": {"c": 2}}, "at /a~0b/c is 1, not 2"),
    ({}, {}, ""),
])
def test_subset_mismatch(actual: Any, subset: Any, mismatch: str):
    assert subset_mismatch(actual, subset) == mismatch


def test_a_refused_call_is_named_as_refused_and_its_message_may_be_expected():
    refused = CallOutcome(success=False, error_code="NOT_FOUND", error_message="no structure 'people'", refused=True)
    assert unmet(ExampleExpectation(), refused) == ["the server refused the call: NOT_FOUND: no structure 'people'"]
    assert unmet(ExampleExpectation(success=False, output_contains="people"), refused) == []


def test_only_failed_calls_run_again():
    calls: list[str] = []
    outcomes = {"wrong_output": CallOutcome(success=True, output="no"), "ok": CallOutcome(success=True),
                "failed": CallOutcome(success=False, error_code="NON_ZERO_EXIT")}

    def call(case: Any) -> CallOutcome:
        calls.append(case.tool)
        return outcomes[case.tool]

    tools = [ToolExamples(name, [ExampleOf("", {}, ExampleExpectation(output_contains="yes" if name ==
                                                                       "wrong_output" else ""), False)])
             for name in ("failed", "ok", "wrong_output")]
    results = run_rounds(check_cases(tools, frozenset({Include.OPEN_WORLD})), call)
    assert calls == ["failed", "ok", "wrong_output", "failed"]
    assert [(r.status, r.round) for r in results] == [("failed", 2), ("passed", 1), ("failed", 1)]
