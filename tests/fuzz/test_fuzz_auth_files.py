"""Fuzzing the auth file reader (auth/auth_file.py: read_auth_file), with any bytes, any text and YAML documents
built from the auth file's own keys with values of every kind.

What it proves:
- reading any file gives an AuthTable or an AuthFileError, never another exception (an exception of another
  kind stops a server at start with a traceback, or stops it applying later edits);
- an AuthFileError names a line of the file (0 for the whole file, one past the last for its end) and its
  message can be logged (UTF-8);
- a table that reads holds only callers whose roles are defined;
- a well-formed file reads to exactly the tokens, certificates and roles it lists.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from toolhost_server.auth import AuthFileError, AuthTable, read_auth_file

from helpers.json_strategies import BOUNDARY_INTEGERS, odd_text

NAMES = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.@:-]{0,12}\Z")
HEX64 = st.binary(min_size=32, max_size=32).map(lambda raw: hashlib.sha256(raw).hexdigest())
# Scalars YAML can write (no lone surrogates, which it refuses to read), huge and boundary numbers among them.
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.sampled_from(BOUNDARY_INTEGERS),
                    st.integers(10**300, 10**310), st.floats(), st.text(max_size=10))
KEYS = SCALARS.filter(lambda key: key == key)  # hashable, and not NaN (no key equals it, so none can be found)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.lists(children, max_size=3), st.dictionaries(KEYS, children, max_size=3))


ANY = st.recursive(SCALARS, _containers, max_leaves=6)


def either(plausible: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a value of the right shape, sometimes anything."""
    return st.one_of(plausible, plausible, ANY)


GLOBS = either(st.lists(either(st.sampled_from(["*", "echo", "dns_*", "[a-", "?", ""])), max_size=3))
GRANTS = either(st.fixed_dictionaries({}, optional={"tools": GLOBS, "categories": GLOBS, "other": ANY}))
ROLES = either(st.one_of(st.none(), st.fixed_dictionaries(
    {}, optional={"admin": either(st.booleans()), "list": GRANTS, "call": GRANTS})))
ROLE_NAMES = st.sampled_from(["agent", "viewer", "admin", "ghost"])
ROLE_KEYS = st.one_of(ROLE_NAMES, ROLE_NAMES, KEYS)
ENTRY_ROLES = either(st.lists(either(ROLE_NAMES), max_size=3))
TOKENS = st.fixed_dictionaries({}, optional={
    "name": either(NAMES), "sha256": either(st.one_of(HEX64, HEX64.map(str.upper))), "roles": ENTRY_ROLES,
    "extra": ANY})
CERTIFICATES = st.fixed_dictionaries({}, optional={
    "name": either(NAMES), "common_name": either(NAMES), "san": either(st.just("spiffe://example.org/a")),
    "roles": ENTRY_ROLES})
DOCUMENTS = st.fixed_dictionaries({}, optional={
    "roles": either(st.dictionaries(ROLE_KEYS, ROLES, max_size=3)),
    "tokens": either(st.lists(either(TOKENS), max_size=3)),
    "certificates": either(st.lists(either(CERTIFICATES), max_size=3)),
    "extra": ANY})


def dumped(document: Any, flow: bool, unicode: bool) -> bytes:
    return yaml.safe_dump(document, default_flow_style=flow, allow_unicode=unicode).encode("utf-8")


# YAML a careless or hostile author writes: duplicate keys, aliases, merge keys, tags, odd scalars.
SNIPPETS = ("roles: {a: {}}\nroles: {}\n", "roles:\n  a: &x {admin: true}\n  b: *x\n", "roles: {<<: {a: {}}}\n",
            "roles: !!timestamp x\n", "roles: {a: !!binary '@@'}\n", "tokens: [!!set {a}]\n",
            "roles: {? [a] : {}}\n", "roles: 0x" + "f" * 5000 + "\n", "--- a\n--- b\n", "\ufeffroles: {}\n",
            "roles: {a: {call: {tools: " + "[" * 70 + "]" * 70 + "}}}\n", "roles: [" * 3000 + "\n")
FILES = st.one_of(
    st.builds(dumped, DOCUMENTS, st.booleans(), st.booleans()),
    st.sampled_from(SNIPPETS).map(str.encode),
    st.binary(max_size=200),
    odd_text(200).map(lambda text: text.encode("utf-8", "surrogatepass")),
)


@pytest.fixture(scope="module")
def auth_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("auth") / "auth.yaml"


def yaml_lines(text: str) -> int:
    """How many lines YAML sees in `text`: it also breaks lines at \\r, NEL, U+2028 and U+2029."""
    return len(re.split("\r\n|[\n\r\x85\u2028\u2029]", text))


def read(path: Path, content: bytes) -> AuthTable | AuthFileError:
    path.write_bytes(content)
    try:
        return read_auth_file(path)
    except AuthFileError as refused:
        return refused


@given(FILES)
@example(b"roles: !!timestamp x\n").via("a tag whose value the constructor cannot match raised AttributeError")
@example(b"roles: {0x" + b"f" * 5000 + b": {}}\n").via(
    "the message quoting a 5000-digit key raised ValueError (Python will not write such an int in decimal)")
@example(b"{")
def test_any_file_reads_to_a_table_or_an_auth_file_error(auth_path: Path, content: bytes) -> None:
    result = read(auth_path, content)
    if isinstance(result, AuthFileError):
        # Up to one past the last line: libyaml marks an error at the end of a file without a final newline there.
        assert 0 <= result.line <= yaml_lines(content.decode("utf-8", "replace")) + 1
        str(result).encode("utf-8")
        return
    for caller in [*result.token_callers.values(), *result.common_name_callers.values(),
                   *result.san_callers.values()]:
        assert caller.roles and caller.roles <= result.roles.keys()


@st.composite
def well_formed(draw: st.DrawFn) -> dict[str, Any]:
    roles = draw(st.lists(NAMES, min_size=1, max_size=3, unique=True))
    grant = st.fixed_dictionaries({}, optional={"tools": st.lists(st.sampled_from(["*", "echo", "dns_*"]))})
    hashes = draw(st.lists(HEX64, max_size=3, unique=True))
    common_names = draw(st.lists(NAMES, max_size=2, unique=True))
    entry_roles = st.lists(st.sampled_from(roles), min_size=1, max_size=2, unique=True)
    return {
        "roles": {name: draw(st.fixed_dictionaries({}, optional={"admin": st.booleans(), "list": grant,
                                                                "call": grant})) for name in roles},
        "tokens": [{"name": draw(NAMES), "sha256": digest, "roles": draw(entry_roles)} for digest in hashes],
        "certificates": [{"common_name": name, "roles": draw(entry_roles)} for name in common_names],
    }


@given(well_formed(), st.booleans())
def test_a_well_formed_file_reads_to_what_it_lists(auth_path: Path, document: dict[str, Any], flow: bool) -> None:
    table = read(auth_path, dumped(document, flow, True))
    assert isinstance(table, AuthTable), table
    assert table.roles.keys() == document["roles"].keys()
    assert {digest: (c.name, c.roles) for digest, c in table.token_callers.items()} == {
        entry["sha256"]: (entry["name"], frozenset(entry["roles"])) for entry in document["tokens"]}
    assert {name: c.roles for name, c in table.common_name_callers.items()} == {
        entry["common_name"]: frozenset(entry["roles"]) for entry in document["certificates"]}
    for digest, caller in table.token_callers.items():
        admin = any(document["roles"][role].get("admin", False) for role in caller.roles)
        assert caller.permissions.admin == admin, digest
