"""windows_list_directory under attack: an asset editor pointing a credential somewhere else, a caller's path
trying to become PowerShell code, and a password that must leave no trace but the Authorization the host needs.

The asset inventory is editable by `manage_assets` holders; the credentials and winrm_credential_hosts are the
operator's. So everything an asset says (hostname, addresses, port, TLS, authentication) is checked before the
credential goes anywhere, and these tests check that the fake host saw nothing when a call was refused.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import secrets
import tracemalloc

import grpc
import pytest

from toolhost_server.config import ConfigError, load_config
from toolhost_server.tools.egress import OPEN_ENV
from toolhost_server.windows.credential_hosts import CredentialHosts, HostGlob, parse_setting
from toolhost_server.windows.directory_listing import (
    MAX_LISTING_JSON_BYTES,
    MAX_LISTING_OUTPUT_BYTES,
    InvalidListingError,
    parse_listing,
)
from toolhost_server.windows.powershell import MAX_ENTRIES, list_directory_script

from helpers.asset_tools import add_assets
from helpers.otlp import otlp_receiver
from helpers.windows_hosts import (
    LOOPBACK_HOSTS,
    USERNAME,
    echoing_responder,
    fake_asset,
    list_directory,
    listing_responder,
    open_loopback_with_credential,
    structured,
)
from helpers.winrm_fake import FakeWinrm

CANARY = "canary-" + secrets.token_hex(12)
# Every form the password could leak in: plain, inside a basic Authorization header, base64 alone, JSON-escaped.
CANARY_FORMS = (CANARY, base64.b64encode(f"{USERNAME}:{CANARY}".encode()).decode(),
                base64.b64encode(CANARY.encode()).decode()[:-4], json.dumps(CANARY)[1:-1])

# Paths that try to end the string and run code: each of the five single quotes, separators, subexpressions,
# backticks, newlines, percent signs, and Unicode.
INJECTION_PATHS = (
    "C:\\x'; Remove-Item -Recurse -Force C:\\; '",
    "C:\\x\u2019; Stop-Computer -Force; \u2019",
    "C:\\x\u2018); Stop-Computer; (\u2018",
    "C:\\x\u201a; evil; \u201a",
    "C:\\x\u201b; evil; \u201b",
    "C:\\x'\u2019'\u2018''",
    "C:\\$(Stop-Computer)\\${env:USERNAME}\\$null",
    "C:\\`'`; evil`",
    "C:\\a\nStop-Computer\n'\n#",
    "C:\\a\r\n'; evil; '\tb",
    "C:\\%COMSPEC% & calc | more > nul",
    "C:\\Программы\\日本語\\😀",
)


@pytest.fixture(autouse=True)
def loopback_and_credential(monkeypatch):
    open_loopback_with_credential(monkeypatch, password=CANARY)


def assert_no_canary(text: str, where: str) -> None:
    for form in CANARY_FORMS:
        assert form not in text, f"the password ({form!r}) is in {where}"


async def test_the_password_reaches_the_host_and_nothing_else(start_server, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG)  # every logger: requests', urllib3's, pyspnego's as well as the server's
    async with otlp_receiver() as (receiver, endpoint):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        with FakeWinrm(tls=True, authentication="basic", username=USERNAME, password=CANARY,
                       responder=listing_responder([])) as good, \
                FakeWinrm(tls=True, authentication="basic", username=USERNAME, password="another-password",
                          responder=listing_responder([])) as refusing:
            assert good.ca_file is not None and refusing.ca_file is not None
            server = await start_server(winrm_credential_hosts=LOOPBACK_HOSTS, winrm_ca_file=good.ca_file)
            await add_assets(server, fake_asset(good, "good"))
            ok = await list_directory(server, "good")
            server_for_refusal = await start_server(winrm_credential_hosts=LOOPBACK_HOSTS,
                                                    winrm_ca_file=refusing.ca_file)
            await add_assets(server_for_refusal, fake_asset(refusing, "refusing"))
            refused = await list_directory(server_for_refusal, "refusing")
        assert ok.success, ok.error
        assert not refused.success and refused.error.code == "AUTHENTICATION_FAILED", refused.error
        # Delivered: the host that should get the password got it, in its Authorization header.
        assert any(CANARY_FORMS[1] in r.headers.get("Authorization", "") for r in good.requests)
        for response in (ok, refused):
            spans = await receiver.trace(response.trace_id, 2)
            assert any(span.name == "execute_tool windows_list_directory" for span in spans)
        exported = b"".join(receiver.raw).decode("utf-8", "replace")
    for response, what in ((ok, "the successful call"), (refused, "the refused call")):
        assert_no_canary(str(response), f"the response of {what}")
        assert_no_canary(json.dumps(structured(response)), f"the structured output of {what}")
        assert_no_canary(response.error.message, f"the failure message of {what}")
    assert_no_canary(exported, "the exported spans")
    logged = [record for record in caplog.records]
    assert any(r.name.startswith("urllib3") for r in logged), "urllib3's DEBUG records were not captured"
    log_text = "\n".join(f"{r.name} {r.getMessage()} {r.__dict__}" for r in logged)
    assert_no_canary(log_text, "the log records")
    audits = [r.audit for r in logged if r.name == "toolhost.audit" and hasattr(r, "audit")]
    assert len(audits) == 2
    assert_no_canary(json.dumps(audits, default=str), "the audit records")


async def test_a_credential_goes_nowhere_its_operator_did_not_list(start_server):
    with FakeWinrm(tls=False, authentication="ntlm", username=USERNAME, password=CANARY,
                   responder=listing_responder([])) as fake:
        unlisted = await start_server()  # winrm_credential_hosts empty: the credential goes nowhere
        await add_assets(unlisted, fake_asset(fake))
        nowhere = await list_directory(unlisted, "ws-042")
        elsewhere = await start_server(winrm_credential_hosts=(("winrm", ("10.0.0.0/8", "*.corp.example.com")),))
        await add_assets(elsewhere, fake_asset(fake))
        outside = await list_directory(elsewhere, "ws-042")
        assert fake.connections == 0
    assert not nowhere.success and nowhere.error.code == "CREDENTIAL_HOST_DENIED"
    assert "'winrm' may be sent to no host" in nowhere.error.message
    assert "winrm_credential_hosts" in nowhere.error.message
    assert not outside.success and outside.error.code == "CREDENTIAL_HOST_DENIED"
    assert "127.0.0.1" in outside.error.message and "winrm_credential_hosts" in outside.error.message


async def test_a_trusted_hostname_does_not_vouch_for_addresses_set_on_the_asset(start_server):
    # The operator trusts *.corp.test by name; an asset editor names winhost.corp.test and lists their own
    # address.
    trusted_by_name = (("winrm", ("*.corp.test", "localhost")),)
    with FakeWinrm(tls=False, authentication="ntlm", username=USERNAME, password=CANARY,
                   responder=listing_responder([])) as fake:
        server = await start_server(winrm_credential_hosts=trusted_by_name)
        await add_assets(server, fake_asset(fake, "pointed", hostname="winhost.corp.test",
                                            addresses=("127.0.0.1",)),
                         fake_asset(fake, "resolved", hostname="localhost", addresses=()))
        pointed = await list_directory(server, "pointed")
        assert fake.connections == 0
        # The same glob admits what DNS says the name is: localhost, resolved by the server.
        resolved = await list_directory(server, "resolved")
    assert not pointed.success and pointed.error.code == "CREDENTIAL_HOST_DENIED"
    assert "never addresses set on the asset" in pointed.error.message
    assert resolved.success, resolved.error
    assert fake.scripts == [list_directory_script("C:\\")]


async def test_basic_authentication_without_tls_is_refused_before_any_connection(start_server):
    with FakeWinrm(tls=False, authentication="basic", username=USERNAME, password=CANARY,
                   responder=listing_responder([])) as fake:
        server = await start_server(winrm_credential_hosts=LOOPBACK_HOSTS)
        # Stored behind validation's back: the tool refuses it all the same.
        await add_assets(server, fake_asset(fake, ssl=False, authentication="basic"),
                         fake_asset(fake, "unresolved", ssl=False, authentication="basic", credential="nosuch"))
        response = await list_directory(server, "ws-042")
        # Refused by the tool itself, before it even resolves the credential.
        unresolved = await list_directory(server, "unresolved")
        assert fake.connections == 0 and fake.requests == []
    for refused in (response, unresolved):
        assert not refused.success and refused.error.code == "INSECURE_TRANSPORT"
        assert "ssl true" in refused.error.message


async def test_basic_authentication_needs_the_operators_ca_file_before_any_connection(start_server):
    # Basic hands over the password itself. With the system's trust store, an asset editor on the path to a
    # listed network names a hostname they hold a public certificate for (review finding 5).
    with FakeWinrm(tls=True, authentication="basic", username=USERNAME, password=CANARY,
                   responder=listing_responder([])) as fake:
        server = await start_server(winrm_credential_hosts=LOOPBACK_HOSTS)  # no winrm_ca_file
        await add_assets(server, fake_asset(fake, hostname="review-attacker.example"),
                         fake_asset(fake, "unresolved", credential="nosuch"))
        responses = [await list_directory(server, host) for host in ("ws-042", "unresolved")]
        assert fake.connections == 0 and fake.requests == []
    for response in responses:
        assert not response.success and response.error.code == "INSECURE_TRANSPORT", response.error
        assert "winrm_ca_file" in response.error.message and "ntlm" in response.error.message


async def test_a_credential_the_operator_did_not_list_is_refused_the_same_before_it_is_resolved(
        start_server, monkeypatch, caplog):
    # An asset editor names any credential: whether the server holds it, and which keys, must not show
    # (review finding 6). Only `winrm` is listed.
    monkeypatch.setenv("TOOLHOST_CRED_GITHUB_TOKEN", "ghp_not-a-real-token")
    monkeypatch.setenv("TOOLHOST_CRED_BACKUP_USERNAME", "svc-backup")
    monkeypatch.setenv("TOOLHOST_CRED_DCADMIN_USERNAME", "Administrator")
    monkeypatch.setenv("TOOLHOST_CRED_DCADMIN_PASSWORD", CANARY)
    probes = ("github", "backup", "dcadmin", "nosuch")
    with FakeWinrm(tls=False, authentication="ntlm", username=USERNAME, password=CANARY) as fake:
        server = await start_server(winrm_credential_hosts=LOOPBACK_HOSTS)
        await add_assets(server, *(fake_asset(fake, name, credential=name) for name in probes))
        responses = {name: await list_directory(server, name) for name in probes}
        assert fake.connections == 0
    shapes = set()
    for name, response in responses.items():
        assert not response.success and response.error.code == "CREDENTIAL_HOST_DENIED", (name, response.error)
        shapes.add(response.error.message.replace(name, "NAME").replace(name.upper(), "NAME"))
    assert len(shapes) == 1, shapes
    # Nothing was looked up: a lookup of a missing credential would have left its warning in the log.
    assert not [r for r in caplog.records if "missing credentials" in r.getMessage()]


async def test_which_keys_a_listed_credential_lacks_is_told_only_to_the_operators_log(start_server, monkeypatch,
                                                                                     caplog):
    monkeypatch.setenv("TOOLHOST_CRED_NOPASSWORD_USERNAME", USERNAME)
    monkeypatch.setenv("TOOLHOST_CRED_NOUSERNAME_PASSWORD", CANARY)
    listed = (("nopassword", ("127.0.0.0/8",)), ("nousername", ("127.0.0.0/8",)))
    with FakeWinrm(tls=False, authentication="ntlm", username=USERNAME, password=CANARY) as fake:
        server = await start_server(winrm_credential_hosts=listed)
        await add_assets(server, *(fake_asset(fake, name, credential=name) for name in ("nopassword", "nousername")))
        responses = {name: await list_directory(server, name) for name in ("nopassword", "nousername")}
        assert fake.connections == 0
    shapes = set()
    for name, response in responses.items():
        assert not response.success and response.error.code == "MISSING_CREDENTIALS", (name, response.error)
        assert repr(name) in response.error.message  # the credential is named, as the seed's error does
        shapes.add(response.error.message.replace(name, "NAME").replace(name.upper(), "NAME"))
    assert len(shapes) == 1, shapes
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "credential nopassword has no password" in logged and "credential nousername has no username" in logged
    assert_no_canary(logged, "the log records")


async def test_the_egress_policy_holds_even_where_the_operator_lists_the_credential(start_server):
    metadata = (("winrm", ("169.254.0.0/16", "127.0.0.0/8")),)
    server = await start_server(winrm_credential_hosts=metadata)
    with FakeWinrm(tls=False, authentication="ntlm", username=USERNAME, password=CANARY) as fake:
        await add_assets(server, fake_asset(fake, "metadata", addresses=("169.254.169.254",)),
                         fake_asset(fake, "mixed", addresses=("127.0.0.1", "169.254.169.254")))
        for host in ("metadata", "mixed"):
            response = await list_directory(server, host)
            assert not response.success and response.error.code == "EGRESS_DENIED", response.error
            assert "169.254.169.254" in response.error.message
        assert fake.connections == 0


async def test_loopback_stays_closed_unless_the_operator_opens_it(start_server, monkeypatch):
    monkeypatch.delenv(OPEN_ENV)
    server = await start_server(winrm_credential_hosts=LOOPBACK_HOSTS)
    with FakeWinrm(tls=False, authentication="ntlm", username=USERNAME, password=CANARY) as fake:
        await add_assets(server, fake_asset(fake))
        response = await list_directory(server, "ws-042")
        assert fake.connections == 0
    assert not response.success and response.error.code == "EGRESS_DENIED"


async def test_injection_paths_reach_powershell_only_as_the_literal(start_server):
    with FakeWinrm(tls=True, authentication="basic", username=USERNAME, password=CANARY,
                   responder=echoing_responder) as fake:
        server = await start_server(winrm_credential_hosts=LOOPBACK_HOSTS, winrm_ca_file=fake.ca_file)
        await add_assets(server, fake_asset(fake))
        for path in INJECTION_PATHS:
            response = await list_directory(server, "ws-042", path)
            assert response.success, (path, response.error)
            # The host read back exactly the path, and ran exactly the listing script with it.
            assert structured(response)["entries"][0]["name"] == path
            assert structured(response)["path"] == path
            assert fake.scripts[-1] == list_directory_script(path)
    # cmd.exe, which WinRM starts powershell.exe through, saw only base64.
    assert len(fake.command_lines) == len(INJECTION_PATHS)
    for command_line in fake.command_lines:
        assert re.fullmatch(r"powershell\.exe( -\w+)* -EncodedCommand [A-Za-z0-9+/]+={0,2}", command_line,
                            re.IGNORECASE), command_line


async def test_a_path_that_would_make_the_host_connect_elsewhere_is_refused_before_any_connection(start_server):
    # UNC, device and provider paths would have the Windows host open SMB or WebDAV to the caller's server with
    # the logon of the call's credential (basic keeps the password for onward connections): review finding 1.
    with FakeWinrm(tls=True, authentication="basic", username=USERNAME, password=CANARY,
                   responder=echoing_responder) as fake:
        server = await start_server(winrm_credential_hosts=LOOPBACK_HOSTS, winrm_ca_file=fake.ca_file)
        await add_assets(server, fake_asset(fake))
        for path in ("\\\\attacker.example\\share", "\\\\?\\UNC\\attacker.example\\share",
                     "Microsoft.PowerShell.Core\\FileSystem::\\\\attacker.example\\share",
                     "\\\\attacker.example@SSL@443\\DavWWWRoot", "//attacker.example/share"):
            response = await list_directory(server, "ws-042", path)
            assert not response.success and response.error.code == "INVALID_PATH", (path, response.error)
            assert "drive letter" in response.error.message
        assert fake.connections == 0 and fake.scripts == []


@pytest.mark.parametrize("path", ["C:\\a\x00b", "C:\\a\x1b[2J", "C:\\a\x9b", "C:\\" + "a" * 1022])
async def test_paths_with_control_characters_or_too_long_are_the_callers_mistake(start_server, path):
    server = await start_server(winrm_credential_hosts=LOOPBACK_HOSTS)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await list_directory(server, "ws-042", path)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


# --- winrm_credential_hosts, rule by rule -----------------------------------------------------------------------


def hosts(*entries: str) -> CredentialHosts:
    return CredentialHosts.from_setting(parse_setting({"winrm": list(entries)}))


def test_a_cidr_admits_addresses_however_found_and_every_one_must_be_admitted():
    rule = hosts("10.20.0.0/16", "2001:db8::/32")
    for from_dns in (True, False):
        assert rule.refusal("winrm", "anything.example.com", ["10.20.3.4", "2001:db8::7"], from_dns) == ""
        assert "10.21.0.1" in rule.refusal("winrm", "anything.example.com", ["10.20.3.4", "10.21.0.1"], from_dns)
    # Judged strictly as written: an IPv4-mapped IPv6 address is not admitted by an IPv4 network.
    assert rule.refusal("winrm", "h", ["::ffff:10.20.0.1"], True) != ""


def test_a_host_glob_matches_within_one_label_ignoring_case_and_a_final_dot():
    glob = HostGlob.parse("WS-*.Corp.Example.com.")
    assert glob.matches("ws-042.corp.example.com")
    for other in ("ws-.corp.example.com", "ws-1.x.corp.example.com", "corp.example.com",
                  "ws-1.corp.example.com.evil.net", "evil-ws-1.corp.example.com", "ws-1.corpxexample.com"):
        assert not glob.matches(other), other
    rule = hosts("*.corp.example.com")
    assert rule.refusal("winrm", "WS1.CORP.EXAMPLE.COM.", ["10.9.9.9"], from_dns=True) == ""
    assert rule.refusal("winrm", "a.b.corp.example.com", ["10.9.9.9"], from_dns=True) != ""


def test_a_glob_never_admits_an_address_written_as_the_hostname():
    rule = hosts("*.corp.example.com")
    assert rule.refusal("winrm", "10.9.9.9", ["10.9.9.9"], from_dns=True) != ""


def test_each_credential_has_its_own_list():
    both = CredentialHosts.from_setting(parse_setting("winrm=10.0.0.0/8;dcadmin=*.dc.example.com"))
    assert both.refusal("winrm", "x", ["10.1.1.1"], True) == ""
    assert both.refusal("dcadmin", "x", ["10.1.1.1"], True) != ""
    assert both.refusal("dcadmin", "dc1.dc.example.com", ["10.1.1.1"], True) == ""
    assert "no entry" in both.refusal("other", "dc1.dc.example.com", ["10.1.1.1"], True)


@pytest.mark.parametrize("glob", ["*.com", "*-*.com", "*.*.com", "ws*", "*.co.uk", "*.com.au", "*.ne.jp", "*.me.uk",
                                  "*.uk.com", "*.gob.mx", "*.github.io", "*.duckdns.org", "x-*.github.io"])
def test_a_host_glob_over_a_public_suffix_stops_the_server(glob):
    # '*.com' would send the credential to any .com host whose DNS the attacker controls (review finding 8); the
    # Public Suffix List's private section too: anyone gets a github.io or duckdns.org name (second review, A).
    with pytest.raises(ConfigError, match="name your organisation's own domain"):
        load_config(environ={"TOOLHOST_WINRM_CREDENTIAL_HOSTS": f"winrm=10.0.0.0/8,{glob}"})


# --- a hostile host's reply -------------------------------------------------------------------------------------


def _filled(item: bytes, size: int) -> str:
    """base64 of a JSON list of `item` repeated to `size` bytes."""
    body = (b"[" + item * ((size - 2) // len(item))).rstrip(b",") + b"]"
    return base64.b64encode(body).decode("ascii")


@pytest.mark.parametrize("item, why", [
    (b"{},", "JSON objects"),
    (b"[],", "nests JSON lists"),
    (b"1.5,", "more JSON values"),
    (b'"",', "quote characters"),
    # Braces inside strings as well: few enough quotes to pass that count, so the objects are counted with the
    # strings left out.
    (b'{"a":"' + b"{" * 200 + b'"},', "JSON objects"),
])
def test_a_hostile_listing_costs_memory_of_its_size_not_of_the_objects_its_json_would_make(item, why):
    # Each `{}` would be a Python dict of ~64 bytes for 3 bytes of JSON (review finding 3: 600 MiB for a reply
    # of 32 MiB). 6 MiB of JSON here, refused by counting before json.loads builds anything.
    stdout = _filled(item, 6 * 1024 * 1024)
    tracemalloc.start()
    try:
        with pytest.raises(InvalidListingError, match=why):
            parse_listing(stdout)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * len(stdout), f"parsing held {peak} bytes for {len(stdout)} of output"


def test_output_past_what_the_largest_listing_takes_is_refused_unread():
    with pytest.raises(InvalidListingError, match="more than"):
        parse_listing("A" * (MAX_LISTING_OUTPUT_BYTES + 1))
    # Within the output's bound, JSON past what 10,001 entries take is refused as well (a host's line breaks
    # are allowed for, JSON bytes are not).
    with pytest.raises(InvalidListingError, match="bytes of JSON"):
        parse_listing(_filled(b"0,", MAX_LISTING_JSON_BYTES + 16))


async def test_a_host_answering_with_a_hostile_listing_is_a_protocol_error(start_server):
    stdout = _filled(b"{},", 3 * (MAX_ENTRIES + 2) + 2)  # one object more than the script prints
    with FakeWinrm(tls=True, authentication="basic", username=USERNAME, password=CANARY,
                   responder=lambda script: (stdout, "", 0)) as fake:
        server = await start_server(winrm_credential_hosts=LOOPBACK_HOSTS, winrm_ca_file=fake.ca_file)
        await add_assets(server, fake_asset(fake))
        response = await list_directory(server, "ws-042")
    assert not response.success and response.error.code == "PROTOCOL_ERROR", response.error
    assert f"{MAX_ENTRIES + 2} JSON objects" in response.error.message
