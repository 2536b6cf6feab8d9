"""What the HTTP guard (web.guard) lets through: the grammar of http_allowed_hosts and http_allowed_origins
entries, and the policy built from them once the listener knows its port.

Host entries (compared with the `Host` header, case-insensitively):

    127.0.0.1:8010       exactly this Host
    toolhost.tools.svc   this name without a port (a client on the scheme's default port, 80 or 443)
    toolhost.tools.svc:* this name with any port, or none
    [fd00::5]:8010       an IPv6 address, in brackets as clients send it
    *                    any Host: no DNS-rebinding protection (given alone; the start-up log warns)

None configured: the bound address, localhost, 127.0.0.1 and [::1], each with the bound port (a wildcard bind,
0.0.0.0 or ::, adds no name of its own). Origin entries are exact `scheme://host[:port]` as browsers send them;
"null" (sandboxed frames, file pages) is never allowed.

    policy = GuardSettings(allowed_hosts=("toolhost.tools.svc:*",)).policy("0.0.0.0", 8010)
    policy.allows_host(b"Toolhost.tools.svc:8010")  # True
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..config import Config

ANY_HOST = "*"
_ANY_PORT = "*"
# A DNS name or an IPv4 address, lowercased: what a client dials, never a pattern.
_NAME = re.compile(r"[a-z0-9_](?:[a-z0-9_.-]*[a-z0-9_])?")
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_WILDCARD_BINDS = ("", "0.0.0.0", "::")
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


def parse_allowed_hosts(entries: Iterable[str]) -> tuple[str, ...]:
    """The entries of http_allowed_hosts, lowercased and checked; ValueError saying how to write a wrong one."""
    hosts = tuple(_host_entry(entry.strip()) for entry in entries if entry.strip())
    if ANY_HOST in hosts and len(hosts) > 1:
        raise ValueError("lists '*' (any Host) with other entries; give '*' alone, or only the names clients use")
    return hosts


def parse_allowed_origins(entries: Iterable[str]) -> tuple[str, ...]:
    """The entries of http_allowed_origins, lowercased and checked; ValueError saying how to write a wrong one."""
    return tuple(_origin_entry(entry.strip()) for entry in entries if entry.strip())


def _host_entry(entry: str) -> str:
    text = entry.lower()
    if text == ANY_HOST:
        return text
    if "://" in text:
        raise ValueError(f"entry {entry!r} is a URL; give the Host a client sends, host:port, for example "
                         f"{_host_of_url(text)}")
    name, port = _split_host(text, entry)
    if port == _ANY_PORT:
        return f"{name}:{_ANY_PORT}"
    return name if port is None else f"{name}:{_port(port, entry)}"


def _origin_entry(entry: str) -> str:
    text = entry.lower()
    if text == "null":
        raise ValueError("entry 'null' is refused: sandboxed frames and local files send it, so allowing it "
                         "would allow every such page; list the origins of the pages that call the server")
    if text == "*":
        raise ValueError("entry '*' is refused: it would let every web page call the server; list the origins "
                         "of the pages that call it, as scheme://host[:port]")
    scheme, separator, rest = text.partition("://")
    if not separator or not _SCHEME.fullmatch(scheme) or not rest:
        raise ValueError(f"entry {entry!r} must be an origin, scheme://host[:port], for example "
                         "https://app.example.com")
    if any(mark in rest for mark in "/?#@"):
        raise ValueError(f"entry {entry!r} must be scheme://host[:port] alone, as browsers send it (no path, "
                         f"no trailing slash, no user): {scheme}://{_host_of_url(text)}")
    name, port = _split_host(rest, entry)
    if port == _ANY_PORT:
        raise ValueError(f"entry {entry!r}: origins are exact; list each port")
    if port is None or int(port) == _DEFAULT_PORTS.get(scheme):
        return f"{scheme}://{name}"  # browsers leave the scheme's default port out of Origin
    return f"{scheme}://{name}:{_port(port, entry)}"


def _split_host(text: str, entry: str) -> tuple[str, str | None]:
    """(name, port or None) of a lowercased host[:port], the name checked."""
    if text.startswith("["):
        address, bracket, after = text[1:].partition("]")
        if not bracket or (after and not after.startswith(":")):
            raise ValueError(f"entry {entry!r}: an IPv6 address goes in brackets, then :port, as [::1]:8010")
        try:
            ipaddress.IPv6Address(address)
        except ValueError:
            raise ValueError(f"entry {entry!r}: {address!r} is not an IPv6 address") from None
        return f"[{address}]", after[1:] if after else None
    if text.count(":") > 1:
        raise ValueError(f"entry {entry!r}: write an IPv6 address in brackets, as [::1]:8010")
    name, separator, port = text.partition(":")
    if "*" in name:
        raise ValueError(f"entry {entry!r}: names take no wildcards; list each name (name:* allows any port of "
                         "it), or give '*' alone for any Host")
    if not _NAME.fullmatch(name):
        raise ValueError(f"entry {entry!r} must be host, host:port or host:*, the host a name or an address "
                         "(letters, digits, '.', '-', '_')")
    return name, port if separator else None


def _port(text: str, entry: str) -> int:
    if not text.isdigit() or not 0 < int(text) <= 65535:
        raise ValueError(f"entry {entry!r}: the port must be 1 to 65535, or * for any port")
    return int(text)


def _host_of_url(url: str) -> str:
    return url.partition("://")[2].partition("/")[0].rpartition("@")[2] or "toolhost.example:8010"


@dataclass(frozen=True, slots=True)
class GuardPolicy:
    """The guard's rules for one bound listener. Values are ASCII-lowercased bytes, as compared with the raw
    header values: no decoding on the request path."""

    hosts: frozenset[bytes]
    any_port_names: frozenset[bytes]
    any_host: bool
    origins: frozenset[bytes]
    max_body_bytes: int
    # True when http_allowed_hosts was set: the hosts are the operator's, not the defaults.
    configured_hosts: bool
    # How long a request's body may take to arrive, from its headers on.
    body_seconds: float = 30.0

    def allows_host(self, value: bytes) -> bool:
        if self.any_host or value in self.hosts:  # the common case first: no lowercased copy
            return True
        host = value.lower()
        if host in self.hosts:
            return True
        if not self.any_port_names:
            return False
        name, colon, port = host.rpartition(b":")
        if not colon or host.endswith(b"]"):  # no port: a name, or a bracketed IPv6 address alone
            name, port = host, b""
        return name in self.any_port_names and (port == b"" or port.isdigit())

    def allows_origin(self, value: bytes) -> bool:
        return value.lower() in self.origins

    def describe(self) -> str:
        """The rule in a few words, for the start-up log line."""
        if self.any_host:
            hosts = "any Host"
        else:
            names = sorted(h.decode() for h in self.hosts) + sorted(f"{n.decode()}:*" for n in self.any_port_names)
            hosts = "Host " + ", ".join(names)
        origins = ", ".join(sorted(o.decode() for o in self.origins)) or "none"
        return f"other routes answer {hosts} (http_allowed_hosts), Origin {origins} (http_allowed_origins)"


@dataclass(frozen=True, slots=True)
class GuardSettings:
    """The guard's settings before the listener is bound: entries as parse_allowed_hosts and
    parse_allowed_origins return them (empty hosts: the defaults), the largest request body, and how long a body
    may take to arrive (a client that stops sending mid-body must not hold a connection, nor the shutdown)."""

    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    max_body_bytes: int = Config.max_message_bytes
    body_seconds: float = 30.0

    @classmethod
    def of(cls, config: Config) -> GuardSettings:
        return cls(config.http_allowed_hosts, config.http_allowed_origins, config.max_message_bytes)

    def policy(self, bind_host: str, port: int) -> GuardPolicy:
        """The policy of a listener bound to `bind_host` (as in http_address: an IPv6 address with or without
        brackets) and `port`, the one it got."""
        entries = self.allowed_hosts or default_allowed_hosts(bind_host, port)
        exact = frozenset(e.encode() for e in entries if not e.endswith(f":{_ANY_PORT}") and e != ANY_HOST)
        any_port = frozenset(e[:-2].encode() for e in entries if e.endswith(f":{_ANY_PORT}"))
        return GuardPolicy(exact, any_port, ANY_HOST in entries,
                           frozenset(o.encode() for o in self.allowed_origins), self.max_body_bytes,
                           configured_hosts=bool(self.allowed_hosts), body_seconds=self.body_seconds)


def default_allowed_hosts(bind_host: str, port: int) -> tuple[str, ...]:
    """The bound address (unless a wildcard bind, which names nothing a client dials), localhost, 127.0.0.1
    and [::1], each with `port`."""
    host = bind_host.strip().strip("[]").lower()
    names = list(_LOOPBACK_NAMES)
    if host not in _WILDCARD_BINDS:
        bound = f"[{host}]" if ":" in host else host
        if bound not in names:
            names.insert(0, bound)
    return tuple(f"{name}:{port}" for name in names)


def is_wildcard_bind(bind_host: str) -> bool:
    return bind_host.strip().strip("[]") in _WILDCARD_BINDS
