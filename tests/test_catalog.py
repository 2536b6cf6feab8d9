"""Catalog directories: bad files, duplicates, required tools, missing directories, last good versions."""

from __future__ import annotations

import logging
import shutil

import pytest

from toolhost.v1 import tool_pb2, tool_service_pb2

from helpers.catalogs import write_tool

RELOAD = tool_service_pb2.ReloadRequest()


async def names(server) -> list[str]:
    response = await server.stub.ListTools(tool_service_pb2.ListToolsRequest(page_size=1000))
    return [t.name for t in response.tools]


async def test_bad_files_are_reported_and_skipped(start_server, tmp_path):
    write_tool(tmp_path, "good")
    write_tool(tmp_path, "syntax", "name: syntax\ndescription: ok\nparameters:\n  - name: [unclosed\n")
    write_tool(tmp_path, "typo", "name: typo\ndescription: A typo below.\n\ntimeout_second: 3\n")
    write_tool(tmp_path, "runner", "name: runner\ndescription: Bad runner.\nrunner: {type: teleport}\n")
    write_tool(tmp_path, "regex", "name: regex\ndescription: Bad intent.\nimplementation: echo\n"
               "intents: ['dns lookup (?P<domain']\n")
    write_tool(tmp_path, "creds", "name: creds\ndescription: Bad credential name.\nimplementation: echo\n"
               "credentials:\n  - winrm\n  - aws_prod\n")
    server = await start_server(catalog_dirs=[tmp_path])
    report = await server.stub.Reload(RELOAD)
    assert report.success
    by_file = {e.file.rsplit("/", 1)[-1]: e for e in report.errors}
    assert set(by_file) == {"syntax.yaml", "typo.yaml", "runner.yaml", "regex.yaml", "creds.yaml"}
    # An underscore would make TOOLHOST_CRED_AWS_PROD_<KEY> ambiguous: refused at load, at its line.
    assert by_file["creds.yaml"].line == 6 and "'aws_prod' is not a credential name" in by_file["creds.yaml"].reason
    assert by_file["syntax.yaml"].line == 5 and "YAML syntax error" in by_file["syntax.yaml"].reason
    assert by_file["typo.yaml"].line == 4
    assert "'timeout_second'" in by_file["typo.yaml"].reason and "'timeout_seconds'" in by_file["typo.yaml"].reason
    assert "unknown runner type 'teleport'" in by_file["runner.yaml"].reason
    assert by_file["runner.yaml"].line == 3
    assert by_file["regex.yaml"].line == 4 and "regular expression" in by_file["regex.yaml"].reason
    assert "good" in await names(server)
    assert report.catalog_dirs == [str(tmp_path)]


async def test_later_directory_wins_a_duplicate_name_with_a_warning(start_server, tmp_path, caplog):
    first, second = tmp_path / "first", tmp_path / "second"
    write_tool(first, "dup", "name: dup\ndescription: From the first directory.\nimplementation: echo\n")
    write_tool(second, "dup", "name: dup\ndescription: From the second directory.\nimplementation: echo\n")
    with caplog.at_level(logging.WARNING, logger="toolhost.registry"):
        server = await start_server(catalog_dirs=[first, second])
    got = await server.stub.GetTool(tool_service_pb2.GetToolRequest(name="dup"))
    assert got.tool.description == "From the second directory."
    assert got.tool.origin == str(second / "dup.yaml")
    warning = next(r.getMessage() for r in caplog.records if "dup" in r.getMessage())
    assert str(first / "dup.yaml") in warning and str(second / "dup.yaml") in warning
    assert (await names(server)).count("dup") == 1


async def test_missing_required_tools_are_reported_and_logged(start_server, tmp_path, caplog):
    write_tool(tmp_path, "present")
    with caplog.at_level(logging.ERROR, logger="toolhost.registry"):
        server = await start_server(catalog_dirs=[tmp_path], required_tools=("present", "never_defined"))
    report = await server.stub.Reload(RELOAD)
    assert list(report.missing_required) == ["never_defined"]
    assert any("Required tool 'never_defined' not found" in r.getMessage() for r in caplog.records)
    assert "present" in report.tools


async def test_missing_directory_fails_the_reload_and_keeps_the_snapshot(start_server, tmp_path):
    catalog = tmp_path / "catalog"
    write_tool(catalog, "kept")
    server = await start_server(catalog_dirs=[catalog])
    before = await server.stub.Reload(RELOAD)
    shutil.rmtree(catalog)
    report = await server.stub.Reload(RELOAD)
    assert not report.success
    assert report.generation == before.generation
    assert [e.file for e in report.errors] == [str(catalog)]
    assert "does not exist" in report.errors[0].reason
    assert "kept" in await names(server)


async def test_a_file_turned_bad_keeps_its_last_good_version(start_server, tmp_path):
    path = write_tool(tmp_path, "steady")
    server = await start_server(catalog_dirs=[tmp_path])
    path.write_text("name: steady\ndescription: [broken\n")
    report = await server.stub.Reload(RELOAD)
    assert "steady" in report.tools
    assert "still serving its last good version" in report.errors[0].reason
    response = await server.stub.CallTool(
        tool_service_pb2.CallToolRequest(name="steady", arguments_json='{"name": "Ada"}'))
    assert response.output == "Hello, Ada."
    path.unlink()
    report = await server.stub.Reload(RELOAD)
    assert "steady" not in report.tools and list(report.removed) == ["steady"] and not report.errors


async def test_reload_reports_the_diff_and_bumps_the_generation_only_on_change(start_server, tmp_path):
    write_tool(tmp_path, "alpha")
    path_b = write_tool(tmp_path, "beta")
    server = await start_server(catalog_dirs=[tmp_path])
    unchanged = await server.stub.Reload(RELOAD)
    assert unchanged.generation == 1 and not (unchanged.added or unchanged.removed or unchanged.changed)
    spec_before = server.toolhost.registry.snapshot.get("alpha").spec
    path_b.unlink()
    write_tool(tmp_path, "gamma")
    write_tool(tmp_path, "alpha", "name: alpha\ndescription: Changed.\nimplementation: echo\n")
    report = await server.stub.Reload(RELOAD)
    assert report.generation == 2
    assert (list(report.added), list(report.removed), list(report.changed)) == (["gamma"], ["beta"], ["alpha"])
    assert server.toolhost.registry.snapshot.get("alpha").spec is not spec_before


async def test_unchanged_files_are_not_parsed_again(start_server, tmp_path):
    write_tool(tmp_path, "cached")
    server = await start_server(catalog_dirs=[tmp_path])
    spec = server.toolhost.registry.snapshot.get("cached").spec
    await server.stub.Reload(RELOAD)
    assert server.toolhost.registry.snapshot.get("cached").spec is spec


async def test_local_source_must_name_a_builtin(start_server, tmp_path):
    write_tool(tmp_path, "alias", "name: alias\ndescription: Echo under another name.\nsource: local\n"
               "implementation: echo\nparameters: [{name: text, type: string, required: true}]\n")
    write_tool(tmp_path, "orphan", "name: orphan\ndescription: Nothing implements it.\nsource: local\n")
    server = await start_server(catalog_dirs=[tmp_path])
    report = await server.stub.Reload(RELOAD)
    assert [e.file.rsplit("/", 1)[-1] for e in report.errors] == ["orphan.yaml"]
    assert "must name a built-in tool" in report.errors[0].reason
    response = await server.stub.CallTool(
        tool_service_pb2.CallToolRequest(name="alias", arguments_json='{"text": "via alias"}'))
    assert response.output == "via alias"


async def test_pipeline_source_needs_a_pipeline_target(start_server, tmp_path):
    write_tool(tmp_path, "piped", "name: piped\ndescription: Runs on the pipeline.\nsource: pipeline\n")
    server = await start_server(catalog_dirs=[tmp_path])
    report = await server.stub.Reload(RELOAD)
    assert "TOOLHOST_PIPELINE_TARGET" in report.errors[0].reason
    server2 = await start_server(catalog_dirs=[tmp_path], pipeline_target="127.0.0.1:1")
    report2 = await server2.stub.Reload(RELOAD)
    assert not report2.errors and "piped" in report2.tools


async def test_seed_format_is_accepted_as_is(start_server, tmp_path):
    # The AI Tool Catalog's own example, with a version YAML reads as a number.
    write_tool(tmp_path, "my_tool", """
name: my_tool
display_name: My Tool
description: Description of what the tool does
category: network
platform: cross-platform
version: 1.0
source: pipeline
parameters:
  - name: param1
    type: string
    description: Parameter description
    required: true
  - name: param2
    type: integer
    description: Optional parameter
    required: false
    default: 10
timeout_seconds: 30
requires_admin: false
tags:
  - tag1
  - tag2
examples:
  - description: "Example usage"
    parameters:
      param1: "value1"
""")
    server = await start_server(catalog_dirs=[tmp_path], pipeline_target="127.0.0.1:1")
    got = (await server.stub.GetTool(tool_service_pb2.GetToolRequest(name="my_tool"))).tool
    assert got.source == tool_pb2.TOOL_SOURCE_CATALOG and got.version == "1.0"
    assert got.timeout.seconds == 30
    assert [p.name for p in got.parameters] == ["param1", "param2"]
    assert got.parameters[1].default.number_value == 10
    assert got.input_schema["required"] == ["param1"]
    assert got.examples[0].arguments["param1"] == "value1"
    assert len(got.fingerprint) == 64


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("name: x\ndescription: d\nparameters: [{name: n, type: integer, default: abc}]\n", "default 'abc' is invalid"),
        ("name: x\ndescription: d\nparameters: [{name: n, type: str}]\n", "has type 'str'"),
        ("name: x\ndescription: d\nexamples: [{parameters: {nope: 1}}]\n", "does not fit the parameters"),
        ("name: 'bad name'\ndescription: d\n", "must start with a letter"),
        ("description: d\n", "`name` is required"),
        ("- just\n- a list\n", "must be a mapping"),
    ],
)
async def test_definition_mistakes_are_explained(start_server, tmp_path, body, reason):
    write_tool(tmp_path, "x", body)
    server = await start_server(catalog_dirs=[tmp_path])
    report = await server.stub.Reload(RELOAD)
    assert len(report.errors) == 1 and reason in report.errors[0].reason, report.errors


async def test_a_catalog_tool_named_like_a_builtin_replaces_it_with_a_warning(start_server, tmp_path, caplog):
    for i in range(5):
        write_tool(tmp_path, f"plain_{i}")
    write_tool(tmp_path, "echo", "name: echo\ndescription: The catalog's own echo.\nimplementation: echo\n")
    with caplog.at_level(logging.WARNING, logger="toolhost.registry"):
        server = await start_server(catalog_dirs=[tmp_path])
    got = await server.stub.GetTool(tool_service_pb2.GetToolRequest(name="echo"))
    assert got.tool.description == "The catalog's own echo."
    assert any("'echo'" in r.getMessage() and "replaces" in r.getMessage() for r in caplog.records)
    assert {f"plain_{i}" for i in range(5)} <= set(await names(server))
