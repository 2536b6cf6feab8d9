"""Attacks on the asset import and validation: YAML alias bombs (billion laughs), nesting deep enough to overflow
a recursive composer, tags that would construct objects (`!!python/object/apply:os.system`), NUL, lone
surrogates, bidirectional and zero-width controls, megabyte values and fields, broken CSV quoting, and spreadsheet
formula cells. Each is refused as a problem with its line, never a crash, never expanded or evaluated, and no
message repeats the hostile value whole; a formula cell is kept as the text it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolhost_server.assets.importing import parse_assets
from toolhost_server.assets.model import MAX_IMPORT_PROBLEMS, MAX_TEXT_CHARS, Asset, ImportProblem, WinrmProfile
from toolhost_server.assets.validation import validate_asset


def reasons(asset: Asset) -> dict[str, str]:
    return {violation.pointer: violation.reason for violation in validate_asset(asset)}


def only_problems(format: str, content: str) -> list[ImportProblem]:
    assets, problems = parse_assets(format, content)
    assert problems and assets == [], "a document with problems imports nothing"
    return problems


@pytest.mark.parametrize("bad", ["\x00", "\n", "\r", "\t", "\x1b[31m", "\u202e", "\u2066", "\u200b", "\u2028",
                                 "\ud800", "\x85"])
def test_text_holding_control_format_or_separator_characters_is_refused_in_every_field(bad: str):
    text = f"Windows{bad}10"
    for asset, field in ((Asset("a", os=text), "asset.os"), (Asset("a", platform=text), "asset.platform"),
                         (Asset("a", site=text), "asset.site"), (Asset("a", tags=(text,)), "asset.tags[0]"),
                         (Asset("a", winrm=WinrmProfile(domain=text)), "asset.winrm.domain"),
                         (Asset("a", winrm=WinrmProfile(credential=text)), "asset.winrm.credential")):
        reason = reasons(asset).get(field, "")
        assert "control character" in reason, (field, reason)
        assert bad not in reason  # the message never carries the character itself


def test_long_text_is_refused_without_echoing_it():
    huge = "x" * 1_000_000
    found = reasons(Asset("a", os=huge, tags=(huge,), hostname=huge))
    assert found["asset.os"] == f"os is 1000000 characters long; at most {MAX_TEXT_CHARS} are allowed"
    assert all(len(reason) < 400 for reason in found.values()), found
    assert validate_asset(Asset("a", os="x" * MAX_TEXT_CHARS)) == []
    assert len(reasons(Asset("a" * 1_000_000))["asset.name"]) < 400


def test_a_yaml_alias_bomb_is_refused_without_being_expanded():
    # Billion laughs: each list holds the one before it nine times, 9**9 "lol"s in the last; expanded, it would
    # never finish.
    bomb = "- {name: a, tags: &l0 [lol1, lol2, lol3, lol4, lol5, lol6, lol7, lol8, lol9]}\n" + "".join(
        f"- {{name: b{level}, tags: &l{level} [{', '.join([f'*l{level - 1}'] * 9)}]}}\n" for level in range(1, 10))
    bomb += "- {name: z, tags: *l9, os: *l9}\n"
    problems = only_problems("yaml", bomb)
    assert {p.line for p in problems if "aliases" in p.message} == set(range(2, 12)), problems
    assert len(problems) <= MAX_IMPORT_PROBLEMS
    scalar_alias = "- {name: a, os: &os Windows}\n- {name: b, os: *os}\n"
    assert [(p.line, p.message) for p in only_problems("yaml", scalar_alias)] == [
        (2, "YAML aliases (*name) are not allowed: write the value out")]


def test_deeply_nested_yaml_is_refused_before_it_is_composed():
    for nested in ("[" * 100_000, "- " * 50_000 + "x", "{a: " * 30_000):
        [problem] = only_problems("yaml", nested)
        assert "nests deeper than" in problem.message or "not valid YAML" in problem.message


def test_yaml_tags_are_refused_and_never_construct_anything(tmp_path: Path):
    marker = tmp_path / "constructed"
    document = f"""\
- name: a
  os: !!python/object/apply:os.system ["touch {marker}"]
- name: b
  os: !!binary aGVsbG8=
- name: c
  site: !custom x
"""
    problems = only_problems("yaml", document)
    assert [(p.line, p.field) for p in problems] == [(2, "os"), (4, "os"), (6, "site")]
    assert all("YAML tag" in p.message for p in problems)
    assert not marker.exists()


def test_yaml_with_nul_or_a_lone_surrogate_is_refused_and_a_bom_and_crlf_are_read():
    assert "not valid YAML" in only_problems("yaml", "- name: a\x00\n")[0].message
    assert "lone surrogate" in only_problems("yaml", "- name: a\ud800\n")[0].message
    assert parse_assets("yaml", "\ufeff- name: ws-1\r\n  os: Windows\r\n") == ([Asset("ws-1", os="Windows")], [])


def test_a_formula_cell_is_text_like_any_other():
    assets, problems = parse_assets("csv", "name,os,site\nws-1,\"=cmd|' /C calc'!A0\",@SUM(1+1)\n")
    assert problems == []
    assert (assets[0].os, assets[0].site) == ("=cmd|' /C calc'!A0", "@SUM(1+1)")


def test_broken_csv_quoting_nul_and_huge_fields_are_problems_not_crashes():
    [problem] = only_problems("csv", 'name,os\nws-1,"unclosed\n')
    assert problem.line == 2 and "not valid CSV" in problem.message
    [problem] = only_problems("csv", 'name,os\nws-0,a\nws-1,"a"b\n')
    assert problem.line == 3 and "not valid CSV" in problem.message
    [problem] = only_problems("csv", "name,os\nws-1,Win\x00dows\n")
    assert problem.field == "os" and "U+0000" in problem.message
    [problem] = only_problems("csv", "name,os\nws-1," + "x" * 200_000 + "\n")
    assert problem.line == 2 and "a value is longer than" in problem.message and len(problem.message) < 400
