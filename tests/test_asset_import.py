"""Asset validation and the import documents: what an asset may hold (names, DNS hostnames, canonical IP
addresses, one-line text, tags, a WinRM profile that never sends a password in clear), YAML and CSV read into
assets or into problems by line and field (unknown keys and columns, duplicate names, at most MAX_IMPORT_ASSETS
records and MAX_IMPORT_PROBLEMS problems), a BOM and CRLF read, and an import that stores all of a document or
none. Hostile documents are in security/test_security_asset_import.py."""

from __future__ import annotations

import pytest
from sqlalchemy import URL

from toolhost_server.assets.importing import CSV_COLUMNS, parse_assets
from toolhost_server.assets.model import (
    MAX_ADDRESSES,
    MAX_IMPORT_ASSETS,
    MAX_IMPORT_PROBLEMS,
    MAX_TAGS,
    Asset,
    AssetFilter,
    ImportProblem,
    ImportSummary,
    WinrmProfile,
)
from toolhost_server.assets.table import AssetTable
from toolhost_server.assets.validation import validate_asset
from toolhost_server.store.database import Store


def reasons(asset: Asset) -> dict[str, str]:
    """validate_asset's problems by field."""
    return {violation.pointer: violation.reason for violation in validate_asset(asset)}


def only_problems(format: str, content: str) -> list[ImportProblem]:
    assets, problems = parse_assets(format, content)
    assert problems and assets == [], "a document with problems imports nothing"
    return problems


# --- validation ----------------------------------------------------------------------------------------------


def test_a_complete_asset_is_valid():
    asset = Asset("ws-042.corp_1", hostname="ws-042.corp.example.com", addresses=("10.0.0.5", "2001:db8::5"),
                  os="Microsoft Windows 10 Pro", platform="windows", site="Berlin DC1", tags=("finance", "Straße"),
                  winrm=WinrmProfile(port=5986, ssl=True, domain="corp.example.com", credential="winrm2",
                                     authentication="basic"))
    assert validate_asset(asset) == []
    assert validate_asset(Asset("a", hostname="10.0.0.5", winrm=WinrmProfile(port=65535, domain="CORP"))) == []


@pytest.mark.parametrize("name", ["", "-ws", ".ws", "ws 1", "ws/1", "ws\\1", "ws\x00", "wś-1", "a" * 129, "ws:1"])
def test_names_outside_the_pattern_are_refused(name: str):
    assert "asset.name" in reasons(Asset(name))


@pytest.mark.parametrize(("hostname", "says"), [
    ("https://ws-042.corp.example.com", "is a URL"),
    ("ws-042.corp.example.com:5986", "winrm.port"),
    ("ws-042/wsman", "holds a path"),
    ("ws 042", "spaces or control characters"),
    ("ws-042\n.evil.example.com", "spaces or control characters"),
    ("ws-042.corp.example.com.", "trailing dot"),
    ("ws..corp", "empty label"),
    (".ws", "empty label"),
    ("-ws.corp", "neither starts nor ends with '-'"),
    ("ws_042.corp", "letters, digits and '-'"),
    ("ws@evil.example.com", "letters, digits and '-'"),
    ("a" * 64 + ".corp", "at most 63"),
    (".".join(["a" * 63] * 4) + ".ab", "at most 253"),
    ("wś.corp", "IDNA"),
    ("010.0.0.1", "IPv4 address in an unusual spelling"),
    ("167772161", "IPv4 address in an unusual spelling"),
    ("10.1", "IPv4 address in an unusual spelling"),
    ("0x0a.0.0.1", "IPv4 address in an unusual spelling"),
    ("10.0.0.0x1", "IPv4 address in an unusual spelling"),
    ("2001:db8::1", "IP addresses in addresses"),
])
def test_hostnames_that_are_no_plain_dns_name_are_refused_saying_why(hostname: str, says: str):
    reason = reasons(Asset("a", hostname=hostname)).get("asset.hostname", "")
    assert says in reason, reason


@pytest.mark.parametrize(("address", "says"), [
    ("010.0.0.1", "not an IP address"),
    ("10.0.0.256", "not an IP address"),
    ("ws-042.corp", "a DNS name belongs in hostname"),
    ("2001:DB8::1", "write 2001:db8::1"),
    ("2001:db8:0:0:0:0:0:1", "write 2001:db8::1"),
    ("fe80::1%eth0", "zone"),
    ("::ffff:10.0.0.1", "write 10.0.0.1"),
    (" 10.0.0.1", "not an IP address"),
])
def test_addresses_must_be_ip_addresses_written_the_one_canonical_way(address: str, says: str):
    reason = reasons(Asset("a", addresses=(address,))).get("asset.addresses[0]", "")
    assert says in reason, reason


def test_addresses_are_listed_once_and_at_most_max_addresses():
    assert "listed twice" in reasons(Asset("a", addresses=("10.0.0.1", "10.0.0.1")))["asset.addresses[1]"]
    too_many = tuple(f"10.0.0.{index}" for index in range(MAX_ADDRESSES + 1))
    assert f"at most {MAX_ADDRESSES}" in reasons(Asset("a", addresses=too_many))["asset.addresses"]


def test_values_compared_whole_may_not_start_or_end_with_spaces():
    assert "spaces" in reasons(Asset("a", site="berlin "))["asset.site"]
    assert "spaces" in reasons(Asset("a", tags=(" finance",)))["asset.tags[0]"]


def test_tags_are_non_empty_unique_regardless_of_case_without_the_csv_separator_and_bounded():
    found = reasons(Asset("a", tags=("Finance", "", "finance", "a;b")))
    assert "empty" in found["asset.tags[1]"]
    assert "repeats 'Finance'" in found["asset.tags[2]"]
    assert "';'" in found["asset.tags[3]"]
    too_many = tuple(f"t{index}" for index in range(MAX_TAGS + 1))
    assert f"at most {MAX_TAGS}" in reasons(Asset("a", tags=too_many))["asset.tags"]


def test_basic_authentication_needs_tls():
    found = reasons(Asset("a", winrm=WinrmProfile(authentication="basic")))
    assert found == {"asset.winrm.authentication": "basic authentication sends the password in clear without TLS: "
                                                   "set winrm.ssl or use ntlm"}
    assert reasons(Asset("a", winrm=WinrmProfile(authentication="basic", ssl=True, port=5985))) == {}


@pytest.mark.parametrize(("winrm", "field", "says"), [
    (WinrmProfile(port=-1), "asset.winrm.port", "1 to 65535"),
    (WinrmProfile(port=65536), "asset.winrm.port", "1 to 65535"),
    (WinrmProfile(authentication="kerberos"), "asset.winrm.authentication", "not one of ntlm, basic"),
    (WinrmProfile(credential="Win_RM"), "asset.winrm.credential", "not a credential name"),
    (WinrmProfile(credential="winrm-prod"), "asset.winrm.credential", "not a credential name"),
    (WinrmProfile(domain="CORP\\admin"), "asset.winrm.domain", "NetBIOS or DNS domain name"),
    (WinrmProfile(domain="corp@evil"), "asset.winrm.domain", "NetBIOS or DNS domain name"),
    (WinrmProfile(domain="-corp"), "asset.winrm.domain", "NetBIOS or DNS domain name"),
])
def test_winrm_profiles_that_cannot_be_used_are_refused_naming_the_field(winrm: WinrmProfile, field: str, says: str):
    reason = reasons(Asset("a", winrm=winrm)).get(field, "")
    assert says in reason, reason


# --- YAML ----------------------------------------------------------------------------------------------------

YAML_DOCUMENT = """\
# The Berlin office.
- name: ws-042
  hostname: ws-042.corp.example.com
  addresses: [10.0.0.42]
  os: Microsoft Windows 10 Pro
  platform: windows
  site: berlin
  tags: [finance, laptop]
  winrm: {port: 5986, ssl: true, domain: CORP, credential: winrmprod, authentication: basic}
- name: 042
  os: "Windows 11"
  winrm:
    ssl: no
- name: srv-1
  tags:
  winrm:
"""


def test_a_yaml_document_becomes_its_assets_with_text_as_written():
    assets, problems = parse_assets("yaml", YAML_DOCUMENT)
    assert problems == []
    assert assets == [
        Asset("ws-042", hostname="ws-042.corp.example.com", addresses=("10.0.0.42",), os="Microsoft Windows 10 Pro",
              platform="windows", site="berlin", tags=("finance", "laptop"),
              winrm=WinrmProfile(port=5986, ssl=True, domain="CORP", credential="winrmprod", authentication="basic")),
        Asset("042", os="Windows 11"),  # not the octal number 34
        Asset("srv-1"),
    ]
    assert parse_assets("yaml", "[]") == ([], [])


def test_yaml_problems_carry_the_line_and_path_of_the_field():
    document = """\
- name: ws-1
  colour: blue
- name: ws-2
  tags:
    - finance
    - FINANCE
  winrm:
    port: 70000
    realm: CORP
- name: WS-1
- name: ws-3
  winrm: {port: 5985x, ssl: maybe, authentication: kerberos}
  addresses: 10.0.0.1
- just text
- name: [a, b]
  name: again
"""
    assert [(p.line, p.field) for p in only_problems("yaml", document)] == [
        (2, ""), (6, "tags[1]"), (8, "winrm.port"), (9, "winrm"), (10, "name"), (12, "winrm.port"),
        (12, "winrm.ssl"), (12, "winrm.authentication"), (13, "addresses"), (14, ""), (15, "name"), (16, "name"),
    ]


def test_yaml_that_is_not_a_list_of_mappings_is_one_problem_at_its_line():
    assert only_problems("yaml", "") == [ImportProblem(0, "", "the document is empty: write a YAML list of assets, "
                                                             "for example `- {name: ws-042, os: Microsoft Windows 10 "
                                                             "Pro}`")]
    assert [p.line for p in only_problems("yaml", "name: ws-1\n")] == [1]
    assert "not valid YAML" in only_problems("yaml", "- name: ws-1\n  os: [unclosed\n")[0].message
    assert "more than one YAML document" in only_problems("yaml", "- name: a\n---\n- name: b\n")[0].message


# --- CSV -----------------------------------------------------------------------------------------------------


def test_a_csv_document_becomes_its_assets():
    document = ("\ufeffName, winrm_ssl ,os,tags,addresses,winrm_port,winrm_authentication,winrm_domain,"
                "winrm_credential,site,platform,hostname\r\n"
                'ws-042,TRUE,"Microsoft Windows 10 Pro, 64-bit",finance; laptop;,10.0.0.1;10.0.0.2,5986,Basic,CORP,'
                "winrmprod,berlin,windows,ws-042.corp.example.com\r\n"
                "\r\n"
                "ws-043,,Windows 11,,,,,,,,,\r\n")
    assert parse_assets("csv", document) == ([
        Asset("ws-042", hostname="ws-042.corp.example.com", addresses=("10.0.0.1", "10.0.0.2"),
              os="Microsoft Windows 10 Pro, 64-bit", platform="windows", site="berlin", tags=("finance", "laptop"),
              winrm=WinrmProfile(port=5986, ssl=True, domain="CORP", credential="winrmprod", authentication="basic")),
        Asset("ws-043", os="Windows 11"),
    ], [])
    assert parse_assets("csv", "name\n") == ([], [])


def test_csv_problems_carry_the_line_each_record_starts_on_and_the_column():
    document = ('name,os,winrm_port,winrm_ssl,winrm_authentication,tags\n'
                'ws-1,"two\nlines",,,,\n'
                'ws-2,ok,99999,maybe,kerberos,\n'
                'WS-1,ok,,,,\n'
                'ws-3,ok\n'
                'ws-4,ok,,,basic,a;A\n')
    assert [(p.line, p.field) for p in only_problems("csv", document)] == [
        (2, "os"), (4, "winrm_ssl"), (4, "winrm_authentication"), (4, "winrm_port"), (5, "name"), (6, ""),
        (7, "tags"), (7, "winrm_authentication")]


def test_csv_headers_must_name_known_columns_once_including_name():
    assert [(p.line, p.field) for p in only_problems("csv", "name,os,colour,OS\nws-1,a,b,c\n")] == [
        (1, "colour"), (1, "os")]
    [problem] = only_problems("csv", "hostname\nws-1.corp\n")
    assert problem.field == "name" and "no name column" in problem.message
    [problem] = only_problems("csv", "")
    assert ",".join(CSV_COLUMNS) in problem.message


# --- bounds and duplicates -----------------------------------------------------------------------------------


def test_a_name_twice_regardless_of_case_is_a_problem_naming_the_first_line():
    [problem] = only_problems("yaml", "- name: ws-1\n- name: ws-2\n- name: WS-1\n")
    assert problem == ImportProblem(3, "name", "the name 'WS-1' is also on line 1 (names are unique regardless of "
                                               "case): keep one record per asset")
    [problem] = only_problems("csv", "name\nws-1\nWs-1\n")
    assert (problem.line, problem.field) == (3, "name")


def test_at_most_max_import_assets_records():
    rows = "".join(f"ws-{index}\n" for index in range(MAX_IMPORT_ASSETS + 5))
    [problem] = only_problems("csv", "name\n" + rows)
    assert problem.line == MAX_IMPORT_ASSETS + 2 and f"more than {MAX_IMPORT_ASSETS} assets" in problem.message
    assert len(parse_assets("csv", "name\n" + rows[:rows.index(f"ws-{MAX_IMPORT_ASSETS}\n")])[0]) == MAX_IMPORT_ASSETS
    items = "".join(f"- {{name: ws-{index}}}\n" for index in range(MAX_IMPORT_ASSETS + 1))
    [problem] = only_problems("yaml", items)
    assert problem.line == MAX_IMPORT_ASSETS + 1


def test_at_most_max_import_problems_the_last_saying_how_many_more():
    rows = "".join(f"bad name {index}\n" for index in range(150))
    problems = only_problems("csv", "name\n" + rows)
    assert len(problems) == MAX_IMPORT_PROBLEMS
    assert [p.line for p in problems[:-1]] == list(range(2, MAX_IMPORT_PROBLEMS + 1))
    assert problems[-1] == ImportProblem(0, "", f"{150 - (MAX_IMPORT_PROBLEMS - 1)} more problems are not listed: "
                                                "fix these and import again to see them")


# --- all or nothing, through the table -------------------------------------------------------------------------


def test_a_document_with_one_bad_record_changes_nothing_and_a_good_one_is_imported_whole(database: URL):
    store = Store(database)
    try:
        table = AssetTable(store)
        table.create(Asset("ws-1", os="before"))
        good = "name,os,tags\nws-1,after,finance\nws-2,Windows 10,finance\n"
        bad = good + "ws-3,Windows 10,a;A\n"
        assets, problems = parse_assets("csv", bad)
        assert assets == [] and [(p.line, p.field) for p in problems] == [(4, "tags")]
        assert table.get("ws-1").os == "before" and table.count(AssetFilter()) == 1
        assets, problems = parse_assets("csv", good)
        assert problems == []
        assert table.import_all(assets) == ImportSummary(created=1, replaced=1)
        assert table.count(AssetFilter(tag="finance", os="windows 10")) == 1
        assert table.get("ws-1").os == "after"
    finally:
        store.close()
