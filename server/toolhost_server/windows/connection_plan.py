"""From an asset and its credential to where and how windows_list_directory connects: the seed's "merge", and
the policy that decides, before any connection, whether the credential may go there at all.

Refusals (ToolRaisedFailure codes), in the order windows_list_directory checks them:

    INSECURE_TRANSPORT      basic authentication without TLS would send the password readable on the wire, and
                            without the operator's winrm_ca_file to whoever holds a public certificate
    CREDENTIAL_HOST_DENIED  winrm_credential_hosts has no entry for the credential (checked before it is resolved)
    MISSING_CREDENTIALS     the credential lacks a username or a password (which, only the operator's log says)
    HOST_NOT_FOUND, TIMEOUT the hostname does not resolve (in time)
    EGRESS_DENIED           an address is one the egress policy (tools/egress.py) keeps the tools away from
    CREDENTIAL_HOST_DENIED  winrm_credential_hosts does not let this credential go to an address
"""

from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..assets.model import Asset
from ..credentials.resolved import Credential
from ..tools.base import ToolRaisedFailure
from ..tools.egress import current_policy
from ..tools.net import resolve
from .credential_hosts import CredentialHosts

if TYPE_CHECKING:
    from .winrm_client import WinrmEndpoint, WinrmLogin


@dataclass(frozen=True, slots=True)
class ConnectionPlan:
    """Where to connect (every address checked) and as whom."""

    endpoint: WinrmEndpoint
    login: WinrmLogin
    # Whether the addresses came from DNS (else they are the asset's own), for the log line.
    from_dns: bool


def refuse_insecure_transport(asset: Asset, ca_file: str) -> None:
    """INSECURE_TRANSPORT for basic authentication without TLS, or without the operator's CA (`ca_file`, the
    winrm_ca_file setting). Basic hands the password itself to whichever server passes the certificate check;
    with the system's trust store and a hostname an asset editor chooses, that is anyone holding a public
    certificate for a name of theirs and a place on the path to an address the credential may go to.
    Validation refuses basic without TLS; this holds even for an asset stored before that rule, or behind it."""
    profile = asset.winrm
    if profile.authentication != "basic":
        return
    if not profile.ssl:
        raise ToolRaisedFailure(
            f"asset {asset.name!r} asks for basic authentication over plain HTTP, which would send the password "
            "readable to anyone on the way; an asset manager sets its WinRM profile to ssl true (port 5986) or to "
            "ntlm, which toolhost sends over HTTP only with message encryption", "INSECURE_TRANSPORT")
    if not ca_file:
        raise ToolRaisedFailure(
            f"asset {asset.name!r} asks for basic authentication, which sends the password to whichever server "
            "shows a certificate for the asset's hostname, and the server trusts every public CA (winrm_ca_file "
            "is not set): anyone with a public certificate for a name of theirs could receive it. An operator sets "
            "winrm_ca_file (TOOLHOST_WINRM_CA_FILE) to the CA that issues the WinRM hosts' certificates, or an "
            "asset manager sets the asset's authentication to ntlm", "INSECURE_TRANSPORT")


def merged_login(asset: Asset, credential: Credential, log: logging.Logger) -> WinrmLogin:
    """The seed's merge: the credential's username and password, and the profile's domain (else the
    credential's `domain`) in front of a username that names none yet (DOMAIN\\user, or user@domain kept).

    MISSING_CREDENTIALS when a key is missing; which one goes to `log` (the operator's), not to the caller: an
    asset editor who names any credential would otherwise learn which keys the server holds for it."""
    from .winrm_client import WinrmLogin

    missing = [key for key in ("username", "password") if not credential.get(key)]
    if missing:
        log.warning("asset %s: the credential %s has no %s, which WinRM needs", asset.name, credential.name,
                    " and no ".join(missing))
        name = credential.name
        raise ToolRaisedFailure(
            f"the server's credential {name!r}, which asset {asset.name!r} uses for WinRM, is incomplete: WinRM "
            f"needs its username and its password. An operator completes it (TOOLHOST_CRED_{name.upper()}_USERNAME "
            f"and _PASSWORD variables, the {name}.username and {name}.password files in credentials_dir, or "
            f"`toolhost credentials set {name}`); the server log says what is missing", "MISSING_CREDENTIALS")
    username = credential["username"]
    domain = asset.winrm.domain or credential.get("domain") or ""
    if domain and "\\" not in username and "@" not in username:
        username = f"{domain}\\{username}"
    return WinrmLogin(authentication=asset.winrm.authentication, username=username,
                      password=credential["password"])


async def plan_connection(asset: Asset, login: WinrmLogin, credential_name: str, hosts: CredentialHosts,
                          ca_file: str, deadline: float, budget: float) -> ConnectionPlan:
    """The endpoint for `asset`, once its transport suits its authentication (refuse_insecure_transport), its
    addresses pass the egress policy and `hosts` lets `credential_name` go to every one of them. The hostname is
    resolved once, here, unless the asset lists addresses; the client connects to these addresses and never
    resolves the name again (DNS rebinding)."""
    from .winrm_client import WinrmEndpoint

    refuse_insecure_transport(asset, ca_file)
    hostname = asset.effective_hostname
    port = asset.winrm.effective_port
    from_dns = not asset.addresses
    if from_dns:
        found = await resolve(hostname, port, deadline, budget)
        addresses = tuple(dict.fromkeys(_without_scope(str(sockaddr[0])) for _family, sockaddr in found))
    else:
        addresses = tuple(_checked_address(asset, text) for text in asset.addresses)
    current_policy().check_all(addresses, hostname)
    refusal = hosts.refusal(credential_name, hostname, addresses, from_dns)
    if refusal:
        raise ToolRaisedFailure(refusal, "CREDENTIAL_HOST_DENIED")
    # An empty ca_file means the system's trust store; the client never skips verifying the certificate.
    endpoint = WinrmEndpoint(hostname=hostname, addresses=addresses, port=port, ssl=asset.winrm.ssl,
                             ca_file=ca_file or None)
    return ConnectionPlan(endpoint, login, from_dns)


def _checked_address(asset: Asset, text: str) -> str:
    try:
        return str(ipaddress.ip_address(_without_scope(text)))
    except ValueError:
        raise ToolRaisedFailure(
            f"asset {asset.name!r} lists {text!r} among its addresses, which is no IP address; an asset manager "
            "corrects it", "INVALID_TARGET") from None


def _without_scope(text: str) -> str:
    # A link-local scope (fe80::1%eth0) is refused by the egress policy anyway; the rest has none.
    return text.split("%", 1)[0]

