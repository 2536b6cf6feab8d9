"""The egress policy of the built-in network tools: which IP addresses they may connect to.

The tools resolve a name themselves, check every address against the policy, and connect to the checked
address (never to a second resolution of the name, which DNS rebinding could point elsewhere). Two failure
codes come from here:

    EGRESS_DENIED        the address is in a denied network, or outside every allowed one
    EGRESS_MISCONFIGURED TOOLHOST_EGRESS_ALLOW or TOOLHOST_EGRESS_DENY holds something that is not a CIDR

Use::

    policy = current_policy()       # from the environment, parsed once per distinct value
    policy.check("169.254.169.254")  # raises ToolRaisedFailure(..., code="EGRESS_DENIED")
"""

from __future__ import annotations

import functools
import ipaddress
import os
from collections.abc import Iterable, Sequence
from typing import Final

from .base import ToolRaisedFailure

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

ALLOW_ENV: Final = "TOOLHOST_EGRESS_ALLOW"
DENY_ENV: Final = "TOOLHOST_EGRESS_DENY"

# Link-local addresses and the cloud instance-metadata services, which hand out credentials to anyone on the
# machine who asks. Loopback and private ranges stay reachable: the tests and a sidecar need loopback, and an
# operator who wants them closed lists them in TOOLHOST_EGRESS_DENY.
DEFAULT_DENY: Final = (
    "169.254.0.0/16",  # IPv4 link-local, including 169.254.169.254 (AWS, GCP, Azure, OpenStack metadata)
    "fe80::/10",  # IPv6 link-local
    "fd00:ec2::254/128",  # AWS metadata over IPv6
    "100.100.100.200/32",  # Alibaba Cloud metadata
)


class EgressPolicy:
    """CIDR allow and deny lists. A denied network always wins; a non-empty allow list lets through only the
    addresses inside it. An address is judged as where a connection to it goes: an IPv6 address that embeds an
    IPv4 one (::ffff:a.b.c.d, ::a.b.c.d, NAT64 64:ff9b::/96, 6to4 2002::/16) as that IPv4 address, and the
    unspecified address (0.0.0.0, "0", ::), which reaches this host, as loopback."""

    def __init__(self, allow: Sequence[str] = (), deny: Sequence[str] = DEFAULT_DENY) -> None:
        self.allow: tuple[Network, ...] = tuple(ipaddress.ip_network(n, strict=False) for n in allow)
        self.deny: tuple[Network, ...] = tuple(ipaddress.ip_network(n, strict=False) for n in deny)

    def check(self, address: str | Address, host: str | None = None) -> None:
        """Return when the tools may connect to `address`; else raise EGRESS_DENIED saying which rule refused
        it and how to change that. `host` is the name it was resolved from, for the message."""
        given = _normalise(address)
        ip = _destination(given)
        target = str(given) if host is None or host == str(given) else f"{given} (resolved from {host!r})"
        if ip != given:
            target += f", which reaches {ip}"
        for network in self.deny:
            if ip.version == network.version and ip in network:
                raise ToolRaisedFailure(
                    f"connecting to {target} is refused by the egress policy: it is in the denied network "
                    f"{network}. An operator can change the denied networks with {DENY_ENV} (comma-separated "
                    f"CIDRs, replacing the default {','.join(DEFAULT_DENY)}).", "EGRESS_DENIED")
        if self.allow and not any(ip.version == n.version and ip in n for n in self.allow):
            raise ToolRaisedFailure(
                f"connecting to {target} is refused by the egress policy: it is in none of the allowed "
                f"networks ({', '.join(map(str, self.allow))}). An operator can add its network to "
                f"{ALLOW_ENV} (comma-separated CIDRs).", "EGRESS_DENIED")

    def check_all(self, addresses: Iterable[str | Address], host: str | None = None) -> None:
        """Check every address before any is used: a name that resolves to one denied address is refused
        whole, whatever order the resolver returns its addresses in."""
        for address in addresses:
            self.check(address, host)


def current_policy() -> EgressPolicy:
    """The policy the environment sets (TOOLHOST_EGRESS_ALLOW, TOOLHOST_EGRESS_DENY), or EGRESS_MISCONFIGURED.

    The variables are read on every call (that is cheap) and parsed once per distinct value, so a process
    that changes them, such as a test, gets the new policy without a reset. A bad value fails every network
    call with a message naming it, rather than failing the import: a built-in module that cannot import stops
    the server's discovery of all the built-in tools, and an unset policy must never mean "no policy".
    """
    return _parse(os.environ.get(ALLOW_ENV, ""), os.environ.get(DENY_ENV, ""))


@functools.lru_cache(maxsize=8)
def _parse(allow_text: str, deny_text: str) -> EgressPolicy:
    allow = _cidrs(ALLOW_ENV, allow_text)
    # Blank means unset, so an empty value cannot switch the metadata protection off by accident.
    deny = _cidrs(DENY_ENV, deny_text) or DEFAULT_DENY
    return EgressPolicy(allow, deny)


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
    or a 6to4 relay forwards to it, and Linux connects ::a.b.c.d to it), and loopback for the unspecified
    address, which the kernel takes as this host."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.sixtofour is not None:
            ip = ip.sixtofour
        elif ip in _NAT64 or (ip in _IPV4_COMPATIBLE and int(ip) > 1):  # ::a.b.c.d, but not :: and ::1
            ip = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.is_unspecified:
        return ipaddress.IPv4Address("127.0.0.1") if ip.version == 4 else ipaddress.IPv6Address("::1")
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
