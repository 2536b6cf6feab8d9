"""The operator's rule of where each WinRM credential may be sent (the winrm_credential_hosts setting).

An asset editor chooses an asset's hostname, addresses, port and TLS; the credential its profile names is the
operator's. So a credential goes only to hosts the operator listed for it, as CIDR networks or host globs:

    winrm_credential_hosts:
      winrm: [10.20.0.0/16, "*.corp.example.com"]
      dcadmin: ["dc-*.corp.example.com"]

- A CIDR admits an address however it was found: from DNS or listed on the asset.
- A host glob admits the addresses DNS gave for a hostname it matches, never addresses listed on the asset:
  otherwise an asset editor could name a trusted hostname and list their own machine's address.
  Matching ignores case and a trailing dot; `*` stands for any characters (at least one) within ONE label, so
  `*.corp.example.com` matches `ws1.corp.example.com` but neither `corp.example.com` nor
  `a.b.corp.example.com`. A hostname that is an IP address matches no glob: list its network instead.
- A glob names a domain: what follows its last label with `*` is not a public suffix (the Public Suffix List's
  ICANN and private sections, bundled with the publicsuffixlist package): `*.com`, `*-*.com`, `*.*.com`,
  `*.co.uk`, `*.github.io` or `*.duckdns.org` would let the credential go to a domain anyone can register, and
  stop the server at start. `*.corp.example.com` and `ws-*.example.co.uk` name an organisation's domain.
- A credential with no entry is sent nowhere, and is not even resolved.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from publicsuffixlist import PublicSuffixList

from ..credentials.names import is_credential_name

SETTING: Final = "winrm_credential_hosts"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

_GLOB_LABEL: Final = re.compile(r"[a-z0-9_*-]{1,63}")
MAX_ENTRIES_PER_CREDENTIAL: Final = 256


@dataclass(frozen=True, slots=True)
class HostGlob:
    """A host glob of the setting, lower-cased, compiled to a regular expression of whole hostnames."""

    text: str
    pattern: re.Pattern[str]

    @classmethod
    def parse(cls, text: str) -> HostGlob:
        glob = re.sub(r"\*+", "*", text.strip().lower().rstrip("."))
        labels = glob.split(".")
        if not all(_GLOB_LABEL.fullmatch(label) for label in labels):
            raise ValueError(f"{text!r} is neither a CIDR network nor a host glob (labels of letters, digits, "
                             "'-', '_' and '*', separated by dots)")
        if _looks_like_an_address(glob):
            raise ValueError(f"{text!r} looks like addresses; write a CIDR network such as 10.0.0.0/24")
        wild = [index for index, label in enumerate(labels) if "*" in label]
        # An exact hostname (no `*`) names one host, whatever its labels.
        domain = labels[wild[-1] + 1:] if wild else []
        if wild and _is_public_suffix(domain):
            under = f" under {'.'.join(domain)!r}" if domain else ""
            raise ValueError(
                f"{text!r} matches hosts of any domain{under}, domains anyone can register (a public suffix); "
                "after the last label with '*', name your organisation's own domain, as in *.corp.example.com or "
                "ws-*.example.co.uk")
        regex = r"\.".join("[^.]+".join(re.escape(part) for part in label.split("*")) for label in labels)
        return cls(glob, re.compile(regex))

    def matches(self, hostname: str) -> bool:
        return self.pattern.fullmatch(hostname) is not None


def _looks_like_an_address(glob: str) -> bool:
    # 10.0.0.* or 2001:db8::*: an operator meaning addresses, which a glob never admits.
    labels = glob.split(".")
    return ":" in glob or (any(label.isdigit() for label in labels)
                           and all(label == "*" or label.isdigit() for label in labels))


def _is_public_suffix(domain: list[str]) -> bool:
    """Whether the literal labels after a glob's last `*` label are a public suffix (or nothing) rather than
    one organisation's domain. A single label is one under the list's default rule."""
    return not domain or _public_suffixes().is_public(".".join(domain))


@functools.cache
def _public_suffixes() -> PublicSuffixList:
    # Parsing the bundled list takes about 0.1 s: done once, and only by a server whose setting has a glob.
    return PublicSuffixList()


@dataclass(frozen=True, slots=True)
class CredentialRule:
    """Where one credential may go."""

    networks: tuple[Network, ...] = ()
    globs: tuple[HostGlob, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> CredentialRule:
        networks: list[Network] = []
        globs: list[HostGlob] = []
        for entry in entries:
            try:
                networks.append(ipaddress.ip_network(entry.strip(), strict=False))
            except ValueError:
                globs.append(HostGlob.parse(entry))
        return cls(tuple(networks), tuple(globs))

    def admits(self, hostname: str, address: Address, from_dns: bool) -> bool:
        """Whether the credential may be sent to `address`, found for `hostname` by DNS or (`from_dns` False)
        listed on the asset."""
        if any(address.version == network.version and address in network for network in self.networks):
            return True
        if not from_dns or _is_address(hostname):
            return False
        name = hostname.lower().rstrip(".")
        return any(glob.matches(name) for glob in self.globs)


def _is_address(hostname: str) -> bool:
    try:
        ipaddress.ip_address(hostname.split("%", 1)[0])
    except ValueError:
        return False
    return True


class CredentialHosts:
    """The whole setting: each credential's rule.

        hosts = CredentialHosts.from_setting(config.winrm_credential_hosts)
        hosts.refusal("winrm", "ws1.corp.example.com", ["10.20.0.7"], from_dns=True)   # "" when allowed
    """

    def __init__(self, rules: Mapping[str, CredentialRule]) -> None:
        self.rules = dict(rules)

    @classmethod
    def from_setting(cls, value: Sequence[tuple[str, Sequence[str]]]) -> CredentialHosts:
        return cls({name: CredentialRule.parse(entries) for name, entries in value})

    def unlisted_refusal(self, credential: str) -> str:
        """Why `credential` may be sent to no host at all (the setting has no entry for it), or "". Checked before
        the credential is resolved: what the server holds under a name the operator did not list stays unread,
        and the caller learns nothing about it."""
        if credential in self.rules:
            return ""
        return (f"the credential {credential!r} may be sent to no host: {SETTING} has no entry for it. An "
                f"operator lists the networks (CIDR) or host globs it may go to, for example "
                f"{SETTING}: {{{credential}: [10.0.0.0/8, '*.corp.example.com']}} in the config file")

    def refusal(self, credential: str, hostname: str, addresses: Sequence[str], from_dns: bool) -> str:
        """Why `credential` may not be sent to `hostname` at these addresses (every one must be admitted), or ""
        when it may. The reason says which setting to change."""
        rule = self.rules.get(credential)
        if rule is None:
            return self.unlisted_refusal(credential)
        for text in addresses:
            address = ipaddress.ip_address(text.split("%", 1)[0])
            if rule.admits(hostname, address, from_dns):
                continue
            how = "resolved from" if from_dns else "listed on the asset for"
            glob_note = ("" if from_dns or not rule.globs else
                         "; a host glob admits only addresses DNS gives for the hostname, never addresses set "
                         "on the asset")
            return (f"the credential {credential!r} may not be sent to {address} ({how} {hostname!r}): it is "
                    f"in none of the networks and matches none of the host globs {SETTING} lists for "
                    f"{credential!r}{glob_note}. An operator can add its network or hostname there")
        return ""


def parse_setting(value: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The setting from a config file mapping of credential name to a list (or comma-separated string) of
    entries, or from text `NAME=ENTRY,ENTRY;NAME=ENTRY` (environment, flag): (name, entries) pairs sorted by
    name. Every entry is checked now: a typo should stop the server, not refuse every call later."""
    if value is None:
        return ()
    if isinstance(value, Mapping):
        items = [(str(name), entries) for name, entries in value.items()]
    else:
        items = []
        for part in str(value).split(";"):
            if not part.strip():
                continue
            name, sep, entries = part.partition("=")
            if not sep:
                raise ValueError(f"entry {part.strip()!r} must be NAME=ENTRY,ENTRY (entries separated by ',', "
                                 "credentials by ';'), for example winrm=10.0.0.0/8,*.corp.example.com")
            items.append((name.strip(), entries))
    parsed: dict[str, tuple[str, ...]] = {}
    for name, raw in items:
        if not is_credential_name(name):
            raise ValueError(f"{name!r} is not a credential name (lowercase letters and digits, starting with a "
                             "letter)")
        if name in parsed:
            raise ValueError(f"names the credential {name!r} twice")
        listed = _entries(name, raw)
        CredentialRule.parse(listed)  # each entry a CIDR or a valid glob, or ValueError naming it
        parsed[name] = listed
    return tuple(sorted(parsed.items()))


def _entries(name: str, raw: Any) -> tuple[str, ...]:
    if isinstance(raw, str):
        listed: list[Any] = raw.split(",")
    elif isinstance(raw, (list, tuple)):
        listed = list(raw)
    else:
        raise ValueError(f"{name!r}: give a list of CIDR networks and host globs")
    entries = tuple(str(entry).strip() for entry in listed if str(entry).strip())
    if not entries:
        raise ValueError(f"{name!r} lists no network or host; leave the credential out to send it nowhere")
    if len(entries) > MAX_ENTRIES_PER_CREDENTIAL:
        raise ValueError(f"{name!r} lists {len(entries)} entries, more than {MAX_ENTRIES_PER_CREDENTIAL}; "
                         "use wider networks or globs")
    return entries
