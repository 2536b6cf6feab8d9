"""Third-party tool packs installed as entry points, and the README staying true to the configuration."""

from __future__ import annotations

import sys
import textwrap

from toolhost.v1 import tool_pb2, tool_service_pb2
from toolhost_server.config import SETTINGS

from helpers.paths import REPO_ROOT


async def test_an_installed_entry_point_pack_is_served(start_server, tmp_path, monkeypatch):
    package = tmp_path / "acme_tools"
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent("""
        from toolhost_server.model import Parameter
        from toolhost_server.tools.base import Tool

        class Shout(Tool):
            name = "acme_shout"
            description = "Upper-cases text."
            parameters = (Parameter("text", "string", required=True),)

            async def run(self, arguments, context):
                return arguments["text"].upper()
    """))
    dist_info = tmp_path / "acme_tools-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-tools\nVersion: 1.0\n")
    (dist_info / "entry_points.txt").write_text("[toolhost.tools]\nacme = acme_tools\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        server = await start_server()
        got = await server.stub.GetTool(tool_service_pb2.GetToolRequest(name="acme_shout"))
        assert got.tool.source == tool_pb2.TOOL_SOURCE_BUILTIN
        assert got.tool.origin == "python:acme_tools.Shout"
        response = await server.stub.CallTool(
            tool_service_pb2.CallToolRequest(name="acme_shout", arguments_json='{"text": "hey"}'))
        assert response.output == "HEY"
    finally:
        sys.modules.pop("acme_tools", None)


def test_readme_documents_every_setting():
    readme = (REPO_ROOT / "README.md").read_text()
    for setting in SETTINGS:
        assert f"| {setting.name} | {setting.env_var} |" in readme, setting.name


def test_readme_starts_with_the_two_commands():
    readme = (REPO_ROOT / "README.md").read_text()
    first_block = readme.split("```")[1]
    assert "make run" in first_block and "make test" in first_block


def test_the_security_page_names_tests_that_exist():
    import re

    page = (REPO_ROOT / "docs" / "security.md").read_text()
    named = set(re.findall(r"tests/[\w/]+\.py(?:::\w+)?", page))
    assert len(named) >= 8
    for reference in named:
        path, _, test = reference.partition("::")
        assert (REPO_ROOT / path).exists(), reference
        if test:
            assert f"def {test}(" in (REPO_ROOT / path).read_text(), reference
