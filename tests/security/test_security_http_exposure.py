"""Security review finding 8 (issue 16): the HTTP listener's /metrics answered anyone, naming hidden tools with
their calls, outcomes and durations, and the image and manifests bound it to 0.0.0.0. HTTP now has gRPC's
exposure rules: TLS from tls_cert_file/tls_key_file (read again when they change), client certificates with
tls_client_ca_file, a non-loopback http_address refused without TLS and a way to tell scrapers apart unless
--insecure; /metrics wants the bearer token of metrics_token_file when it is set (read again when it changes).
/healthz and /readyz stay open to probes."""

from __future__ import annotations

import dataclasses
import secrets
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

import toolhost
from toolhost_server.auth import UnsafeExposureError, check_exposure
from toolhost_server.config import Config
from toolhost_server.telemetry.metrics import ToolhostMetrics
from toolhost_server.web.server import HttpServer, create_http_server

from helpers.auth import Tokens, auth_file_text, write_catalog
from helpers.certificates import CertificateAuthority, KeyPair
from helpers.servers import ServerProcess

HIDDEN = "secret_tool"  # in the catalog of helpers.auth; the agent role neither sees nor calls it
HTTP_LISTENING = rb"serving HTTP .* on (?:127\.0\.0\.1|0\.0\.0\.0):(\d+)"


@dataclass
class Pki:
    ca: CertificateAuthority
    server: KeyPair
    scraper: KeyPair  # a client certificate of the CA
    other_ca: CertificateAuthority  # trusted by nobody at first
    other_server: KeyPair
    other_scraper: KeyPair


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    ca = CertificateAuthority(directory / "ca")
    other = CertificateAuthority(directory / "other", name="other-ca")
    return Pki(ca, ca.issue_server("server"), ca.issue_client("scraper", "prometheus"),
               other, other.issue_server("other-server"), other.issue_client("other-scraper", "prometheus"))


def new_token(directory: Path, name: str = "metrics-token") -> tuple[Path, str]:
    """A metrics token file as an operator makes one (a trailing newline), and its token."""
    token = secrets.token_urlsafe(32)
    path = directory / name
    path.write_text(f"{token}\n")
    return path, token


def client_context(trusted: CertificateAuthority, identity: KeyPair | None = None) -> ssl.SSLContext:
    """A TLS client that verifies the server against `trusted` and presents `identity` when given."""
    context = ssl.create_default_context(cafile=str(trusted.certificate))
    if identity is not None:
        context.load_cert_chain(str(identity.certificate), str(identity.key))
    return context


async def get(port: int, path: str, tls: ssl.SSLContext | None = None, token: str | None = None) -> httpx.Response:
    """GET `path` of the listener on 127.0.0.1:`port` on a new connection (so a new handshake)."""
    headers = {"authorization": f"Bearer {token}"} if token is not None else {}
    scheme = "https" if tls is not None else "http"
    async with httpx.AsyncClient(verify=tls if tls is not None else True, timeout=30) as client:
        return await client.get(f"{scheme}://127.0.0.1:{port}{path}", headers=headers)


async def status(port: int, path: str, tls: ssl.SSLContext | None = None, token: str | None = None) -> int | None:
    """The status of `get`, or None when the connection ended without an answer (a refused handshake, a
    certificate the client does not trust, plaintext to a TLS listener)."""
    try:
        return (await get(port, path, tls, token)).status_code
    except httpx.TransportError:
        return None


@pytest.fixture
async def http_servers() -> AsyncIterator[Any]:
    """`await start(**config fields)` runs the server's HTTP listener in-process, as serve() builds it."""
    started: list[HttpServer] = []

    async def start(**fields: Any) -> int:
        config = dataclasses.replace(Config(), http_address="127.0.0.1:0",
                                     **{name: str(value) for name, value in fields.items()})
        metrics = ToolhostMetrics()
        metrics.call_finished(HIDDEN, "OK", 0.01, truncated=False, redacted=False)
        server = create_http_server(config, metrics, lambda: True)
        started.append(server)
        return await server.start()

    yield start
    for server in started:
        await server.stop()


# --- the finding: /metrics names hidden tools ------------------------------------------------------------------

@pytest.mark.server
async def test_metrics_names_hidden_tools_only_to_the_holder_of_the_metrics_token(tmp_path):
    tokens = Tokens.generate()
    (tmp_path / "auth.yaml").write_text(auth_file_text(tokens))
    token_file, metrics_token = new_token(tmp_path)
    server = ServerProcess("--catalog-dir", str(write_catalog(tmp_path / "catalog")),
                           "--auth-file", str(tmp_path / "auth.yaml"), "--metrics-token-file", str(token_file))
    await server.start()
    try:
        http_port = int((await server.wait_for_log(HTTP_LISTENING)).group(1))
        async with toolhost.AsyncClient(server.target, token=tokens.admin, insecure_token_ok=True) as admin:
            await admin.call_tool(HIDDEN, name="x")
        async with toolhost.AsyncClient(server.target, token=tokens.agent, insecure_token_ok=True) as agent:
            assert HIDDEN not in [tool.name async for tool in agent.list_tools()]
        anonymous = await get(http_port, "/metrics")
        # The agent's own gRPC token is no metrics token, nor is any other well-formed one.
        wrong = [await get(http_port, "/metrics", token=token) for token in (tokens.agent, secrets.token_urlsafe(32))]
        scraper = await get(http_port, "/metrics", token=metrics_token)
        probes = [await get(http_port, path) for path in ("/healthz", "/readyz")]
    finally:
        await server.stop()
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"].startswith("Bearer ")
    for refused in (anonymous, *wrong):
        assert HIDDEN not in refused.text and "toolhost_" not in refused.text
    assert [answer.status_code for answer in wrong] == [401, 401]
    assert all('error="invalid_token"' in answer.headers["www-authenticate"] for answer in wrong)
    assert scraper.status_code == 200 and f'tool="{HIDDEN}"' in scraper.text
    assert [answer.status_code for answer in probes] == [200, 200]  # probes need no token
    assert b"/metrics needs the metrics token" in server.log


async def test_a_changed_metrics_token_file_applies_from_the_next_scrape(http_servers, tmp_path):
    token_file, first = new_token(tmp_path)
    port = await http_servers(metrics_token_file=token_file)
    assert await status(port, "/metrics", token=first) == 200
    second = secrets.token_urlsafe(32)
    token_file.write_text(f"{second}\n")
    # A stat() per scrape notices the edit (by content while the mtime is too recent to tell): no waiting.
    assert await status(port, "/metrics", token=second) == 200
    assert await status(port, "/metrics", token=first) == 401
    # A rotation through a Kubernetes Secret: the file is replaced, not rewritten.
    replacement, third = new_token(tmp_path, "next-token")
    replacement.replace(token_file)
    assert (await status(port, "/metrics", token=third), await status(port, "/metrics", token=second)) == (200, 401)
    # An edit that leaves no usable token keeps the last good one rather than opening /metrics or locking it.
    token_file.write_text("short\n")
    assert await status(port, "/metrics", token=third) == 200
    assert await status(port, "/metrics", token="short") == 401
    assert await status(port, "/metrics") == 401


async def test_a_metrics_token_file_without_a_usable_token_stops_the_start(tmp_path):
    cases = {"missing": (None, "cannot read metrics_token_file"),
             "short": ("guessable\n", "at least 32 characters"),
             "spaces": ("two words " * 8, "spaces"),
             "empty": ("\n", "at least 32 characters")}
    for name, (text, message) in cases.items():
        path = tmp_path / name
        if text is not None:
            path.write_text(text)
        config = dataclasses.replace(Config(), http_address="127.0.0.1:0", metrics_token_file=str(path))
        with pytest.raises(OSError, match=message) as caught:
            create_http_server(config, ToolhostMetrics(), lambda: True)
        assert "metrics_token_file" in str(caught.value), name


# --- TLS and client certificates -----------------------------------------------------------------------------

@pytest.mark.server
async def test_http_is_served_over_tls_with_the_servers_certificate(tmp_path, pki):
    token_file, metrics_token = new_token(tmp_path)
    server = ServerProcess("--tls-cert-file", str(pki.server.certificate), "--tls-key-file", str(pki.server.key),
                           "--metrics-token-file", str(token_file))
    await server.start()
    try:
        http_port = int((await server.wait_for_log(HTTP_LISTENING)).group(1))
        verified = client_context(pki.ca)
        health = await status(http_port, "/healthz", verified)
        scraped = await get(http_port, "/metrics", verified, metrics_token)
        plaintext = await status(http_port, "/healthz")
        untrusted = await status(http_port, "/healthz", client_context(pki.other_ca))
    finally:
        await server.stop()
    assert health == 200 and scraped.status_code == 200 and "toolhost_rpc_requests_total" in scraped.text
    assert plaintext is None and untrusted is None
    assert b" over TLS; /metrics needs the metrics token" in server.log


async def test_with_tls_client_ca_file_the_http_listener_requires_a_client_certificate(http_servers, pki):
    port = await http_servers(tls_cert_file=pki.server.certificate, tls_key_file=pki.server.key,
                              tls_client_ca_file=pki.ca.certificate)
    assert await status(port, "/healthz", client_context(pki.ca)) is None  # no certificate: handshake refused
    assert await status(port, "/healthz", client_context(pki.ca, pki.other_scraper)) is None  # another CA's
    assert await status(port, "/metrics", client_context(pki.ca, pki.scraper)) == 200
    assert await status(port, "/healthz", client_context(pki.ca, pki.scraper)) == 200


async def test_renewed_tls_files_are_used_for_the_next_https_connection(http_servers, pki, tmp_path):
    cert_file, key_file, client_ca = tmp_path / "tls.crt", tmp_path / "tls.key", tmp_path / "client-ca.pem"
    for target, source in ((cert_file, pki.server.certificate), (key_file, pki.server.key),
                           (client_ca, pki.ca.certificate)):
        target.write_bytes(source.read_bytes())
    port = await http_servers(tls_cert_file=cert_file, tls_key_file=key_file, tls_client_ca_file=client_ca)
    old, new = client_context(pki.ca, pki.scraper), client_context(pki.other_ca, pki.other_scraper)
    assert (await status(port, "/healthz", old), await status(port, "/healthz", new)) == (200, None)
    # cert-manager renews the certificate under another CA, and the scrapers' CA moves with it.
    key_file.write_bytes(pki.other_server.key.read_bytes())
    cert_file.write_bytes(pki.other_server.certificate.read_bytes())
    client_ca.write_bytes(pki.other_ca.certificate.read_bytes())
    assert (await status(port, "/healthz", new), await status(port, "/healthz", old)) == (200, None)
    # Files that do not make a certificate (a half-written update) keep the last good one in use.
    cert_file.write_text("not a certificate\n")
    assert await status(port, "/healthz", new) == 200


# --- a non-loopback http_address -------------------------------------------------------------------------------

@pytest.mark.parametrize(("extra", "message"), [
    ((), b"refusing to serve /metrics in plaintext on http_address 0.0.0.0:0"),
    (("--metrics-token-file", "TOKEN"), b"refusing to serve the metrics token in plaintext on http_address"),
    (("--tls-cert-file", "CERT", "--tls-key-file", "KEY"),
     b"refusing to serve /metrics on http_address 0.0.0.0:0 to anyone who reaches it"),
    # The metrics token guards /metrics only: /mcp calls tools, so it needs the callers' authentication too.
    (("--tls-cert-file", "CERT", "--tls-key-file", "KEY", "--metrics-token-file", "TOKEN"),
     b"refusing to serve /mcp and /ai/tools on http_address 0.0.0.0:0 without authentication"),
])
@pytest.mark.server
async def test_a_non_loopback_http_address_without_tls_and_authentication_is_refused(tmp_path, pki, extra, message):
    token_file, _ = new_token(tmp_path)
    files = {"TOKEN": str(token_file), "CERT": str(pki.server.certificate), "KEY": str(pki.server.key)}
    process = ServerProcess("--http-address", "0.0.0.0:0", *(files.get(arg, arg) for arg in extra))
    with pytest.raises(RuntimeError, match="server exited before listening"):
        await process.start()
    assert await process.wait() == 1
    assert message in process.log
    for setting in (b"tls_client_ca_file", b"--insecure", b"127.0.0.1"):
        assert setting in process.log
    assert b"metrics_token_file" in process.log or b"auth_file" in process.log
    assert b"Traceback" not in process.log


@pytest.mark.parametrize("protected", [False, True], ids=["insecure", "tls-and-token"])
@pytest.mark.server
async def test_a_non_loopback_http_address_serves_with_tls_and_a_token_or_insecure(tmp_path, pki, protected):
    token_file, metrics_token = new_token(tmp_path)
    if protected:
        auth_file = tmp_path / "auth.yaml"
        auth_file.write_text(auth_file_text(Tokens.generate()))
        extra = ("--tls-cert-file", str(pki.server.certificate), "--tls-key-file", str(pki.server.key),
                 "--metrics-token-file", str(token_file), "--auth-file", str(auth_file))
    else:
        extra = ("--insecure",)
    process = ServerProcess("--http-address", "0.0.0.0:0", *extra)
    await process.start()
    try:
        listening = await process.wait_for_log(HTTP_LISTENING)
        assert listening.group(0).endswith(b"0.0.0.0:" + listening.group(1))
        port = int(listening.group(1))
        if protected:
            answer = await status(port, "/metrics", client_context(pki.ca), metrics_token)
        else:
            answer = await status(port, "/metrics")
    finally:
        await process.stop()
    assert answer == 200


def test_the_http_exposure_rules():
    base = Config()
    tls = {"tls_cert_file": "c.pem", "tls_key_file": "k.pem"}
    allowed = [
        {},  # 127.0.0.1:8010, the default
        {"http_address": "localhost:8010"},
        {"http_address": "[::1]:8010"},
        {"http_address": ""},  # HTTP off
        {"http_address": "0.0.0.0:8010", "insecure": True},
        {"http_address": "0.0.0.0:8010", **tls, "metrics_token_file": "t", "auth_file": "auth.yaml"},
        {"http_address": "0.0.0.0:8010", **tls, "tls_client_ca_file": "ca.pem"},
    ]
    for fields in allowed:
        check_exposure(dataclasses.replace(base, **fields))
    refused = [
        {"http_address": "0.0.0.0:8010"},
        {"http_address": ":8010"},  # every interface too
        {"http_address": "10.0.0.5:8010", "metrics_token_file": "t"},
        {"http_address": "[::]:8010", **tls},
        # gRPC's protection does not cover HTTP: its auth file tells gRPC callers apart, not scrapers.
        {"grpc_address": "0.0.0.0:50051", "http_address": "0.0.0.0:8010", **tls, "auth_file": "auth.yaml"},
        # The metrics token is no caller's authentication: /mcp would call tools for anyone.
        {"http_address": "0.0.0.0:8010", **tls, "metrics_token_file": "t"},
    ]
    for fields in refused:
        with pytest.raises(UnsafeExposureError, match="http_address"):
            check_exposure(dataclasses.replace(base, **fields))
