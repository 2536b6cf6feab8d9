"""Authentication and authorization against real servers: TLS and mTLS with certificates made by openssl,
bearer tokens from the Python client and the CLI, roles filtering what is listed and called, the trusted unix
socket, reloading the auth file and the certificate, and refusing to expose a server without protection."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

import toolhost
from toolhost.v1 import tool_service_pb2, tool_service_pb2_grpc
from toolhost_server.auth import AuthFileError, hash_token, read_auth_file
from toolhost_server.auth.reloading_auth_file import ReloadingAuthFile

from helpers.auth import AGENT_SEES, EVERY_TOOL, GREET, Tokens, auth_file_text, write_catalog
from helpers.catalogs import write_tool
from helpers.certificates import CertificateAuthority, KeyPair
from helpers.cli import toolhost as run_cli
from helpers.servers import RunningServer, ServerFactory, ServerProcess


@dataclass
class Pki:
    ca: CertificateAuthority
    server: KeyPair
    agent: KeyPair  # common name agent-1
    viewer: KeyPair  # listed by its SPIFFE id (a SAN), not its common name
    stranger: KeyPair  # signed by the CA, listed nowhere


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    ca = CertificateAuthority(tmp_path_factory.mktemp("pki"))
    return Pki(ca, ca.issue_server("server"), ca.issue_client("agent", "agent-1"),
               ca.issue_client("viewer", "viewer-1", "URI:spiffe://example.org/viewer"),
               ca.issue_client("stranger", "stranger"))


@pytest.fixture
def tokens() -> Tokens:
    return Tokens.generate()


CERTIFICATE_ENTRIES = """\
certificates:
  - {common_name: agent-1, roles: [agent]}
  - {san: "spiffe://example.org/viewer", name: viewer-workload, roles: [viewer]}
"""


@pytest.fixture
async def tls_server(start_server: ServerFactory, tmp_path: Path, pki: Pki, tokens: Tokens) -> RunningServer:
    """A server with the full catalog, TLS and the token auth file."""
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text(auth_file_text(tokens))
    return await start_server(catalog_dirs=[write_catalog(tmp_path / "catalog")], auth_file=auth_file,
                              tls_cert_file=pki.server.certificate, tls_key_file=pki.server.key)


def client(server: RunningServer, pki: Pki, token: str | None = None, **kwargs: Any) -> toolhost.AsyncClient:
    return toolhost.AsyncClient(server.target, root_certificates=pki.ca.certificate, token=token, timeout=10,
                                **kwargs)


async def names(connected: toolhost.AsyncClient) -> list[str]:
    return [tool.name async for tool in connected.list_tools()]


async def rejection(request: Awaitable[Any]) -> toolhost.ToolhostError:
    with pytest.raises(toolhost.ToolhostError) as caught:
        await request
    return caught.value


# --- tokens over TLS -------------------------------------------------------------------------------------------


async def test_token_auth_from_the_python_client_over_tls(tls_server, pki, tokens):
    async with client(tls_server, pki, tokens.agent) as agent:
        assert await names(agent) == AGENT_SEES
        assert (await agent.call_tool("echo_one", name="tls")).output == "Hello, tls."
    for wrong in (secrets.token_urlsafe(32), "too-short"):
        async with client(tls_server, pki, wrong) as impostor:
            error = await rejection(impostor.call_tool("echo_one", name="x"))
            assert isinstance(error, toolhost.UnauthenticatedError)
            assert error.reason == toolhost.ErrorReason.UNAUTHENTICATED
            assert wrong not in error.message
    async with client(tls_server, pki) as anonymous:
        for request in (names(anonymous), anonymous.get_tool("echo_one"), anonymous.reload()):
            error = await rejection(request)
            assert isinstance(error, toolhost.UnauthenticatedError), error
            assert "Bearer" in error.message


async def test_the_blocking_client_sends_its_token_over_tls(tls_server, pki, tokens):
    def listing() -> list[str]:
        with toolhost.Client(tls_server.target, root_certificates=pki.ca.certificate.read_bytes(),
                             token=tokens.viewer, timeout=10) as viewer:
            return [tool.name for tool in viewer.list_tools()]

    assert await asyncio.to_thread(listing) == EVERY_TOOL


async def test_the_client_refuses_to_send_a_token_in_plaintext(start_server, tmp_path, tokens):
    with pytest.raises(ValueError, match="plaintext"):
        toolhost.Client("192.0.2.1:50051", token=tokens.agent)
    with pytest.raises(ValueError, match="insecure_token_ok"):
        toolhost.Client("127.0.0.1:50051", token=tokens.agent)
    # On loopback, with the explicit opt-in, a server without TLS takes tokens (local development).
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text(auth_file_text(tokens))
    server = await start_server(catalog_dirs=[write_catalog(tmp_path / "catalog")], auth_file=auth_file)
    async with toolhost.AsyncClient(server.target, token=tokens.agent, insecure_token_ok=True) as agent:
        assert await names(agent) == AGENT_SEES


# --- roles -----------------------------------------------------------------------------------------------------


async def test_roles_filter_list_get_and_call(tls_server, pki, tokens):
    async with client(tls_server, pki, tokens.agent) as agent, client(tls_server, pki, tokens.viewer) as viewer:
        assert (await agent.get_tool("net_probe")).name == "net_probe"
        for request in (agent.get_tool("secret_tool"), agent.call_tool("secret_tool", name="x")):
            error = await rejection(request)
            assert isinstance(error, toolhost.NotFoundError)
            assert error.reason == toolhost.ErrorReason.TOOL_NOT_FOUND
        assert (await agent.call_tool("net_probe", name="agent")).success

        assert await names(viewer) == EVERY_TOOL
        assert (await viewer.get_tool("secret_tool")).name == "secret_tool"
        error = await rejection(viewer.call_tool("echo_one", name="x"))
        assert isinstance(error, toolhost.PermissionDeniedError)
        assert error.reason == toolhost.ErrorReason.PERMISSION_DENIED
        assert "viewer-token" in error.message


async def test_a_requires_admin_tool_needs_the_admin_role(tls_server, pki, tokens):
    async with client(tls_server, pki, tokens.agent) as agent, client(tls_server, pki, tokens.admin) as admin:
        error = await rejection(agent.call_tool("admin_tool", name="x"))
        assert isinstance(error, toolhost.PermissionDeniedError)
        assert "requires the admin role" in error.message
        assert (await admin.call_tool("admin_tool", name="root")).output == "Hello, root."


async def test_reload_needs_the_admin_role(tls_server, pki, tokens):
    async with client(tls_server, pki, tokens.agent) as agent, client(tls_server, pki, tokens.admin) as admin:
        error = await rejection(agent.reload())
        assert isinstance(error, toolhost.PermissionDeniedError)
        assert "Reload needs the admin role" in error.message
        assert (await admin.reload()).success


async def test_page_tokens_are_bound_to_the_callers_roles(tls_server, pki, tokens):
    async with client(tls_server, pki, tokens.viewer) as viewer, client(tls_server, pki, tokens.agent) as agent:
        first = await viewer.list_tools_page(page_size=1)
        assert first.next_page_token
        error = await rejection(agent.list_tools_page(page_size=1, page_token=first.next_page_token))
        assert error.reason == toolhost.ErrorReason.INVALID_PAGE_TOKEN
        second = await viewer.list_tools_page(page_size=1, page_token=first.next_page_token)
        assert [t.name for t in second.tools] == EVERY_TOOL[1:2]


async def test_watch_tools_shows_only_the_tools_the_caller_sees(tls_server, pki, tokens, tmp_path):
    async with client(tls_server, pki, tokens.agent) as agent:
        watch = agent.watch_tools()
        first = await watch.__anext__()
        assert sorted(first.added) == AGENT_SEES and first.count == len(AGENT_SEES)
        write_tool(tmp_path / "catalog", "echo_two", f"name: echo_two\ndescription: Another.\n{GREET}")
        write_tool(tmp_path / "catalog", "secret_two", f"name: secret_two\ndescription: Hidden.\n{GREET}")
        await tls_server.toolhost.reloader.reload("test")
        change = await asyncio.wait_for(watch.__anext__(), 10)
        assert list(change.added) == ["echo_two"] and change.count == len(AGENT_SEES) + 1
        await watch.aclose()


async def test_a_stream_call_of_a_hidden_tool_is_not_found(tls_server, pki, tokens):
    credentials = grpc.ssl_channel_credentials(pki.ca.certificate.read_bytes())
    async with grpc.aio.secure_channel(tls_server.target, credentials) as channel:
        stub = tool_service_pb2_grpc.ToolServiceStub(channel)
        stream = stub.StreamCallTool(tool_service_pb2.StreamCallToolRequest(name="secret_tool"),
                                     metadata=(("authorization", f"Bearer {tokens.agent}"),))
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for _ in stream:
                pass
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND


# --- hidden tools are indistinguishable from unknown ones ------------------------------------------------------


async def raw_rejection(server: RunningServer, pki: Pki, token: str, method: str, name: str) -> tuple[Any, ...]:
    """Everything a caller receives for a failed call: code, details and the trailers (which carry the binary
    google.rpc.Status in grpc-status-details-bin)."""
    credentials = grpc.ssl_channel_credentials(pki.ca.certificate.read_bytes())
    async with grpc.aio.secure_channel(server.target, credentials) as channel:
        stub = tool_service_pb2_grpc.ToolServiceStub(channel)
        request = (tool_service_pb2.GetToolRequest(name=name) if method == "GetTool"
                   else tool_service_pb2.CallToolRequest(name=name, arguments_json='{"name": "x"}'))
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await getattr(stub, method)(request, metadata=(("authorization", f"Bearer {token}"),))
    error = caught.value
    trailers = tuple((key, value) for key, value in error.trailing_metadata() or () if key != "user-agent")
    return error.code(), error.details(), trailers


async def test_a_hidden_tool_called_by_name_gets_the_same_bytes_as_an_unknown_one(
        start_server, tmp_path, pki, tokens):
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text(auth_file_text(tokens))
    tls = {"auth_file": auth_file, "tls_cert_file": pki.server.certificate, "tls_key_file": pki.server.key}
    with_it = await start_server(catalog_dirs=[write_catalog(tmp_path / "with")], **tls)
    without_it = await start_server(
        catalog_dirs=[write_catalog(tmp_path / "without", [n for n in EVERY_TOOL if n != "secret_tool"])], **tls)
    for method in ("CallTool", "GetTool"):
        hidden = await raw_rejection(with_it, pki, tokens.agent, method, "secret_tool")
        unknown = await raw_rejection(without_it, pki, tokens.agent, method, "secret_tool")
        assert hidden[0] == grpc.StatusCode.NOT_FOUND
        assert dict(hidden[2]).get("grpc-status-details-bin"), "the rich status must be compared too"
        assert hidden == unknown
    # The admin sees the tool, so the same name is no error for it: the comparison above is about visibility.
    async with client(with_it, pki, tokens.admin) as admin:
        assert (await admin.get_tool("secret_tool")).name == "secret_tool"


async def test_suggestions_never_name_a_hidden_tool(tls_server, pki, tokens):
    async with client(tls_server, pki, tokens.agent) as agent, client(tls_server, pki, tokens.admin) as admin:
        for request in (agent.call_tool("secret_tol", name="x"), agent.get_tool("secret_tol")):
            error = await rejection(request)
            assert isinstance(error, toolhost.NotFoundError)
            assert "secret_tool" not in error.message
        # Suggestions still work over what the caller sees, and the admin is offered the tool.
        assert "'echo_one'" in (await rejection(agent.get_tool("echo_on"))).message
        assert "'secret_tool'" in (await rejection(admin.get_tool("secret_tol"))).message


# --- mTLS ------------------------------------------------------------------------------------------------------


async def test_a_client_certificate_subject_maps_to_roles(start_server, tmp_path, pki, tokens):
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text(auth_file_text(tokens, certificates=CERTIFICATE_ENTRIES))
    server = await start_server(catalog_dirs=[write_catalog(tmp_path / "catalog")], auth_file=auth_file,
                                tls_cert_file=pki.server.certificate, tls_key_file=pki.server.key,
                                tls_client_ca_file=pki.ca.certificate)

    def with_certificate(pair: KeyPair, token: str | None = None) -> toolhost.AsyncClient:
        return client(server, pki, token, client_certificate=pair.certificate, client_key=pair.key)

    async with with_certificate(pki.agent) as agent, with_certificate(pki.viewer) as viewer:
        assert await names(agent) == AGENT_SEES  # by common name
        assert await names(viewer) == EVERY_TOOL  # by SAN
        error = await rejection(viewer.call_tool("echo_one", name="x"))
        assert "viewer-workload" in error.message
    async with with_certificate(pki.stranger) as stranger:
        error = await rejection(names(stranger))
        assert isinstance(error, toolhost.UnauthenticatedError)
        assert "'stranger'" in error.message
    async with with_certificate(pki.stranger, tokens.admin) as stranger_with_token:
        assert (await stranger_with_token.reload()).success  # a token, when sent, decides the roles
    async with client(server, pki, tokens.admin) as no_certificate:
        assert isinstance(await rejection(names(no_certificate)), toolhost.UnavailableError)  # the handshake fails


async def test_a_client_ca_without_an_auth_file_admits_every_certificate_it_signed(start_server, tmp_path, pki):
    server = await start_server(catalog_dirs=[write_catalog(tmp_path / "catalog")],
                                tls_cert_file=pki.server.certificate, tls_key_file=pki.server.key,
                                tls_client_ca_file=pki.ca.certificate)
    async with client(server, pki, client_certificate=pki.stranger.certificate,
                      client_key=pki.stranger.key) as stranger:
        assert set(EVERY_TOOL) < set(await names(stranger))
        assert (await stranger.reload()).success


# --- the unix socket -------------------------------------------------------------------------------------------


async def test_the_trusted_unix_socket_is_admin_and_an_untrusted_one_needs_a_token(
        start_server, tmp_path, pki, tokens):
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text(auth_file_text(tokens))
    catalog = write_catalog(tmp_path / "catalog")
    common = {"catalog_dirs": [catalog], "auth_file": auth_file, "tls_cert_file": pki.server.certificate,
              "tls_key_file": pki.server.key}
    await start_server(unix_socket=str(tmp_path / "trusted.sock"), trusted_unix_socket=True, **common)
    await start_server(unix_socket=str(tmp_path / "plain.sock"), **common)
    async with toolhost.AsyncClient(f"unix:{tmp_path / 'trusted.sock'}", timeout=10) as sidecar:
        assert set(EVERY_TOOL) < set(await names(sidecar))
        assert (await sidecar.call_tool("admin_tool", name="sidecar")).success
        assert (await sidecar.reload()).success
    async with toolhost.AsyncClient(f"unix:{tmp_path / 'plain.sock'}", timeout=10) as local:
        assert isinstance(await rejection(names(local)), toolhost.UnauthenticatedError)
    async with toolhost.AsyncClient(f"unix:{tmp_path / 'plain.sock'}", token=tokens.agent, insecure_token_ok=True,
                                    timeout=10) as local_agent:
        assert await names(local_agent) == AGENT_SEES


async def test_health_needs_no_credentials(tls_server, pki):
    credentials = grpc.ssl_channel_credentials(pki.ca.certificate.read_bytes())
    async with grpc.aio.secure_channel(tls_server.target, credentials) as channel:
        response = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert response.status == health_pb2.HealthCheckResponse.SERVING


# --- reloading -------------------------------------------------------------------------------------------------


async def test_an_edited_auth_file_applies_to_the_next_call_and_a_broken_edit_keeps_the_last_good(
        tls_server, pki, tokens, tmp_path, caplog):
    auth_file = tmp_path / "auth.yaml"
    async with client(tls_server, pki, tokens.agent) as agent:
        assert isinstance(await rejection(agent.get_tool("secret_tool")), toolhost.NotFoundError)
        auth_file.write_text(auth_file_text(tokens, agent_calls='["echo_*", admin_tool, secret_tool]'))
        assert (await agent.call_tool("secret_tool", name="now")).output == "Hello, now."

        auth_file.write_text(auth_file_text(tokens).replace("roles: [agent]", "roles: [agnet]"))
        assert (await agent.call_tool("secret_tool", name="still")).output == "Hello, still."
        line = next(number for number, row in enumerate(auth_file.read_text().splitlines(), 1) if "agnet" in row)
        assert f"{auth_file}:{line}: role 'agnet' is not defined" in caplog.text

        auth_file.write_text(auth_file_text(tokens))
        assert isinstance(await rejection(agent.get_tool("secret_tool")), toolhost.NotFoundError)


def test_auth_file_errors_name_the_file_and_line(tmp_path):
    cases = {
        "roles:\n  agent:\n    call: {tools: [x]}\n    lisst: {tools: [y]}\n": (4, "unknown key 'lisst'"),
        "tokens:\n  - {name: t, sha256: abc, roles: [r]}\n": (2, "64 hex digits"),
        "roles: {r: {}}\ncertificates:\n  - {roles: [r]}\n": (3, "exactly one of common_name and san"),
        "roles: [\n": (2, "YAML"),
    }
    for text, (line, reason) in cases.items():
        path = tmp_path / "auth.yaml"
        path.write_text(text)
        with pytest.raises(AuthFileError) as caught:
            read_auth_file(path)
        assert caught.value.line == line, text
        assert reason in caught.value.reason, text
        assert str(caught.value).startswith(f"{path}:{line}: ")


def test_an_edit_within_one_tick_of_the_file_clock_is_noticed(tmp_path):
    path = tmp_path / "auth.yaml"
    path.write_text("roles: {r: {call: {tools: [aaaa]}}}\n")
    before = path.stat()
    auth_file = ReloadingAuthFile(path)
    assert auth_file.current().roles["r"].call.names == ("aaaa",)
    path.write_text("roles: {r: {call: {tools: [bbbb]}}}\n")
    # Same size and inode; the filesystem clock had not ticked: the stat fields are those of the first version.
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_mtime_ns == before.st_mtime_ns and path.stat().st_size == before.st_size
    assert auth_file.current().roles["r"].call.names == ("bbbb",)


async def test_a_renewed_tls_certificate_is_served_to_new_connections(start_server, tmp_path, pki, tokens):
    cert_file, key_file = tmp_path / "tls.pem", tmp_path / "tls.key"
    cert_file.write_bytes(pki.server.certificate.read_bytes())
    key_file.write_bytes(pki.server.key.read_bytes())
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text(auth_file_text(tokens))
    server = await start_server(catalog_dirs=[write_catalog(tmp_path / "catalog")], auth_file=auth_file,
                                tls_cert_file=cert_file, tls_key_file=key_file)
    other_ca = CertificateAuthority(tmp_path / "other-ca", name="other-ca")
    renewed = other_ca.issue_server("renewed")

    async def lists_with(ca: CertificateAuthority) -> bool:
        # A channel of its own (no shared subchannel), so the handshake is a new connection's.
        async with toolhost.AsyncClient(server.target, root_certificates=ca.certificate, token=tokens.agent,
                                        timeout=5) as connected:
            try:
                return await names(connected) == AGENT_SEES
            except toolhost.UnavailableError:
                return False

    assert await lists_with(pki.ca) and not await lists_with(other_ca)
    key_file.write_bytes(renewed.key.read_bytes())
    cert_file.write_bytes(renewed.certificate.read_bytes())
    assert await lists_with(other_ca) and not await lists_with(pki.ca)


# --- refusing unprotected exposure, and the command line -------------------------------------------------------


@pytest.mark.parametrize(("extra", "message"), [
    ((), b"refusing to serve plaintext without authentication on 0.0.0.0:0"),
    (("--auth-file", "AUTH"), b"refusing to serve bearer tokens in plaintext on 0.0.0.0:0"),
    (("--tls-cert-file", "CERT", "--tls-key-file", "KEY"), b"without authentication: anyone reaching it"),
])
@pytest.mark.server
async def test_a_non_loopback_address_without_authentication_is_refused(tmp_path, pki, tokens, extra, message):
    (tmp_path / "auth.yaml").write_text(auth_file_text(tokens))
    files = {"AUTH": str(tmp_path / "auth.yaml"), "CERT": str(pki.server.certificate), "KEY": str(pki.server.key)}
    process = ServerProcess(*(files.get(arg, arg) for arg in extra), address="0.0.0.0:0")
    with pytest.raises(RuntimeError, match="server exited before listening"):
        await process.start()
    assert await process.wait() == 1
    assert message in process.log
    assert b"--insecure" in process.log and b"Traceback" not in process.log


@pytest.mark.server
async def test_a_broken_auth_file_stops_the_start(tmp_path):
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text("roles:\n  agent: {call: {tools: [echo]}}\n"
                         "tokens:\n  - {name: t, sha256: nothex, roles: [agent]}\n")
    process = ServerProcess("--auth-file", str(auth_file))
    with pytest.raises(RuntimeError, match="server exited before listening"):
        await process.start()
    assert await process.wait() == 1
    assert f"cannot start: {auth_file}:4: sha256 must be 64 hex digits".encode() in process.log


@pytest.mark.server
async def test_insecure_allows_a_non_loopback_address(tmp_path):
    process = ServerProcess("--insecure", "--catalog-dir", str(write_catalog(tmp_path / "catalog")),
                            address="0.0.0.0:0")
    try:
        assert await process.start() > 0
    finally:
        await process.stop()


async def test_hash_token_reads_stdin_and_refuses_short_tokens(tokens):
    status, out, _ = await run_cli("auth", "hash-token", stdin=f"{tokens.agent}\n".encode())
    assert (status, out.strip()) == (0, hash_token(tokens.agent))
    status, out, err = await run_cli("auth", "hash-token", stdin=b"password\n")
    assert status == 2 and not out and "at least 32 characters" in err


async def test_the_cli_connects_with_tls_and_a_token_file(tls_server, pki, tokens, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(tokens.agent + "\n")
    common = ("--target", tls_server.target, "--tls-ca", str(pki.ca.certificate))
    status, out, err = await run_cli("tools", "list", "--json", *common, "--token-file", str(token_file))
    assert status == 0, err
    assert [tool["name"] for tool in json.loads(out)] == AGENT_SEES
    status, _, err = await run_cli("reload", *common)
    assert status == 1 and "UNAUTHENTICATED" in err and "--token-file" in err
    status, _, err = await run_cli("reload", "--target", "192.0.2.1:50051", "--token-file", str(token_file))
    assert status == 2 and "plaintext" in err

