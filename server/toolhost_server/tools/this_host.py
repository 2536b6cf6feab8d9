"""Whether an IP address belongs to this machine, so that a connection to it reaches the server's own services.

The kernel is asked each time, not a list kept here: binding a socket to an address succeeds exactly when the
address is local (assigned to an interface; for IPv4 also inside a `local` route, such as 127.0.0.0/8, a whole
network put on loopback or an AnyIP range), and it costs a few system calls, microseconds next to the
connection the check guards. A cached list would let an address added since through, and reading the
interfaces (getifaddrs) misses the local routes.

One setting makes bind say yes to every address: `net.ipv4.ip_nonlocal_bind` (or its IPv6 twin), common on
load balancers. Where it is on, the route to the address is asked instead: a UDP socket connected to an address
of this host takes that same address as its source. That misses only addresses inside a local route that are
not assigned themselves. The setting is read again every few seconds, the addresses on every check.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import time
from typing import Final

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

_NONLOCAL_BIND: Final = {
    4: "/proc/sys/net/ipv4/ip_nonlocal_bind",
    6: "/proc/sys/net/ipv6/ip_nonlocal_bind",
}
# The setting is read again after this long: reading it costs more than the probe itself, and it changes about
# never. Until a change is seen, the other probe answers: bind refuses too much, the route misses what it misses.
_SETTING_SECONDS: Final = 10.0
_settings: dict[int, tuple[float, bool]] = {}
# Any port will do: connecting a UDP socket only picks a route and a source address; nothing is sent.
_DISCARD_PORT: Final = 9


def is_this_host(ip: Address) -> bool:
    """Whether a connection to `ip` is delivered to this machine. Raises OSError when the kernel cannot be
    asked (no file descriptors left, say); the caller should then refuse the address."""
    family = socket.AF_INET if ip.version == 4 else socket.AF_INET6
    try:
        probe = socket.socket(family, socket.SOCK_DGRAM)
    except OSError as exc:
        if exc.errno == errno.EAFNOSUPPORT:
            return False  # no IPv6 here: no address of that family is local, nor reachable at all
        raise
    with probe:
        if nonlocal_bind_allowed(ip.version):
            return _source_is_itself(probe, ip)
        return _binds(probe, ip)


def nonlocal_bind_allowed(version: int) -> bool:
    """Whether this network namespace lets a socket bind to addresses it does not have (ip_nonlocal_bind)."""
    now = time.monotonic()
    cached = _settings.get(version)
    if cached is not None and now - cached[0] < _SETTING_SECONDS:
        return cached[1]
    try:
        with open(_NONLOCAL_BIND[version], "rb") as setting:
            allowed = setting.read().strip() not in (b"", b"0")
    except OSError:
        allowed = False  # not Linux: no such setting
    _settings[version] = (now, allowed)
    return allowed


def _binds(probe: socket.socket, ip: Address) -> bool:
    try:
        probe.bind((str(ip), 0))
    except OSError as exc:
        if exc.errno == errno.EADDRNOTAVAIL:
            return False
        if exc.errno == errno.EADDRINUSE:
            return True  # the address is local; only its ephemeral ports ran out
        raise
    return True


def _source_is_itself(probe: socket.socket, ip: Address) -> bool:
    try:
        probe.connect((str(ip), _DISCARD_PORT))
    except OSError:
        return False  # no route (or a broadcast): nothing here answers a connection to it
    source = ipaddress.ip_address(str(probe.getsockname()[0]).split("%", 1)[0])
    return source == ip
