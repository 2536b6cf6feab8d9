"""This machine's own addresses other than loopback, for the tests of the egress policy's "this host" tier."""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import socket
import struct

# Documentation addresses: connecting a UDP socket to one only picks the route and the source address that
# would carry a packet there. Nothing is sent.
_FAR_AWAY = ((socket.AF_INET, "203.0.113.1"), (socket.AF_INET6, "2001:db8::1"))
_SIOCGIFADDR = 0x8915


def non_loopback_address() -> str | None:
    """An address of this machine that is neither loopback nor link-local, IPv4 first; None when it has none.

    The source address of the default route, else the first IPv4 address of an interface."""
    for family, destination in _FAR_AWAY:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            try:
                probe.connect((destination, 9))
            except OSError:
                continue  # no route of this family
            if _usable(probe.getsockname()[0]):
                return str(probe.getsockname()[0])
    for _index, name in socket.if_nameindex():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe, contextlib.suppress(OSError):
            request = struct.pack("256s", name.encode()[:15])
            address = socket.inet_ntoa(fcntl.ioctl(probe.fileno(), _SIOCGIFADDR, request)[20:24])
            if _usable(address):
                return address
    return None


def _usable(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    return not (ip.is_loopback or ip.is_link_local or ip.is_unspecified)
