"""What makes an asset acceptable: the checks CreateAsset, UpdateAsset and ImportAssets share.

Every text is one line of printable characters that both databases store; a hostname is a DNS name and an address
an IP address in its one canonical spelling, so that the egress policy and `winrm_credential_hosts` judge what
the connection will really use; a WinRM profile never sends a password in clear (basic authentication needs TLS).
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from collections.abc import Callable
from typing import Final, TypeAlias

from ..credentials.names import InvalidCredentialError, check_credential_name
from ..errors import FieldViolation
from .model import (
    AUTHENTICATIONS,
    MAX_ADDRESSES,
    MAX_TAGS,
    MAX_TEXT_CHARS,
    NAME_PATTERN,
    Asset,
    WinrmProfile,
)

MAX_HOSTNAME_CHARS: Final = 253
MAX_LABEL_CHARS: Final = 63
# The separator of several values in one CSV cell (importing.py): a tag holding it could not be imported back.
LIST_SEPARATOR: Final = ";"

# What a resolver (inet_aton) reads as a number in the last part of a name: decimal, octal or hexadecimal.
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*", re.IGNORECASE)
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?")
# A NetBIOS or DNS domain name: it becomes `DOMAIN\user`, so neither '\' nor '@' may reach it.
_DOMAIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
# Control characters, format characters (bidirectional overrides, zero-width ones), lone surrogates, and the
# Unicode line and paragraph separators: none belongs in a one-line field, and some hide what a text says.
_REFUSED_CATEGORIES: Final = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})

# Records one problem: the field's path after the prefix, and the reason.
_Refuse: TypeAlias = Callable[[str, str], None]


def validate_asset(asset: Asset, prefix: str = "asset.") -> list[FieldViolation]:
    """Every problem of `asset`, each with the field's path (`asset.winrm.port`, `asset.tags[2]`; `prefix` starts
    them) and how to fix it; [] when it can be stored."""
    problems: list[FieldViolation] = []

    def refuse(field: str, reason: str) -> None:
        problems.append(FieldViolation(prefix + field, reason))

    _check_name(asset.name, refuse)
    _check_hostname(asset.hostname, refuse)
    _check_addresses(asset.addresses, refuse)
    for field, value in (("os", asset.os), ("platform", asset.platform), ("site", asset.site)):
        _check_text(field, value, refuse)
    _check_tags(asset.tags, refuse)
    _check_winrm(asset.winrm, refuse)
    return problems


def shown(value: str, limit: int = 60) -> str:
    """`value` quoted for a message, cut short: a refused value may be megabytes long or hold control
    characters, which repr() escapes."""
    text = repr(value[:limit + 1])
    return f"{text[:-1]}...{text[-1]}" if len(value) > limit else text


def _check_name(name: str, refuse: _Refuse) -> None:
    if not name:
        refuse("name", "name is required: a letter or digit, then up to 127 letters, digits, '.', '_' or '-' "
                       "(for example ws-042)")
    elif not NAME_PATTERN.fullmatch(name):
        refuse("name", f"name {shown(name)} must match ^[A-Za-z0-9][A-Za-z0-9._-]{{0,127}}$: a letter or digit, "
                       "then up to 127 letters, digits, '.', '_' or '-' (for example ws-042)")


def _check_hostname(hostname: str, refuse: _Refuse) -> None:
    if not hostname:
        return  # the name is the hostname
    reason = _hostname_problem(hostname)
    if reason:
        refuse("hostname", f"hostname {shown(hostname)} {reason}")


def _hostname_problem(hostname: str) -> str:
    if "://" in hostname:
        return "is a URL: write only the DNS name (for example ws-042.corp.example.com); the scheme is winrm.ssl"
    if _control_character(hostname) is not None or " " in hostname:
        return "holds spaces or control characters: write only the DNS name (for example ws-042.corp.example.com)"
    if "/" in hostname:
        return "holds a path: write only the DNS name (for example ws-042.corp.example.com)"
    if ":" in hostname:
        return ("holds a ':': write the port in winrm.port, and IP addresses in addresses, not in the hostname")
    if len(hostname) > MAX_HOSTNAME_CHARS:
        return f"is {len(hostname)} characters long; a DNS name has at most {MAX_HOSTNAME_CHARS}"
    if hostname.endswith("."):
        return "ends with '.': write it without the trailing dot (ws-042.corp.example.com)"
    if not hostname.isascii():
        return "is not ASCII: write an internationalised name in its IDNA form (xn--...)"
    labels = hostname.split(".")
    for label in labels:
        if not label:
            return "has an empty label ('..' or a leading '.'): each part between dots needs 1 to 63 characters"
        if len(label) > MAX_LABEL_CHARS:
            return f"has a part of {len(label)} characters; each part between dots has at most {MAX_LABEL_CHARS}"
        if not _LABEL.fullmatch(label):
            return (f"has the part {shown(label)}: each part between dots holds letters, digits and '-', and neither "
                    "starts nor ends with '-'")
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        # A resolver reads such a name as an IPv4 address (also 010.0.0.1, in octal, 0x0a.0.0.1, or 167772161):
        # only the dotted decimal spelling means what it says to everyone who reads it.
        try:
            ipaddress.IPv4Address(hostname)
        except ValueError:
            return ("would be read as an IPv4 address in an unusual spelling: write the address in dotted decimal "
                    "without leading zeros (for example 10.0.0.1), preferably in addresses")
    return ""


def _check_addresses(addresses: tuple[str, ...], refuse: _Refuse) -> None:
    if len(addresses) > MAX_ADDRESSES:
        refuse("addresses", f"{len(addresses)} addresses; an asset has at most {MAX_ADDRESSES}")
        return
    seen: set[str] = set()
    for index, address in enumerate(addresses):
        field = f"addresses[{index}]"
        reason = _address_problem(address)
        if reason:
            refuse(field, f"address {shown(address)} {reason}")
        elif address in seen:
            refuse(field, f"address {address} is listed twice; list it once")
        seen.add(address)


def _address_problem(address: str) -> str:
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return ("is not an IP address: write an IPv4 address in dotted decimal without leading zeros (10.0.0.5) or "
                "an IPv6 address (2001:db8::5); a DNS name belongs in hostname")
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.scope_id is not None:
            return "has a zone (%...): zones name the server's own interfaces; write the address without it"
        if parsed.ipv4_mapped is not None:
            return f"is an IPv4 address written as IPv6: write {parsed.ipv4_mapped}"
    if str(parsed) != address:
        return f"is not written the one canonical way: write {parsed}"
    return ""


def _check_tags(tags: tuple[str, ...], refuse: _Refuse) -> None:
    if len(tags) > MAX_TAGS:
        refuse("tags", f"{len(tags)} tags; an asset has at most {MAX_TAGS}")
        return
    seen: dict[str, str] = {}
    for index, tag in enumerate(tags):
        field = f"tags[{index}]"
        if not tag:
            refuse(field, "a tag is empty: remove it, or write some text")
            continue
        if not _check_text(field, tag, refuse):
            continue
        if LIST_SEPARATOR in tag:
            refuse(field, f"tag {shown(tag)} holds '{LIST_SEPARATOR}', which separates tags in a CSV import: "
                          "use another character")
        elif tag.lower() in seen:
            refuse(field, f"tag {shown(tag)} repeats {shown(seen[tag.lower()])} (tags are compared regardless of "
                          "case): list it once")
        else:
            seen[tag.lower()] = tag


def _check_winrm(winrm: WinrmProfile, refuse: _Refuse) -> None:
    if isinstance(winrm.port, bool) or not isinstance(winrm.port, int) or not 0 <= winrm.port <= 65535:
        refuse("winrm.port", f"port {winrm.port!r} is not a TCP port: write 1 to 65535, or 0 for the default "
                             "(5985, or 5986 with ssl)")
    if winrm.authentication not in AUTHENTICATIONS:
        refuse("winrm.authentication", f"authentication {shown(str(winrm.authentication))} is not one of "
                                       f"{', '.join(AUTHENTICATIONS)}")
    elif winrm.authentication == "basic" and not winrm.ssl:
        refuse("winrm.authentication", "basic authentication sends the password in clear without TLS: set "
                                       "winrm.ssl or use ntlm")
    if winrm.credential and _check_text("winrm.credential", winrm.credential, refuse):
        try:
            check_credential_name(winrm.credential)
        except InvalidCredentialError as exc:
            refuse("winrm.credential", f"{exc}; empty means 'winrm'")
    if winrm.domain and _check_text("winrm.domain", winrm.domain, refuse) and not _DOMAIN.fullmatch(winrm.domain):
        refuse("winrm.domain", f"domain {shown(winrm.domain)} must be a NetBIOS or DNS domain name (CORP or "
                               "corp.example.com): letters, digits, '.', '_' and '-', starting and ending with a "
                               "letter or digit; leave it empty to use the credential's own domain")


def _check_text(field: str, value: str, refuse: _Refuse) -> bool:
    """Whether `value` is one line of printable text of at most MAX_TEXT_CHARS; refuses it when not."""
    if len(value) > MAX_TEXT_CHARS:
        refuse(field, f"{field} is {len(value)} characters long; at most {MAX_TEXT_CHARS} are allowed")
        return False
    position = _control_character(value)
    if position is not None:
        character = value[position]
        refuse(field, f"{field} holds the control character U+{ord(character):04X} at position {position}: remove "
                      "it (line breaks, NUL, and invisible or bidirectional controls are not allowed)")
        return False
    if value != value.strip():
        refuse(field, f"{field} {shown(value)} starts or ends with spaces: remove them (values are compared whole)")
        return False
    return True


def _control_character(value: str) -> int | None:
    if value.isprintable():  # the common case, at C speed: no control, format or separator character but ' '
        return None
    for position, character in enumerate(value):
        if unicodedata.category(character) in _REFUSED_CATEGORIES:
            return position
    return None
