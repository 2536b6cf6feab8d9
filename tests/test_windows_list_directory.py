"""windows_list_directory through a real server against the WinRM fake (a WS-Management endpoint on 127.0.0.1):
the asset found by name or hostname, the profile and credential merged, the listing read back, and each way it
fails. The attacks (injection, where a credential may go, the canary) are in security/test_security_winrm.py.
"""

from __future__ import annotations

import base64
import json
import logging
import threading

import pytest
from google.protobuf.json_format import MessageToDict

from toolhost_server.assets.model import Asset, WinrmProfile
from toolhost_server.config import ConfigError, load_config
from toolhost_server.credentials.resolved import Credential
from toolhost_server.tools import windows_list_directory
from toolhost_server.tools.windows_list_directory import MAX_REMOTE_OUTPUT_BYTES
from toolhost_server.windows.connection_plan import merged_login
from toolhost_server.windows.directory_listing import (
    MAX_NAME_UTF16_UNITS,
    InvalidListingError,
    parse_listing,
    quotable,
    shown_name,
)
from toolhost_server.windows.powershell import MAX_ENTRIES, list_directory_script

from helpers.asset_tools import add_assets
from helpers.windows_hosts import (
    LOOPBACK_HOSTS,
    MODIFIED_ISO,
    PASSWORD,
    USERNAME,
    directory_entry,
    fake_asset,
    file_entry,
    largest_listing_stdout,
    list_directory,
    listing_responder,
    listing_stdout,
    open_loopback_with_credential,
    structured,
)
from helpers.winrm_fake import FakeWinrm

ENTRIES = [directory_entry("Program Files"), directory_entry("Users"), file_entry("pagefile.sys", 4_294_967_296),
           file_entry("notes über €.txt", 0, "2023-12-31T23:59:59.9999999+00:00")]
LOG = logging.getLogger(__name__)


@pytest.fixture(autouse=True)
def loopback_and_credential(monkeypatch):
    open_loopback_with_credential(monkeypatch)


async def test_basic_over_tls_lists_the_directory_with_the_servers_credential(start_server):
    with FakeWinrm(tls=True, authentication="basic", username=USERNAME, password=PASSWORD,
                   responder=listing_responder(ENTRIES)) as fake:
        assert fake.ca_file is not None
        server = await start_server(winrm_credential_hosts=LOOPBACK_HOSTS, winrm_ca_file=fake.ca_file)
        await add_assets(server, fake_asset(fake))
        response = await list_directory(server, "WS-042", "C:\\")

    assert response.success, response.error
    assert structured(response) == {
        "host": "ws-042", "hostname": "winhost.test", "path": "C:\\", "truncated": False,
        "entries": [
            {"name": "Program Files", "type": "directory", "size": None, "modified": MODIFIED_ISO},
            {"name": "Users", "type": "directory", "size": None, "modified": MODIFIED_ISO},
            {"name": "pagefile.sys", "type": "file", "size": 4_294_967_296, "modified": MODIFIED_ISO},
            {"name": "notes über €.txt", "type": "file", "size": 0, "modified": "2023-12-31T23:59:59.999999Z"},
        ]}
    lines = response.output.splitlines()
    assert lines[0] == '"C:\\\\" on ws-042: 4 entries'
    assert lines[1].split() == ["<DIR>", MODIFIED_ISO, "Program", "Files"]
    assert lines[3].split() == ["4,294,967,296", MODIFIED_ISO, "pagefile.sys"]
    # What went over the wire: the profile's port and TLS, the hostname as SNI and Host, basic auth with the
    # credential, and exactly the listing script.
    assert fake.scripts == [list_directory_script("C:\\")]
    authorized = [r for r in fake.requests if r.action]
    assert authorized and all(r.sni == "winhost.test" for r in authorized)
    assert all(r.headers["Host"] == f"winhost.test:{fake.port}" for r in authorized)
    basic = "Basic " + base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
    assert all(r.headers["Authorization"] == basic for r in authorized)


async def test_ntlm_over_http_is_encrypted_and_takes_the_profiles_domain(start_server):
    with FakeWinrm(tls=False, authentication="ntlm", username=USERNAME, password=PASSWORD, domain="CORP",
                   responder=listing_responder([file_entry("a.txt", 3)])) as fake:
        server = await start_server(winrm_credential_hosts=LOOPBACK_HOSTS)
        await add_assets(server, fake_asset(fake, domain="CORP"))
        response = await list_directory(server, "ws-042", "D:\\data")

    assert response.success, response.error
    assert structured(response)["entries"] == [{"name": "a.txt", "type": "file", "size": 3, "modified": MODIFIED_ISO}]
    assert fake.scripts == [list_directory_script("D:\\data")]
    soap = [r for r in fake.requests if r.action]
    assert soap and all(r.encrypted for r in soap)
    assert not any(PASSWORD.encode() in r.raw_body or b"<s:Envelope" in r.raw_body for r in fake.requests)


def test_the_domain_comes_from_the_profile_else_the_credential_and_never_twice():
    credential = Credential("winrm", "environment", {"username": "svc-inventory", "password": PASSWORD,
                                                     "domain": "CREDENTIALDOMAIN"})
    asset = Asset("ws-042")
    assert merged_login(asset, credential, LOG).username == "CREDENTIALDOMAIN\\svc-inventory"
    with_domain = Asset("ws-042", winrm=WinrmProfile(domain="CORP"))
    assert merged_login(with_domain, credential, LOG).username == "CORP\\svc-inventory"
    for written in ("OTHER\\svc-inventory", "svc-inventory@corp.example.com"):
        named = Credential("winrm", "environment", {"username": written, "password": PASSWORD})
        assert merged_login(with_domain, named, LOG).username == written
    plain = Credential("winrm", "environment", {"username": "svc-inventory", "password": PASSWORD})
    login = merged_login(asset, plain, LOG)
    assert (login.username, login.password, login.authentication) == ("svc-inventory", PASSWORD, "ntlm")
    assert PASSWORD not in repr(login)


async def test_a_host_is_an_assets_name_then_its_hostname_ignoring_case(start_server):
    with FakeWinrm(tls=False, authentication="ntlm", username=USERNAME, password=PASSWORD,
                   responder=listing_responder([])) as fake:
        server = await start_server(winrm_credential_hosts=LOOPBACK_HOSTS)
        # ws-043's hostname is ws-042's name: the name wins.
        await add_assets(server, fake_asset(fake, "ws-042", hostname="ws-042.corp.example.com"),
                         fake_asset(fake, "ws-043", hostname="WS-042"))
        by_name = await list_directory(server, "ws-042")
        by_hostname = await list_directory(server, "WS-042.Corp.Example.COM")

    for response in (by_name, by_hostname):
        assert response.success, response.error
        assert structured(response)["host"] == "ws-042"
        assert structured(response)["hostname"] == "ws-042.corp.example.com"
        assert structured(response)["entries"] == [] and structured(response)["path"] == "C:\\"
    assert by_name.output == '"C:\\\\" on ws-042: empty'
    assert fake.scripts == [list_directory_script("C:\\")] * 2


async def test_an_unknown_host_names_close_ones_and_a_shared_hostname_is_ambiguous(start_server):
    server = await start_server(winrm_credential_hosts=LOOPBACK_HOSTS)
    await add_assets(server, Asset("ws-042", hostname="shared.corp.example.com"),
                     Asset("ws-043", hostname="shared.corp.example.com"))
    unknown = await list_directory(server, "ws-04")
    assert not unknown.success and unknown.error.code == "ASSET_NOT_FOUND"
    assert "'ws-04'" in unknown.error.message and "ws-042" in unknown.error.message
    ambiguous = await list_directory(server, "SHARED.corp.example.com")
    assert not ambiguous.success and ambiguous.error.code == "AMBIGUOUS_HOST"
    assert "ws-042, ws-043" in ambiguous.error.message


async def test_a_missing_credential_is_named_without_saying_where_the_server_looked(start_server, tmp_path):
    credentials_dir = tmp_path / "secret-credentials-dir"
    credentials_dir.mkdir()
    # Listed by the operator (else CREDENTIAL_HOST_DENIED before any lookup), but held nowhere.
    server = await start_server(winrm_credential_hosts=(("fileserver", ("127.0.0.0/8",)),),
                                credentials_dir=str(credentials_dir))
    await add_assets(server, Asset("ws-042", addresses=("127.0.0.1",), winrm=WinrmProfile(credential="fileserver")))
    response = await list_directory(server, "ws-042")
    assert not response.success and response.error.code == "MISSING_CREDENTIALS"
    message = response.error.message
    assert "'fileserver'" in message and "TOOLHOST_CRED_FILESERVER_USERNAME" in message
    assert "toolhost credentials set fileserver" in message
    assert str(credentials_dir) not in message and "not found in" not in message
    assert response.output == "" and not response.HasField("structured_output")


async def test_a_credential_without_a_password_is_missing_credentials_and_the_log_says_which_key(
        start_server, monkeypatch, caplog):
    monkeypatch.delenv("TOOLHOST_CRED_WINRM_PASSWORD")
    server = await start_server(winrm_credential_hosts=LOOPBACK_HOSTS)
    await add_assets(server, Asset("ws-042", addresses=("127.0.0.1",)))
    response = await list_directory(server, "ws-042")
    assert not response.success and response.error.code == "MISSING_CREDENTIALS"
    message = response.error.message
    assert "'winrm'" in message and "incomplete" in message and "TOOLHOST_CRED_WINRM_USERNAME" in message
    assert "no password" not in message  # which key is missing is the operator's to read
    assert any("credential winrm has no password" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("stderr, exit_code, code, quoted", [
    ("System.Management.Automation.ItemNotFoundException\nCannot find path 'C:\\nope' because it does not exist.",
     2, "PATH_NOT_FOUND", "PowerShell on the host: Cannot find path 'C:\\nope' because it does not exist."),
    ("System.UnauthorizedAccessException\nAccess to the path 'C:\\secret' is denied.", 2, "ACCESS_DENIED",
     "is denied."),
    ("System.IO.IOException\nThe device is not ready.\x1b[2J", 2, "REMOTE_ERROR",
     "The device is not ready.\\u001b[2J"),
    ("NotADirectory", 3, "NOT_A_DIRECTORY", "something other than a directory"),
    ("", 1, "REMOTE_ERROR", "exit status 1 and wrote no error"),
])
async def test_powershells_errors_become_codes_with_their_text_escaped(start_server, stderr, exit_code, code,
                                                                        quoted):
    with FakeWinrm(tls=False, authentication="ntlm", username=USERNAME, password=PASSWORD,
                   responder=lambda script: ("", stderr, exit_code)) as fake:
        server = await start_server(winrm_credential_hosts=LOOPBACK_HOSTS)
        await add_assets(server, fake_asset(fake))
        response = await list_directory(server, "ws-042", "C:\\nope")
    assert not response.success and response.error.code == code, response.error
    assert quoted in response.error.message
    assert "\x1b" not in response.error.message


@pytest.mark.parametrize("stdout", [
    "this is not base64!",
    base64.b64encode(b"\xff\xfe not utf-8").decode(),
    base64.b64encode(b'{"value": [], "Count": 0}').decode(),
    listing_stdout([{"name": "a", "type": "file", "size": "12", "modified": "2024-01-15T10:30:00Z"}]),
])
async def test_output_that_is_not_the_scripts_is_a_protocol_error(start_server, stdout):
    with FakeWinrm(tls=False, authentication="ntlm", username=USERNAME, password=PASSWORD,
                   responder=lambda script: (stdout, "", 0)) as fake:
        server = await start_server(winrm_credential_hosts=LOOPBACK_HOSTS)
        await add_assets(server, fake_asset(fake))
        response = await list_directory(server, "ws-042")
    assert not response.success and response.error.code == "PROTOCOL_ERROR", response.error
    assert "not as the listing script does" in response.error.message


async def test_a_directory_of_more_than_ten_thousand_entries_is_truncated(start_server):
    entries = [file_entry(f"f{index:05}", index) for index in range(MAX_ENTRIES + 1)]
    with FakeWinrm(tls=False, authentication="ntlm", username=USERNAME, password=PASSWORD,
                   responder=listing_responder(entries)) as fake:
        server = await start_server(winrm_credential_hosts=LOOPBACK_HOSTS, max_output_bytes=4 * 1024 * 1024)
        await add_assets(server, fake_asset(fake))
        response = await list_directory(server, "ws-042")
    assert response.success, response.error
    listed = structured(response)
    assert listed["truncated"] is True and len(listed["entries"]) == MAX_ENTRIES
    assert listed["entries"][-1]["name"] == f"f{MAX_ENTRIES - 1:05}"
    assert response.output.splitlines()[0] == (
        f'"C:\\\\" on ws-042: {MAX_ENTRIES} entries (truncated: the directory holds more; at most {MAX_ENTRIES} '
        "are listed)")


async def test_the_largest_listing_a_real_directory_makes_is_read_whole(start_server):
    stdout = largest_listing_stdout()
    with FakeWinrm(tls=True, authentication="basic", username=USERNAME, password=PASSWORD,
                   responder=lambda script: (stdout, "", 0)) as fake:
        server = await start_server(winrm_credential_hosts=LOOPBACK_HOSTS, winrm_ca_file=fake.ca_file)
        await add_assets(server, fake_asset(fake))
        response = await list_directory(server, "ws-042")
    assert response.success, response.error
    listed = structured(response)
    assert listed["truncated"] is True  # of the 10,001 read, those within the server's max_output_bytes
    first = listed["entries"][0]
    assert (first["name"], first["type"], first["modified"]) == ("'" * MAX_NAME_UTF16_UNITS, "file", MODIFIED_ISO)
    # The structured output's numbers are doubles; the text shows the size exactly.
    assert response.output.splitlines()[1].split()[0] == f"{2**63 - 1:,}"


def test_what_the_tool_reads_from_a_host_is_what_the_largest_real_listing_needs():
    # The cap follows from the limits (directory_listing.py): at least the largest real listing, and not much
    # more, so a hostile host cannot make each call hold more than a real one would.
    largest = len(largest_listing_stdout())
    assert largest <= MAX_REMOTE_OUTPUT_BYTES <= largest * 1.05


def test_names_holding_braces_brackets_and_commas_are_entries_like_any_other():
    # Legal in Windows file names, and what the shape check counts outside strings only.
    names = ["{[,]}" * 51, "a,b", "[x]", "{}"]
    entries = [file_entry(name, 1) for name in names] * 2500 + [file_entry("{,", 2)]
    listing = parse_listing(listing_stdout(entries))
    assert [entry.name for entry in listing.entries[:4]] == names
    assert len(listing.entries) == MAX_ENTRIES and listing.truncated


async def test_the_listing_is_parsed_in_a_worker_thread_not_on_the_event_loop(start_server, monkeypatch):
    threads: list[threading.Thread] = []

    def recording_parse_listing(stdout: str) -> object:
        threads.append(threading.current_thread())
        return parse_listing(stdout)

    monkeypatch.setattr(windows_list_directory, "parse_listing", recording_parse_listing)
    with FakeWinrm(tls=False, authentication="ntlm", username=USERNAME, password=PASSWORD,
                   responder=listing_responder(ENTRIES)) as fake:
        server = await start_server(winrm_credential_hosts=LOOPBACK_HOSTS)
        await add_assets(server, fake_asset(fake))
        response = await list_directory(server, "ws-042")
    assert response.success, response.error
    assert len(structured(response)["entries"]) == len(ENTRIES)
    assert len(threads) == 1 and threads[0] is not threading.main_thread()


async def test_entries_are_cut_to_fit_the_servers_max_output_bytes(start_server):
    entries = [file_entry(f"{index:04}-" + "x" * 200, index) for index in range(200)]
    with FakeWinrm(tls=False, authentication="ntlm", username=USERNAME, password=PASSWORD,
                   responder=listing_responder(entries)) as fake:
        server = await start_server(winrm_credential_hosts=LOOPBACK_HOSTS, max_output_bytes=16 * 1024)
        await add_assets(server, fake_asset(fake))
        response = await list_directory(server, "ws-042")
    assert response.success, response.error
    listed = structured(response)
    assert listed["truncated"] is True and 0 < len(listed["entries"]) < 200
    assert [e["name"] for e in listed["entries"]] == [e["name"] for e in entries[:len(listed["entries"])]]
    assert not response.truncated  # the tool kept under the limit itself, whole lines only
    assert len(json.dumps(listed, ensure_ascii=False).encode()) <= 16 * 1024


async def test_a_port_nobody_listens_on_is_connection_failed(start_server):
    with FakeWinrm(tls=False, authentication="ntlm", username=USERNAME, password=PASSWORD) as fake:
        closed = fake_asset(fake)
    # The fake has stopped: its port refuses connections now.
    server = await start_server(winrm_credential_hosts=LOOPBACK_HOSTS)
    await add_assets(server, closed)
    response = await list_directory(server, "ws-042")
    assert not response.success and response.error.code == "CONNECTION_FAILED", response.error


async def test_a_host_that_never_answers_fails_within_the_tools_own_time(start_server):
    with FakeWinrm(tls=False, authentication="ntlm", username=USERNAME, password=PASSWORD, mode="silent") as fake:
        # A short limit for every call: the tool must report its own failure before the pipeline stops it.
        server = await start_server(winrm_credential_hosts=LOOPBACK_HOSTS, max_call_seconds=2)
        await add_assets(server, fake_asset(fake))
        response = await list_directory(server, "ws-042")
        assert fake.connections >= 1
    assert not response.success and response.error.code in ("CONNECTION_FAILED", "TIMEOUT"), response.error
    assert "ran longer than" not in response.error.message  # the tool's own answer, not the pipeline's


async def test_the_tool_is_served_with_the_seeds_fields(start_server):
    from toolhost.v1 import tool_service_pb2

    server = await start_server()
    tool = (await server.stub.GetTool(tool_service_pb2.GetToolRequest(name="windows_list_directory"))).tool
    assert tool.category == "asset" and tool.platform == "windows"
    assert tool.annotations.read_only and tool.annotations.open_world and not tool.annotations.destructive
    schema = MessageToDict(tool.input_schema)
    assert schema["required"] == ["host"]
    assert schema["properties"]["path"]["default"] == "C:\\" and schema["properties"]["path"]["maxLength"] == 1024


# --- the listing, read defensively ---------------------------------------------------------------------------


def test_a_listing_is_checked_entry_by_entry():
    listing = parse_listing(listing_stdout(ENTRIES))
    assert [entry.name for entry in listing.entries] == ["Program Files", "Users", "pagefile.sys",
                                                         "notes über €.txt"]
    assert not listing.truncated
    # Line breaks in the base64 (a host wrapping its output) are whitespace to skip.
    wrapped = listing_stdout(ENTRIES)
    assert parse_listing("\r\n".join(wrapped[i:i + 76] for i in range(0, len(wrapped), 76))) == listing


@pytest.mark.parametrize("document, why", [
    ({"name": "a"}, "not the list"),
    ([["a"]], "nests JSON lists"),
    ([{"a": "b"}], "entry 0 is not an object"),
    ([{**file_entry("a", 1), "extra": 1}], "entry 0 is not an object"),
    ([file_entry("", 1)], "the name"),
    ([file_entry("a" * (MAX_NAME_UTF16_UNITS + 1), 1)], "the name"),
    # 128 characters outside the BMP are 256 UTF-16 units, one more than a Windows file name holds.
    ([file_entry("\U0001F600" * 128, 1)], "the name"),
    ([file_entry("a", -1)], "without a size"),
    ([file_entry("a", True)], "without a size"),
    ([file_entry("a", 2**63)], "without a size"),
    ([{**directory_entry("d"), "size": 4096}], "a directory with a size"),
    ([{**file_entry("a", 1), "type": "symlink"}], "neither file nor directory"),
    ([file_entry("a", 1, "/Date(1705314600000)/")], "not an ISO 8601"),
    ([file_entry("a", 1, "2024-01-15T10:30:00")], "no time zone"),
    ([directory_entry("ok"), file_entry("a", 1, 1705314600)], "entry 1: the modification time"),
])
def test_a_listing_that_is_not_the_scripts_is_refused_whole(document, why):
    with pytest.raises(InvalidListingError, match=why):
        parse_listing(listing_stdout(document) if isinstance(document, list) else
                      base64.b64encode(json.dumps(document).encode()).decode())


def test_deeply_nested_json_is_refused_not_a_crash():
    with pytest.raises(InvalidListingError):
        parse_listing(base64.b64encode(b"[" * 100_000 + b"]" * 100_000).decode())


def test_names_a_terminal_would_obey_are_quoted_in_the_text_output():
    assert shown_name("Program Files") == "Program Files"
    assert shown_name("evil\x1b]0;x\x07") == '"evil\\u001b]0;x\\u0007"'
    assert shown_name("txt.\u202eexe") == '"txt.\\u202eexe"'
    assert shown_name(" padded ") == '" padded "'
    assert quotable("a\nb\x1b" + "c" * 500, 20) == "a\\nb\\u001bccccccccc…"


# --- the settings ----------------------------------------------------------------------------------------------


def test_winrm_credential_hosts_come_from_the_file_the_environment_or_a_flag(tmp_path):
    config_file = tmp_path / "toolhost.yaml"
    config_file.write_text("winrm_credential_hosts:\n  winrm: [10.20.0.0/16, '*.corp.example.com']\n"
                           "  dcadmin: 'dc-*.corp.example.com, 10.0.0.5'\n")
    from_file = load_config(environ={}, config_file=str(config_file))
    assert from_file.winrm_credential_hosts == (("dcadmin", ("dc-*.corp.example.com", "10.0.0.5")),
                                                ("winrm", ("10.20.0.0/16", "*.corp.example.com")))
    from_environment = load_config(environ={"TOOLHOST_WINRM_CREDENTIAL_HOSTS":
                                            "winrm=10.20.0.0/16,*.corp.example.com; dcadmin=10.0.0.5"})
    assert from_environment.winrm_credential_hosts == (("dcadmin", ("10.0.0.5",)),
                                                       ("winrm", ("10.20.0.0/16", "*.corp.example.com")))
    from_flag = load_config(flags={"winrm_credential_hosts": "winrm=::1/128"}, environ={})
    assert from_flag.winrm_credential_hosts == (("winrm", ("::1/128",)),)


@pytest.mark.parametrize("value, why", [
    ("winrm", "must be NAME=ENTRY"),
    ("Win_RM=10.0.0.0/8", "is not a credential name"),
    ("winrm=10.0.0.0/8;winrm=10.1.0.0/16", "twice"),
    ("winrm=", "lists no network"),
    ("winrm=*", "any domain"),
    ("winrm=*.com", "any domain under 'com'"),
    ("winrm=10.0.0.0/8,*.co.uk", "any domain under 'co.uk'"),
    ("winrm=ws*", "name your organisation's own domain"),
    ("winrm=10.0.0.*", "write a CIDR"),
    ("winrm=host name.example.com", "neither a CIDR network nor a host glob"),
])
def test_a_bad_winrm_credential_hosts_entry_stops_the_server(value, why):
    with pytest.raises(ConfigError, match=why):
        load_config(environ={"TOOLHOST_WINRM_CREDENTIAL_HOSTS": value})


def test_host_globs_that_name_an_organisations_domain_are_accepted():
    value = ("winrm=*.corp.example.com,ws-*.example.co.uk,*.corp.de,a.*.example.com,localhost,winhost.test,"
             "*.ours.github.io")
    assert len(load_config(environ={"TOOLHOST_WINRM_CREDENTIAL_HOSTS": value}).winrm_credential_hosts[0][1]) == 7


def test_winrm_ca_file_must_exist(tmp_path):
    with pytest.raises(ConfigError, match="not an existing file"):
        load_config(environ={"TOOLHOST_WINRM_CA_FILE": str(tmp_path / "missing.pem")})
    ca_file = tmp_path / "ca.pem"
    ca_file.write_text("-----BEGIN CERTIFICATE-----\n")
    assert load_config(environ={"TOOLHOST_WINRM_CA_FILE": str(ca_file)}).winrm_ca_file == str(ca_file)
