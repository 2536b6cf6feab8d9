"""The egress policy of the network tools: which IP addresses they may connect to.

An address is judged in three tiers, in this order:

1. Always denied; no setting opens them: the unspecified address (0.0.0.0/8, ::), link-local networks, the
   cloud metadata services, and the networks TOOLHOST_EGRESS_DENY adds to them.
2. Closed unless an operator opens them with TOOLHOST_EGRESS_OPEN: loopback and every other address of this
   host, the private networks (RFC 1918), carrier-grade NAT space, IPv6 unique local addresses, multicast and
   broadcast. An operator opens the asset networks the diagnostics are for.
3. A non-empty TOOLHOST_EGRESS_ALLOW admits only its networks.

The tools resolve a name themselves, check every address, and connect to the checked address (never to a
second resolution of the name, which DNS rebinding could point elsewhere). Two failure codes come from here:

    EGRESS_DENIED        the address is denied, closed and not opened, or outside every allowed network
    EGRESS_MISCONFIGURED TOOLHOST_EGRESS_OPEN, _DENY or _ALLOW holds something that is not a CIDR

Use::

    policy = current_policy()       # from the environment, parsed once per distinct value
    policy.check("169.254.169.254")  # raises ToolRaisedFailure(..., code="EGRESS_DENIED")
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from .base import ToolRaisedFailure
from .this_host import is_this_host

logger = logging.getLogger("toolhost.egress")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

OPEN_ENV: Final = "TOOLHOST_EGRESS_OPEN"
DENY_ENV: Final = "TOOLHOST_EGRESS_DENY"
ALLOW_ENV: Final = "TOOLHOST_EGRESS_ALLOW"


@dataclass(frozen=True)
class Rule:
    """A network of a tier and what it is, for the refusal message."""

    network: Network
    what: str

    def holds(self, ip: Address) -> bool:
        return ip.version == self.network.version and ip in self.network


def _rules(*entries: tuple[str, str]) -> tuple[Rule, ...]:
    return tuple(Rule(ipaddress.ip_network(cidr), what) for cidr, what in entries)


# The metadata services hand out the machine's cloud credentials to anyone who asks; link-local reaches them
# and the next hop's own services; the kernel takes the unspecified address as this host, and a caller who
# means this host can write 127.0.0.1 once an operator opened loopback.
ALWAYS_DENIED: Final = _rules(
    ("0.0.0.0/8", "the unspecified address and 'this network', which reach this host"),
    ("::/128", "the unspecified address, which reaches this host"),
    ("169.254.0.0/16", "IPv4 link-local, with the cloud metadata service 169.254.169.254"),
    ("fe80::/10", "IPv6 link-local"),
    ("fd00:ec2::254/128", "the AWS metadata service over IPv6"),
    ("fd00:ec2::23/128", "the AWS EKS Pod Identity agent over IPv6, which hands out credentials"),
    ("fd20:ce::254/128", "the Google Cloud metadata service over IPv6"),
    ("fd00:42::42/128", "the Scaleway metadata service over IPv6"),
    ("100.100.100.200/32", "the Alibaba Cloud metadata service"),
    ("192.0.0.192/32", "the Oracle Cloud (Classic) metadata service"),
)

LOOPBACK: Final = _rules(
    ("127.0.0.0/8", "loopback: this host's own services"),
    ("::1/128", "loopback: this host's own services"),
)

MULTICAST: Final = _rules(
    ("224.0.0.0/4", "IPv4 multicast: every host of a network, this one included"),
    ("ff00::/8", "IPv6 multicast: every host of a network, this one included"),
    ("255.255.255.255/32", "the broadcast address: every host of the network, this one included"),
)

# Where the server's neighbours live: reachable from the server, often not from the caller, and so what a
# caller could not otherwise scan.
PRIVATE_NETWORKS: Final = _rules(
    ("10.0.0.0/8", "a private network, RFC 1918"),
    ("172.16.0.0/12", "a private network, RFC 1918"),
    ("192.168.0.0/16", "a private network, RFC 1918"),
    ("100.64.0.0/10", "carrier-grade NAT space, RFC 6598"),
    ("fc00::/7", "IPv6 unique local addresses, RFC 4193"),
)


class EgressPolicy:
    """The three tiers, with the networks an operator opened, denied and allowed (CIDR strings). An address is
    judged as where a connection to it goes: an IPv6 address that embeds an IPv4 one (::ffff:a.b.c.d,
    ::a.b.c.d, NAT64 64:ff9b::/96, 6to4 2002::/16) as that IPv4 address."""

    def __init__(self, open_networks: Sequence[str] = (), deny_networks: Sequence[str] = (),
                 allow_networks: Sequence[str] = ()) -> None:
        self.opened: tuple[Network, ...] = tuple(ipaddress.ip_network(n, strict=False) for n in open_networks)
        self.denied: tuple[Rule, ...] = ALWAYS_DENIED + tuple(
            Rule(ipaddress.ip_network(n, strict=False), f"which {DENY_ENV} denies") for n in deny_networks)
        self.allowed: tuple[Network, ...] = tuple(ipaddress.ip_network(n, strict=False) for n in allow_networks)

    def check(self, address: str | Address, host: str | None = None) -> None:
        """Return when the tools may connect to `address`; else raise EGRESS_DENIED saying which rule refused
        it and how to change that. `host` is the name it was resolved from, for the message."""
        given = _normalise(address)
        ip = _destination(given)
        target = str(given) if host is None or host == str(given) else f"{given} (resolved from {host!r})"
        if ip != given:
            target += f" (which reaches {ip})"
        refused = f"connecting to {target} is refused by the egress policy"
        for rule in self.denied:
            if rule.holds(ip):
                raise ToolRaisedFailure(f"{refused}: {self._denial(ip, rule)}", "EGRESS_DENIED")
        opener = self._opener(ip)
        if opener is None:
            closing = self._closing_rule(ip, refused)
            if closing is not None:
                network = closing.network
                smaller = "" if network.prefixlen == network.max_prefixlen else " (or a smaller network)"
                raise ToolRaisedFailure(
                    f"{refused}: it is in {network} ({closing.what}), which is closed unless an operator opens "
                    f"it: add {network}{smaller} to {OPEN_ENV} (comma-separated CIDRs).", "EGRESS_DENIED")
        if self.allowed and not any(ip.version == n.version and ip in n for n in self.allowed):
            raise ToolRaisedFailure(
                f"{refused}: it is in none of the allowed networks ({', '.join(map(str, self.allowed))}). An "
                f"operator can add its network to {ALLOW_ENV} (comma-separated CIDRs).", "EGRESS_DENIED")

    def check_all(self, addresses: Iterable[str | Address], host: str | None = None) -> None:
        """Check every address before any is used: a name that resolves to one denied address is refused
        whole, whatever order the resolver returns its addresses in."""
        for address in addresses:
            self.check(address, host)

    def _denial(self, ip: Address, rule: Rule) -> str:
        if rule not in ALWAYS_DENIED:
            return f"it is in {rule.network}, {rule.what}; an operator can remove it from {DENY_ENV}."
        reason = f"it is in {rule.network} ({rule.what}), which is always denied: no setting opens it"
        opener = self._opener(ip)
        if opener is not None:
            reason += f" ({OPEN_ENV} lists {opener}, which cannot open it)"
        return reason + "."

    def _opener(self, ip: Address) -> Network | None:
        return next((n for n in self.opened if ip.version == n.version and ip in n), None)

    @staticmethod
    def _closing_rule(ip: Address, refused: str) -> Rule | None:
        """The closed network `ip` is in, if any. This host's own addresses are told apart from the private
        network they may be in, so that the message offers to open only that address."""
        rule = next((r for r in LOOPBACK + MULTICAST if r.holds(ip)), None)
        if rule is not None:
            return rule
        try:
            local = is_this_host(ip)
        except OSError as exc:
            raise ToolRaisedFailure(
                f"{refused}: whether it is an address of this host cannot be told ({exc}), so it is refused; "
                "try again", "EGRESS_DENIED") from None
        if local:
            return Rule(ipaddress.ip_network(ip), "an address of this host: its own services")
        return next((r for r in PRIVATE_NETWORKS if r.holds(ip)), None)


def current_policy() -> EgressPolicy:
    """The policy the environment sets (TOOLHOST_EGRESS_OPEN, _DENY, _ALLOW), or EGRESS_MISCONFIGURED.

    The variables are read on every call (that is cheap) and parsed once per distinct value, so a process
    that changes them, such as a test, gets the new policy without a reset. A bad value fails every network
    call with a message naming it, rather than failing the import: a built-in module that cannot import stops
    the server's discovery of all the built-in tools, and a bad value must never mean "no policy".
    """
    return _parse(os.environ.get(OPEN_ENV, ""), os.environ.get(DENY_ENV, ""), os.environ.get(ALLOW_ENV, ""))


@functools.lru_cache(maxsize=8)
def _parse(open_text: str, deny_text: str, allow_text: str) -> EgressPolicy:
    policy = EgressPolicy(_cidrs(OPEN_ENV, open_text), _cidrs(DENY_ENV, deny_text), _cidrs(ALLOW_ENV, allow_text))
    # Once per distinct value (the parse is cached): an operator who lists a denied network in OPEN learns
    # from the log, not only from a refused call, that it stays denied.
    for network in policy.opened:
        overlapping = [str(r.network) for r in policy.denied
                       if network.version == r.network.version and network.overlaps(r.network)]
        if overlapping:
            logger.warning("%s lists %s, but %s stay denied: nothing opens the always-denied networks or "
                           "those %s lists", OPEN_ENV, network, ", ".join(overlapping), DENY_ENV)
    return policy


def _cidrs(variable: str, text: str) -> tuple[str, ...]:
    entries = tuple(entry.strip() for entry in text.split(",") if entry.strip())
    for entry in entries:
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError as exc:
            raise ToolRaisedFailure(
                f"the egress policy is misconfigured: {variable} holds {entry!r}, which is not a CIDR network "
                f"({exc}); write comma-separated networks such as 10.0.0.0/8,fd00::/8",
                "EGRESS_MISCONFIGURED") from None
    return entries


_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")
_IPV4_COMPATIBLE: Final = ipaddress.IPv6Network("::/96")


def _destination(ip: Address) -> Address:
    """Where a connection to `ip` goes, for judging it: the IPv4 address an IPv6 one embeds (a NAT64 gateway
    or a 6to4 relay forwards to it, and Linux connects ::a.b.c.d to it)."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.sixtofour is not None:
            return ip.sixtofour
        if ip in _NAT64 or (ip in _IPV4_COMPATIBLE and int(ip) > 1):  # ::a.b.c.d, but not :: and ::1
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def _normalise(address: str | Address) -> Address:
    if isinstance(address, str):
        # A scope (fe80::1%eth0) names an interface, not another address: judge the address.
        address = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.scope_id is not None:
            return ipaddress.IPv6Address(str(address).split("%", 1)[0])
    return address
