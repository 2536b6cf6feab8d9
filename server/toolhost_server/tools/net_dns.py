"""The dns_lookup tool: DNS records of a name, from the server's resolver or a nameserver the caller names."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

import dns.asyncresolver
import dns.exception
import dns.inet
import dns.name
import dns.rdatatype
import dns.resolver
import dns.reversename

from ..model import Annotations, Example, Parameter
from .base import Tool, ToolContext, ToolRaisedFailure
from .egress import current_policy
from .net import HOST_MAX_LENGTH, format_seconds, time_budget

RECORD_TYPES = ("A", "AAAA", "CNAME", "MX", "NS", "TXT", "SOA", "PTR", "SRV", "CAA")
MAX_TIMEOUT_SECONDS = 30
DNS_PORT = 53

# Letters, digits, '-', '_' (SRV and DKIM names such as _sip._tcp.example.com) and dots; ':' for an IPv6
# address given with record_type PTR. No leading '-' or '.'.
_DOMAIN_PATTERN = r"^[A-Za-z0-9_:][A-Za-z0-9_.:-]*$"
# Only the characters of IPv4 and IPv6 addresses; whether it really is an address is checked on use.
_ADDRESS_PATTERN = r"^[0-9A-Fa-f.:]+$"

_OUTPUT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "canonical_name": {"type": "string", "description": "The name the records belong to, after CNAMEs."},
        "domain": {"type": "string", "description": "The domain as given."},
        "nameserver": {"type": ["string", "null"], "description": "The nameserver that answered."},
        "query_name": {"type": "string", "description": "The name asked for (the reverse name for PTR)."},
        "record_type": {"type": "string", "enum": list(RECORD_TYPES)},
        "records": {"type": "array", "items": {"type": "string"}, "description": "Zone-file text."},
        "status": {"type": "string", "enum": ["NOERROR", "NXDOMAIN"]},
        "ttl": {"type": ["integer", "null"], "description": "Seconds the records may be cached."},
    },
    "required": ["canonical_name", "domain", "nameserver", "query_name", "record_type", "records", "status",
                 "ttl"],
}


class DnsLookup(Tool):
    name = "dns_lookup"
    display_name = "DNS Lookup"
    description = (
        "Looks up the DNS records of a domain name and returns them as text, with their TTL. Use it to find "
        "a host's IPv4 (A) or IPv6 (AAAA) addresses, its aliases (CNAME), mail servers (MX), name servers "
        "(NS), TXT records such as SPF, SOA, SRV or CAA records; to find the name of an IP address, pass the "
        "address as `domain` with record_type PTR. It asks the server's own resolver unless `nameserver` "
        "names one. A name that does not exist is a normal answer: status NXDOMAIN with no records. The call "
        "fails when no nameserver answers in time or they all refuse, or when the server's egress policy "
        "does not allow the `nameserver` address."
    )
    category = "network"
    tags = ("network", "dns", "diagnostics")
    parameters = (
        Parameter("domain", "string",
                  "The name to look up, for example 'example.com' (punycode for internationalised names), "
                  "or an IP address with record_type PTR.",
                  required=True, schema={"pattern": _DOMAIN_PATTERN, "maxLength": HOST_MAX_LENGTH}),
        Parameter("record_type", "string", "Which records to ask for.", default="A", enum=RECORD_TYPES),
        Parameter("nameserver", "string",
                  "IP address of the nameserver to ask, for example '1.1.1.1'. Omit it to use the server's "
                  "resolver.", schema={"pattern": _ADDRESS_PATTERN, "maxLength": 45}),
        Parameter("nameserver_port", "integer",
                  "UDP/TCP port of the nameserver. Without `nameserver`, another port than 53 sends the server's "
                  "own resolvers' queries there, which the egress policy must allow.", default=DNS_PORT,
                  schema={"minimum": 1, "maximum": 65535}),
        Parameter("timeout_seconds", "number",
                  f"How long to wait for an answer in all, in seconds (at most {MAX_TIMEOUT_SECONDS}).",
                  default=5, schema={"exclusiveMinimum": 0, "maximum": MAX_TIMEOUT_SECONDS}),
    )
    output_schema = _OUTPUT_SCHEMA
    # Room above the largest timeout_seconds argument, so the tool's own TIMEOUT (which says what it was
    # waiting for) comes before the pipeline's.
    timeout_seconds = MAX_TIMEOUT_SECONDS + 10
    examples = (
        Example("IPv4 addresses of example.com", {"domain": "example.com"}),
        Example("Mail servers of example.com", {"domain": "example.com", "record_type": "MX"}),
        Example("Name of an IP address", {"domain": "8.8.8.8", "record_type": "PTR"}),
        Example("Ask a specific nameserver", {"domain": "example.com", "record_type": "AAAA",
                                              "nameserver": "1.1.1.1"}),
    )
    annotations = Annotations(read_only=True, idempotent=True, open_world=True)
    intents = (r"dns lookup (?:for |of )?(?P<domain>[^\s?]+)\??",)

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> dict[str, Any]:
        domain = str(arguments["domain"])
        record_type = str(arguments["record_type"])
        budget = time_budget(arguments["timeout_seconds"], context)
        qname = _query_name(domain, record_type)
        resolver = _resolver(arguments.get("nameserver"), int(arguments["nameserver_port"]))
        result: dict[str, Any] = {
            "canonical_name": qname.to_text(),
            "domain": domain,
            "nameserver": None,
            "query_name": qname.to_text(),
            "record_type": record_type,
            "records": [],
            "status": "NOERROR",
            "ttl": None,
        }
        try:
            answer = await resolver.resolve(
                qname, dns.rdatatype.from_text(record_type), lifetime=budget, raise_on_no_answer=False,
                # A name means just that name: resolv.conf search domains would answer for another one.
                search=False)
        except dns.resolver.NXDOMAIN:
            result["status"] = "NXDOMAIN"
            return result
        except dns.resolver.LifetimeTimeout:
            raise ToolRaisedFailure(
                f"no nameserver answered the {record_type} query for {qname} within {format_seconds(budget)}",
                "TIMEOUT") from None
        except dns.resolver.NoNameservers as exc:
            raise ToolRaisedFailure(
                f"no nameserver could answer the {record_type} query for {qname}: {exc}", "DNS_ERROR"
            ) from None
        except dns.exception.DNSException as exc:
            raise ToolRaisedFailure(
                f"the {record_type} query for {qname} failed: {exc}", "DNS_ERROR") from None
        result["canonical_name"] = answer.canonical_name.to_text()
        result["nameserver"] = answer.nameserver
        if answer.rrset is not None:
            # Rdata order is the DNS canonical order (numeric for addresses, by preference for MX), so the
            # same records always come back in the same order whatever order the server sent them in.
            result["records"] = [rdata.to_text() for rdata in sorted(answer.rrset)]
            result["ttl"] = answer.rrset.ttl
        return result


def _query_name(domain: str, record_type: str) -> dns.name.Name:
    if record_type == "PTR":
        try:
            return dns.reversename.from_address(str(ipaddress.ip_address(domain)))
        except ValueError:
            pass  # not an address: a reverse name such as 4.4.8.8.in-addr.arpa, looked up as given
    try:
        return dns.name.from_text(domain)
    except dns.exception.DNSException as exc:
        raise ToolRaisedFailure(f"{domain!r} is not a valid domain name: {exc}", "INVALID_TARGET") from None


def _resolver(nameserver: Any, port: int) -> dns.asyncresolver.Resolver:
    if nameserver is None:
        try:
            resolver = dns.asyncresolver.Resolver(configure=True)
        except dns.resolver.NoResolverConfiguration:
            raise ToolRaisedFailure(
                "the server has no DNS resolver configured; pass `nameserver`", "DNS_ERROR") from None
        if port != DNS_PORT:
            # The operator chose the server's resolvers, on port 53. On another port the caller picks where the
            # query goes (a datagram to any service on a loopback or private resolver address, such as
            # systemd-resolved's 127.0.0.53): the policy decides, as for a nameserver the caller names.
            current_policy().check_all(_addresses_of(resolver))
    else:
        try:
            address = str(ipaddress.ip_address(nameserver))
        except ValueError:
            raise ToolRaisedFailure(
                f"nameserver {nameserver!r} is not an IP address", "INVALID_TARGET") from None
        # The caller picks where the query goes, so the policy decides as for any other connection.
        current_policy().check(address)
        resolver = dns.asyncresolver.Resolver(configure=False)
        resolver.nameservers = [address]
    resolver.port = port
    return resolver


def _addresses_of(resolver: dns.asyncresolver.Resolver) -> list[str]:
    """The IP addresses of the resolver's nameservers; EGRESS_DENIED for one that has none (DNS over HTTPS)."""
    addresses = []
    for nameserver in resolver.nameservers:
        address = nameserver if isinstance(nameserver, str) else getattr(nameserver, "address", None)
        if not isinstance(address, str) or not dns.inet.is_address(address.split("%", 1)[0]):
            raise ToolRaisedFailure(
                f"the server's nameserver {nameserver} is no IP address the egress policy can judge, so "
                f"nameserver_port cannot move its queries; omit nameserver_port or pass `nameserver`",
                "EGRESS_DENIED")
        addresses.append(address)
    return addresses
