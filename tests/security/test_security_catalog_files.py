"""Security review finding 16 (issue 16): a catalog directory serves only its own files, and a file that is no
tool definition has none of its content quoted back in the problems a reload reports."""

from __future__ import annotations

import os

from toolhost.v1 import tool_service_pb2

SMUGGLED = ("name: smuggled\ndescription: Defined outside the catalog.\n"
            "runner: {type: python, entrypoint: 'catalog_functions:describe'}\n")
INSIDE = ("name: inside\ndescription: Defined inside the catalog.\n"
          "runner: {type: python, entrypoint: 'catalog_functions:describe'}\n")


async def test_a_symbolic_link_to_a_file_outside_the_catalog_is_refused_and_a_configmap_layout_served(
        start_server, tmp_path):
    outside, catalog = tmp_path / "outside", tmp_path / "catalog"
    outside.mkdir()
    (outside / "smuggled.yaml").write_text(SMUGGLED)
    # A ConfigMap's layout: visible links into ..data, which links to a timestamped directory; all inside.
    (catalog / "..2026_11_24").mkdir(parents=True)
    (catalog / "..2026_11_24" / "inside.yaml").write_text(INSIDE)
    os.symlink("..2026_11_24", catalog / "..data")
    os.symlink("..data/inside.yaml", catalog / "inside.yaml")
    os.symlink(outside / "smuggled.yaml", catalog / "smuggled.yaml")            # absolute, out
    os.symlink("../outside/smuggled.yaml", catalog / "relative.yaml")           # relative, out
    server = await start_server(catalog_dirs=[catalog])

    report = await server.stub.Reload(tool_service_pb2.ReloadRequest())
    served = set(server.toolhost.registry.snapshot.names)
    assert "inside" in served and "smuggled" not in served
    problems = {os.path.basename(error.file): error.reason for error in report.errors}
    assert set(problems) == {"smuggled.yaml", "relative.yaml"}
    assert all("outside the catalog directory: refused" in message for message in problems.values())


async def test_a_file_that_is_no_tool_definition_is_reported_without_its_content(start_server, tmp_path):
    # A password file's lines parse as YAML keys; the report names the problem, never the text.
    (tmp_path / "shadow.yaml").write_text("root:$6$secrethash$abcdef:19000:0:99999:7:::\n")
    (tmp_path / "typo.yaml").write_text(INSIDE.replace("description:", "descripton:"))
    server = await start_server(catalog_dirs=[tmp_path])
    report = await server.stub.Reload(tool_service_pb2.ReloadRequest())
    problems = {os.path.basename(error.file): error.reason for error in report.errors}
    assert "secrethash" not in problems["shadow.yaml"] and "root" not in problems["shadow.yaml"]
    assert "unknown key (not shown: no identifier)" in problems["shadow.yaml"]
    # A key someone meant to write is still quoted, with the close match.
    assert "unknown key 'descripton'; did you mean 'description'?" in problems["typo.yaml"]
