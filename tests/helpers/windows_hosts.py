"""windows_list_directory against the WinRM fake (helpers.winrm_fake): what the fake's "PowerShell" prints, the
asset that points at the fake, and reading a PowerShell single-quoted string as PowerShell does.

    with FakeWinrm(tls=True, authentication="basic", username=USERNAME, password=password,
                   responder=listing_responder([file_entry("a.txt", 3)])) as fake:
        server = await start_server(winrm_credential_hosts=LOOPBACK_HOSTS, winrm_ca_file=fake.ca_file)
        await add_assets(server, fake_asset(fake))
        response = await list_directory(server, "ws-042")
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict

from toolhost.v1 import tool_service_pb2
from toolhost_server.assets.model import Asset, WinrmProfile
from toolhost_server.tools.egress import OPEN_ENV
from toolhost_server.windows.directory_listing import MAX_NAME_UTF16_UNITS
from toolhost_server.windows.powershell import MAX_ENTRIES, SINGLE_QUOTES

from helpers.calls import call
from helpers.servers import RunningServer
from helpers.winrm_fake import FakeWinrm, Responder

# Credential values are at least 8 characters (the redactor hides each one); these stand for an operator's.
USERNAME = "svc-inventory"
PASSWORD = "winrm-test-password-1"
# The winrm credential may go to loopback, where the fake listens.
LOOPBACK_HOSTS = (("winrm", ("127.0.0.0/8", "::1/128")),)
MODIFIED = "2024-01-15T10:30:00.1234567Z"
MODIFIED_ISO = "2024-01-15T10:30:00.123456Z"


def open_loopback_with_credential(monkeypatch: pytest.MonkeyPatch, username: str = USERNAME,
                                  password: str = PASSWORD, name: str = "winrm") -> None:
    """Let the tools reach loopback (the fake) and give the server the credential `name` in its environment."""
    monkeypatch.setenv(OPEN_ENV, "127.0.0.0/8,::1/128")
    monkeypatch.setenv(f"TOOLHOST_CRED_{name.upper()}_USERNAME", username)
    monkeypatch.setenv(f"TOOLHOST_CRED_{name.upper()}_PASSWORD", password)


def file_entry(name: str, size: int, modified: str = MODIFIED) -> dict[str, Any]:
    return {"name": name, "type": "file", "size": size, "modified": modified}


def directory_entry(name: str, modified: str = MODIFIED) -> dict[str, Any]:
    return {"name": name, "type": "directory", "size": None, "modified": modified}


def listing_stdout(entries: Sequence[Any]) -> str:
    """What the listing script prints for `entries`: base64 of their UTF-8 JSON (as ConvertTo-Json -Compress)."""
    return base64.b64encode(json.dumps(list(entries), separators=(",", ":")).encode("utf-8")).decode("ascii")


def largest_listing_stdout() -> str:
    """The most a real directory makes the script print: MAX_ENTRIES + 1 files of the largest size whose names
    are 255 apostrophes, each written by Windows PowerShell 5.1's ConvertTo-Json as a 6-byte \\u0027."""
    entry = file_entry("'" * MAX_NAME_UTF16_UNITS, 2**63 - 1)
    text = json.dumps([entry] * (MAX_ENTRIES + 1), separators=(",", ":")).replace("'", "\\u0027")
    return base64.b64encode(text.encode("ascii")).decode("ascii")


def listing_responder(entries: Sequence[Any]) -> Responder:
    """A host whose every directory holds `entries`."""
    stdout = listing_stdout(entries)
    return lambda script: (stdout, "", 0)


def echoing_responder(script: str) -> tuple[str, str, int]:
    """A host that lists one file named as the path the script's -LiteralPath string holds, read as PowerShell
    reads it: what a path became on the other side."""
    return listing_stdout([file_entry(literal_path(script), 1)]), "", 0


def read_single_quoted(text: str, start: int) -> tuple[str, int]:
    """The value of the PowerShell single-quoted string opening at `text[start]`, and the index after its closing
    quote, as PowerShell's tokenizer reads it: a quote character followed by another stands for the second, a
    lone one ends the string, and the five single-quote characters are alike."""
    assert text[start] in SINGLE_QUOTES, text[start:start + 20]
    value: list[str] = []
    index = start + 1
    while True:
        char = text[index]
        if char in SINGLE_QUOTES:
            if index + 1 < len(text) and text[index + 1] in SINGLE_QUOTES:
                value.append(text[index + 1])
                index += 2
                continue
            return "".join(value), index + 1
        value.append(char)
        index += 1


def literal_path(script: str) -> str:
    """The path the script's `Get-Item -LiteralPath '...'` names, as PowerShell reads it; the rest of that line
    must be ` -Force` alone, so that nothing of the path escaped the string."""
    marker = "Get-Item -LiteralPath "
    start = script.index(marker) + len(marker)
    value, end = read_single_quoted(script, start)
    assert script[end:].startswith(" -Force\n"), script[end:end + 40]
    return value


def fake_asset(fake: FakeWinrm, name: str = "ws-042", *, addresses: tuple[str, ...] = ("127.0.0.1",),
               hostname: str | None = None, **profile: Any) -> Asset:
    """An asset whose profile reaches `fake` (its TLS and authentication unless `profile` says otherwise)."""
    settings = {"port": fake.port, "ssl": fake.tls, "authentication": fake.authentication, **profile}
    return Asset(name, hostname=fake.hostname if hostname is None else hostname, addresses=addresses,
                 os="Microsoft Windows 10 Pro", platform="windows", winrm=WinrmProfile(**settings))


async def list_directory(server: RunningServer, host: str, path: str | None = None,
                         **options: Any) -> tool_service_pb2.CallToolResponse:
    arguments = {"host": host} if path is None else {"host": host, "path": path}
    return await call(server, "windows_list_directory", arguments, **options)


def structured(response: tool_service_pb2.CallToolResponse) -> dict[str, Any]:
    """The structured output, as JSON types (integers stay integers)."""
    return json.loads(json.dumps(MessageToDict(response.structured_output)), parse_float=_number)


def _number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() else value
