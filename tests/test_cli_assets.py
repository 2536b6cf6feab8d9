"""`toolhost assets` as a real child process against a real server: create, list with filters, get, update,
delete, import from files and stdin (all or nothing, problems by line), the refusals a person gets in sentences,
and what others wrote shown on a terminal with its control characters escaped."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from toolhost_server.auth import hash_token

from helpers.cli import cli_env, toolhost
from helpers.servers import RunningServer, ServerFactory
from helpers.terminal import toolhost_on_terminals


@pytest.fixture
async def server(start_server: ServerFactory) -> RunningServer:
    return await start_server()


def target(server: RunningServer) -> tuple[str, str]:
    return ("--target", server.target)


async def test_create_list_get_update_delete(server: RunningServer):
    code, out, err = await toolhost(
        "assets", "create", "ws-042", "--hostname", "ws-042.corp.example.com", "--address", "10.0.0.42",
        "--address", "10.0.1.42", "--os", "Microsoft Windows 10 Pro", "--platform", "windows", "--site", "berlin",
        "--tag", "finance", "--tag", "vip", "--winrm-domain", "CORP", "--winrm-credential", "winrmberlin",
        *target(server))
    assert (code, out) == (0, "created asset ws-042\n"), err
    code, out, err = await toolhost("assets", "create", "db-001", "--os", "Ubuntu 24.04", "--platform", "linux",
                                    "--winrm-ssl", "--winrm-authentication", "basic", *target(server))
    assert code == 0, err

    code, out, _ = await toolhost("assets", "list", *target(server), env=cli_env(COLUMNS="200"))
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["NAME", "HOSTNAME", "PLATFORM", "SITE", "TAGS", "OS"]
    assert [line.split()[0] for line in lines[1:]] == ["db-001", "ws-042"]
    code, out, _ = await toolhost("assets", "list", "--os", "windows 10", "--tag", "FINANCE", "--json",
                                  *target(server))
    [listed] = json.loads(out)
    assert listed["name"] == "ws-042" and listed["addresses"] == ["10.0.0.42", "10.0.1.42"]
    assert listed["winrm"] == {"port": 0, "ssl": False, "domain": "CORP", "credential": "winrmberlin",
                               "authentication": "ntlm"}
    code, out, err = await toolhost("assets", "list", "--name", "nothing-*", *target(server))
    assert (code, out, err) == (0, "", "no assets match\n")

    code, out, _ = await toolhost("assets", "get", "DB-001", *target(server))
    assert code == 0 and out.splitlines()[0] == "db-001"
    assert "winrm:     https port 5986 (default), basic, credential winrm" in out

    # Only the flags given change; the list flags replace the whole list.
    code, out, err = await toolhost("assets", "update", "ws-042", "--winrm-port", "5990", "--tag", "hr",
                                    "--site", "", *target(server))
    assert (code, out) == (0, "updated asset ws-042\n"), err
    code, out, _ = await toolhost("assets", "get", "ws-042", "--json", *target(server))
    asset = json.loads(out)
    assert (asset["tags"], asset["site"], asset["winrm"]["port"], asset["winrm"]["domain"], asset["os"]) == \
        (["hr"], "", 5990, "CORP", "Microsoft Windows 10 Pro")
    code, out, err = await toolhost("assets", "update", "ws-042", "--no-tags", "--no-addresses", *target(server))
    assert code == 0, err
    code, out, _ = await toolhost("assets", "get", "ws-042", "--json", *target(server))
    assert (json.loads(out)["tags"], json.loads(out)["addresses"]) == ([], [])

    code, out, err = await toolhost("assets", "delete", "ws-042", *target(server))
    assert (code, out) == (0, "deleted asset ws-042\n"), err
    code, _, err = await toolhost("assets", "get", "ws-042", *target(server))
    assert code == 2 and "NOT_FOUND" in err


async def test_refusals_name_the_field_in_sentences(server: RunningServer):
    code, out, err = await toolhost("assets", "create", "ws-1", "--winrm-authentication", "basic",
                                    "--address", "10.0.0.300", *target(server))
    assert (code, out) == (2, "")
    assert err.startswith("toolhost: INVALID_ARGUMENT: asset ws-1 was not created:\n")
    assert "  asset.winrm" in err and "ssl" in err and "  asset.addresses" in err
    code, _, err = await toolhost("assets", "update", "ws-1", *target(server))
    assert code == 2 and "nothing to change" in err
    code, _, err = await toolhost("assets", "update", "ws-1", "--tag", "x", "--no-tags", *target(server))
    assert code == 2 and "not both" in err
    code, _, err = await toolhost("assets", "create", "ws-1", "--winrm-port", "70000", *target(server))
    assert code == 2 and "is not a port" in err


CSV = """\
name,hostname,addresses,os,platform,site,tags,winrm_port,winrm_ssl,winrm_domain,winrm_credential,winrm_authentication
ws-001,ws-001.corp.example.com,10.0.0.1,Microsoft Windows 10 Pro,windows,paris,finance;vip,,,,,
ws-002,,,Microsoft Windows 11 Pro,windows,paris,,5986,true,,,basic
"""


async def test_import_from_a_file_by_its_extension_and_from_stdin(server: RunningServer, tmp_path: Path):
    document = tmp_path / "inventory.CSV"
    document.write_bytes(b"\xef\xbb\xbf" + CSV.encode())  # as a spreadsheet saves it, with a byte order mark
    code, out, err = await toolhost("assets", "import", str(document), "--dry-run", *target(server))
    assert (code, out) == (0, f"{document} is fine: importing it would create 2 assets and replace 0 assets; "
                              "nothing stored\n"), err
    code, out, _ = await toolhost("assets", "list", *target(server))
    assert out == ""
    code, out, err = await toolhost("assets", "import", str(document), *target(server))
    assert (code, out) == (0, f"imported {document}: created 2 assets, replaced 0 assets\n"), err

    yaml = "- {name: ws-002, os: Windows Server 2022, site: rome}\n"
    code, out, err = await toolhost("assets", "import", "-", "--format", "yaml", *target(server),
                                    stdin=yaml.encode())
    assert (code, out) == (0, "imported -: created 0 assets, replaced 1 asset\n"), err
    code, out, _ = await toolhost("assets", "list", "--site", "rome", "--json", *target(server))
    assert [a["os"] for a in json.loads(out)] == ["Windows Server 2022"]

    code, _, err = await toolhost("assets", "import", "-", *target(server), stdin=yaml.encode())
    assert code == 2 and "--format" in err
    (tmp_path / "latin1.yaml").write_bytes("- {name: caf\xe9}\n".encode("latin-1"))
    code, _, err = await toolhost("assets", "import", str(tmp_path / "latin1.yaml"), *target(server))
    assert code == 2 and "not UTF-8" in err


async def test_a_bad_import_stores_nothing_and_lists_each_problem_with_its_line(server: RunningServer,
                                                                               tmp_path: Path):
    document = tmp_path / "inventory.csv"
    document.write_text(CSV + "bad name,,,,,,,,,,,\nws-003,,10.0.0.300,,,,,,,,,\n")
    code, out, err = await toolhost("assets", "import", str(document), *target(server))
    assert (code, out) == (2, "")
    lines = err.splitlines()
    assert lines[0] == f"toolhost: INVALID_ARGUMENT: {document} was not imported, nothing changed:"
    assert [line.split(":")[0] for line in lines[1:]] == ["  line 4", "  line 5"], err
    code, out, _ = await toolhost("assets", "list", *target(server))
    assert out == ""  # all or nothing: the two good records were not stored either


async def test_manage_assets_is_needed(start_server: ServerFactory, tmp_path: Path):
    tokens = {"caller": secrets.token_urlsafe(32), "inventory": secrets.token_urlsafe(32)}
    (tmp_path / "auth.yaml").write_text(
        "roles:\n  caller: {call: {tools: ['*']}}\n  inventory: {manage_assets: true}\ntokens:\n" + "".join(
            f"  - {{name: {role}-token, sha256: {hash_token(token)}, roles: [{role}]}}\n"
            for role, token in tokens.items()))
    server = await start_server(auth_file=str(tmp_path / "auth.yaml"))
    for role, token in tokens.items():
        (tmp_path / role).write_text(token)
    common = target(server)
    code, _, err = await toolhost("assets", "create", "ws-1", "--token-file", str(tmp_path / "caller"), *common)
    assert code == 1 and "PERMISSION_DENIED" in err and "manage_assets" in err
    code, out, err = await toolhost("assets", "create", "ws-1", "--token-file", str(tmp_path / "inventory"),
                                    *common)
    assert (code, out) == (0, "created asset ws-1\n"), err


async def test_what_others_wrote_is_escaped_on_a_terminal(server: RunningServer, tmp_path: Path):
    # A document from elsewhere whose file name holds an escape sequence, naming a CSV column of control
    # characters: on a terminal both are shown escaped, never as sequences it would run; into a pipe, the
    # file name goes as it is.
    document = tmp_path / "inventory\x1b]0;pwned\x07.csv"
    document.write_text("name,\x1b[2J\x07\nws-1,x\n")
    code, _, err = await toolhost_on_terminals("assets", "import", str(document), *target(server), env=cli_env())
    assert code == 2 and "line 1" in err and "\x1b" not in err and "\x07" not in err
    assert "\\x1b]0;pwned" in err or "\\u001b]0;pwned" in err
    code, _, err = await toolhost("assets", "import", str(document), *target(server))
    assert code == 2 and "\x1b]0;pwned\x07" in err
