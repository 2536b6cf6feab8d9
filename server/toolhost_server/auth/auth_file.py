"""The auth file: roles with their grants, the tokens (as SHA-256 hashes) and client certificates that hold
them. Read strictly, like catalog files: every mistake is an AuthFileError naming the file and the line.

    roles:
      viewer:
        list: {tools: ["*"]}                       # sees every tool, runs none
      agent:
        call: {tools: [echo, "dns_*"], categories: [network]}
      admin:
        admin: true                                # Reload, requires_admin tools, user tools
        call: {tools: ["*"]}
      toolsmith:
        manage_tools: {credentials: [github]}      # user tools, which may declare the credential github
                                                   # (`manage_tools: true`: user tools without credentials)
      inventory:
        manage_assets: true                        # the asset inventory (AssetService, `toolhost assets`)
    tokens:
      - {name: ci-agent, sha256: 5f0c...e2, roles: [agent]}   # toolhost auth hash-token < token-file
    certificates:
      - {common_name: agent-1, roles: [agent]}
      - {san: "spiffe://example.org/ns/tools/sa/agent", roles: [agent, viewer]}
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..catalog.strict_yaml import error_line, error_text, line_of, load_catalog_yaml
from ..credentials.names import InvalidCredentialError, check_credential_name
from .caller import AuthMethod, Caller
from .permissions import Permissions, ToolSet
from .tokens import hash_token

MAX_AUTH_FILE_BYTES = 1024 * 1024
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@:-]{0,127}$")
_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
_TOP_KEYS = ("roles", "tokens", "certificates")
_ROLE_KEYS = ("admin", "list", "call", "manage_tools", "manage_assets")
_MANAGE_TOOLS_KEYS = ("credentials",)
_GRANT_KEYS = ("tools", "categories")
_TOKEN_KEYS = ("name", "sha256", "roles")
_CERTIFICATE_KEYS = ("name", "common_name", "san", "roles")

_Path = tuple[str | int, ...]


class AuthFileError(Exception):
    """The auth file cannot be used: which file, which line (0: the whole file) and why."""

    def __init__(self, file: str, line: int, reason: str) -> None:
        super().__init__(f"{file}:{line}: {reason}" if line else f"{file}: {reason}")
        self.file = file
        self.line = line
        self.reason = reason


@dataclass(frozen=True)
class AuthTable:
    """One version of the auth file, ready to answer who a token or a certificate is."""

    roles: Mapping[str, Permissions]
    token_callers: Mapping[str, Caller] = field(default_factory=dict)  # by SHA-256 hex of the token
    common_name_callers: Mapping[str, Caller] = field(default_factory=dict)
    san_callers: Mapping[str, Caller] = field(default_factory=dict)

    def caller_for_token(self, token: str) -> Caller | None:
        # A dict lookup of the hash: nothing about the stored hashes can be learnt from its timing.
        return self.token_callers.get(hash_token(token))

    def caller_for_certificate(self, common_name: str, sans: Sequence[str]) -> Caller | None:
        """The caller a verified client certificate is: every entry it matches adds its roles."""
        matched = [self.san_callers[s] for s in sans if s in self.san_callers]
        if common_name in self.common_name_callers:
            matched.append(self.common_name_callers[common_name])
        if not matched:
            return None
        roles = frozenset().union(*(c.roles for c in matched))
        return Caller(matched[0].name, roles, AuthMethod.MTLS, _rights(self.roles, roles))


def _rights(roles: Mapping[str, Permissions], names: Iterable[str]) -> Permissions:
    return Permissions.union(roles[name] for name in names)


def read_auth_file(path: Path) -> AuthTable:
    """The auth file at `path`, or AuthFileError."""
    file = str(path)
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_AUTH_FILE_BYTES + 1)
    except OSError as exc:
        raise AuthFileError(file, 0, f"cannot read the auth file: {exc.strerror or exc}") from None
    if len(raw) > MAX_AUTH_FILE_BYTES:
        raise AuthFileError(file, 0, f"the auth file is larger than {MAX_AUTH_FILE_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
        document = load_catalog_yaml(text)
    except UnicodeDecodeError as exc:
        raise AuthFileError(file, raw.count(b"\n", 0, exc.start) + 1, "the auth file is not UTF-8") from None
    except yaml.YAMLError as exc:
        raise AuthFileError(file, error_line(exc, raw), f"YAML: {error_text(exc)}") from None
    except Exception as exc:  # whatever else the YAML library raises (`!!timestamp x`: an AttributeError)
        raise AuthFileError(file, 0, f"cannot read the YAML: {exc}") from None
    try:
        return _table(document)
    except _Problem as problem:
        raise AuthFileError(file, line_of(text, problem.path, at_key=problem.at_key), problem.reason) from None


class _Problem(Exception):
    def __init__(self, reason: str, path: _Path, *, at_key: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path = path
        self.at_key = at_key


def _table(document: Any) -> AuthTable:
    if document is None:
        document = {}
    top = _mapping(document, (), _TOP_KEYS)
    roles_data = _mapping(top.get("roles", {}), ("roles",), None)
    roles = {_name(name, ("roles", name), "role", at_key=True): _role(value, ("roles", name))
             for name, value in roles_data.items()}
    token_callers: dict[str, Caller] = {}
    for index, item in enumerate(_list(top.get("tokens", []), ("tokens",))):
        at: _Path = ("tokens", index)
        entry = _mapping(item, at, _TOKEN_KEYS)
        name = _name(_required(entry, "name", at), (*at, "name"), "token name")
        digest = _required(entry, "sha256", at)
        if not isinstance(digest, str) or not _SHA256_HEX.match(digest.lower()):
            raise _Problem("sha256 must be 64 hex digits: the output of `toolhost auth hash-token`", (*at, "sha256"))
        if digest.lower() in token_callers:
            raise _Problem(f"this token hash is also that of token {token_callers[digest.lower()].name!r}",
                           (*at, "sha256"))
        caller_roles = _role_names(entry, at, roles)
        token_callers[digest.lower()] = Caller(name, caller_roles, AuthMethod.TOKEN, _rights(roles, caller_roles))
    by_common_name: dict[str, Caller] = {}
    by_san: dict[str, Caller] = {}
    for index, item in enumerate(_list(top.get("certificates", []), ("certificates",))):
        at = ("certificates", index)
        entry = _mapping(item, at, _CERTIFICATE_KEYS)
        if ("common_name" in entry) == ("san" in entry):
            raise _Problem("a certificate entry names exactly one of common_name and san", at)
        key = "common_name" if "common_name" in entry else "san"
        value = entry[key]
        if not isinstance(value, str) or not value:
            raise _Problem(f"{key} must be a non-empty string", (*at, key))
        target = by_common_name if key == "common_name" else by_san
        if value in target:
            raise _Problem(f"{key} {_quoted(value)} appears twice under certificates", (*at, key))
        name = _name(entry["name"], (*at, "name"), "certificate name") if "name" in entry else value
        caller_roles = _role_names(entry, at, roles)
        target[value] = Caller(name, caller_roles, AuthMethod.MTLS, _rights(roles, caller_roles))
    return AuthTable(roles, token_callers, by_common_name, by_san)


def _role(value: Any, at: _Path) -> Permissions:
    data = _mapping({} if value is None else value, at, _ROLE_KEYS)
    admin = data.get("admin", False)
    if not isinstance(admin, bool):
        raise _Problem("admin must be true or false", (*at, "admin"))
    manage_tools, credentials = _manage_tools(data.get("manage_tools", False), (*at, "manage_tools"))
    manage_assets = data.get("manage_assets", False)
    if not isinstance(manage_assets, bool):
        raise _Problem("manage_assets must be true or false", (*at, "manage_assets"))
    return Permissions(list=_grant(data.get("list"), (*at, "list")), call=_grant(data.get("call"), (*at, "call")),
                       admin=admin, manage_tools=manage_tools, grantable_credentials=credentials,
                       manage_assets=manage_assets)


def _manage_tools(value: Any, at: _Path) -> tuple[bool, frozenset[str]]:
    """`manage_tools: true|false` or `manage_tools: {credentials: [names]}`: the right, and the credentials the
    role's user tools may declare."""
    if isinstance(value, bool):
        return value, frozenset()
    if not isinstance(value, dict):
        raise _Problem("manage_tools must be true, false or a mapping such as {credentials: [github]}", at)
    data = _mapping(value, at, _MANAGE_TOOLS_KEYS)
    names = _strings(data.get("credentials", []), (*at, "credentials"))
    for index, name in enumerate(names):
        try:
            check_credential_name(name)
        except InvalidCredentialError as exc:
            raise _Problem(str(exc), (*at, "credentials", index)) from None
    return True, frozenset(names)


def _grant(value: Any, at: _Path) -> ToolSet:
    if value is None:
        return ToolSet()
    data = _mapping(value, at, _GRANT_KEYS)
    return ToolSet(tuple(_strings(data.get("tools", []), (*at, "tools"))),
                   frozenset(_strings(data.get("categories", []), (*at, "categories"))))


def _role_names(entry: Mapping[str, Any], at: _Path, roles: Mapping[str, Permissions]) -> frozenset[str]:
    names = _strings(_required(entry, "roles", at), (*at, "roles"))
    if not names:
        raise _Problem("roles must name at least one role", (*at, "roles"))
    for index, name in enumerate(names):
        if name not in roles:
            known = ", ".join(sorted(roles)) or "none are defined"
            raise _Problem(f"role {_quoted(name)} is not defined under roles (defined: {known})",
                           (*at, "roles", index))
    return frozenset(names)


def _mapping(value: Any, at: _Path, keys: Sequence[str] | None) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _Problem(f"{_where(at)} must be a mapping", at)
    for key in value:
        if not isinstance(key, str):
            raise _Problem(f"keys must be strings, not {_quoted(key)}", at)
        if keys is not None and key not in keys:
            raise _Problem(f"unknown key {_quoted(key)} in {_where(at)}; known: {', '.join(keys)}", (*at, key),
                           at_key=True)
    return value


def _list(value: Any, at: _Path) -> list[Any]:
    if not isinstance(value, list):
        raise _Problem(f"{_where(at)} must be a list", at)
    return value


def _strings(value: Any, at: _Path) -> list[str]:
    items = _list(value, at)
    for index, item in enumerate(items):
        if not isinstance(item, str) or not item:
            raise _Problem(f"{_where(at)} must hold non-empty strings", (*at, index))
    return items


def _required(entry: Mapping[str, Any], key: str, at: _Path) -> Any:
    if key not in entry:
        raise _Problem(f"{key} is required in {_where(at)}", at)
    return entry[key]


def _name(value: Any, at: _Path, what: str, *, at_key: bool = False) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise _Problem(f"{what} {_quoted(value)} must be 1-128 letters, digits and _ . @ : -, starting with a letter "
                       "or digit", at, at_key=at_key)
    return value


_QUOTED_CHARS = 80


def _quoted(value: Any) -> str:
    """`value` as a message quotes it: its repr, cut short. A whole number of thousands of digits has none
    (Python refuses to write it in decimal), so it is described instead."""
    try:
        text = repr(value)
    except ValueError:
        return f"(a number of {value.bit_length()} bits)" if isinstance(value, int) else "(a value)"
    return text if len(text) <= _QUOTED_CHARS else f"{text[:_QUOTED_CHARS]}..."


def _where(at: _Path) -> str:
    return "the file" if not at else "/".join(str(step) for step in at)
