"""/mcp from an attacker's side: raw JSON-RPC posts a client library would never send, against a real server
with an auth file. Another caller's call cannot be cancelled; malformed, deep, batched and oversized bodies
run nothing; secrets stay redacted; a hidden tool's name never leaks, and a hidden tool is answered exactly as
a missing one."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from contextlib import AsyncExitStack
from types import SimpleNamespace
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from toolhost_server.auth import ANONYMOUS, Authenticator
from toolhost_server.config import Config
from toolhost_server.errors import UnauthenticatedError
from toolhost_server.mcp.listen_streams import ListenStreams
from toolhost_server.mcp.local_backend import PAGE_SIZE
from toolhost_server.tools.base import ToolRaisedFailure
from toolhost_server.web.http_auth import HttpAuthentication

from helpers.auth import Tokens, auth_file_text
from helpers.auth import write_catalog as write_role_catalog
from helpers.catalogs import write_tool
from helpers.gates import gated_tool, new_gate
from helpers.guarded_http import chunk, raw_request
from helpers.mcp_http import (
    ERAS,
    bearer,
    jsonrpc_headers,
    mcp_client,
    messages_of,
    post_jsonrpc,
    request,
    serving_mcp,
)
from helpers.waiting import HANG_GUARD_SECONDS, eventually, within

SECRET = "hunter2hunter2"  # hidden by the redactor after `password=`
MAX_BODY = 64 * 1024
CALLS: list[dict[str, Any]] = []  # every call of the `counted` tool, by any test


def count_call(**arguments: Any) -> str:
    CALLS.append(arguments)
    return "counted"


def leak_password() -> str:
    return f"connected with password={SECRET}"


def fail_with_password() -> str:
    raise ToolRaisedFailure(f"login refused for password={SECRET}", "LOGIN_FAILED")


def crash_with_password() -> str:
    raise RuntimeError(f"cannot log in with password={SECRET}")


@pytest.fixture
def tokens() -> Tokens:
    return Tokens.generate()


@pytest.fixture
async def server(start_server, tmp_path, tokens):
    catalog = write_role_catalog(tmp_path / "catalog")
    write_tool(catalog, "echo_gated", gated_tool("echo_gated"))  # the agent may call echo_*
    for name, entrypoint in (("echo_counted", "count_call"), ("echo_leaky", "leak_password"),
                             ("echo_failing", "fail_with_password"), ("echo_crashing", "crash_with_password")):
        write_tool(catalog, name, f"name: {name}\ndescription: Test.\n"
                   f"runner: {{type: python, entrypoint: 'test_security_mcp:{entrypoint}'}}\n"
                   "input_schema: {type: object}\n")
    for index in range(PAGE_SIZE + 1):  # more than a page for the admin, none of it for the agent
        write_tool(catalog, f"gen_{index:03d}", f"name: gen_{index:03d}\ndescription: Generated.\n"
                   "category: generated\n"
                   "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:greet'}\n"
                   "parameters: [{name: name, type: string, required: true}]\n")
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text(auth_file_text(tokens))
    return await start_server(catalog_dirs=[catalog], auth_file=str(auth_file), max_message_bytes=MAX_BODY)


@pytest.fixture
async def mcp(server):
    async with serving_mcp(server) as serving:
        yield serving


def cancel(request_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "stop"}}


def call(name: str, arguments: Any, era: str = "legacy", request_id: Any = 1) -> dict[str, Any]:
    return request("tools/call", {"name": name, "arguments": arguments}, era, request_id)


async def test_another_caller_cannot_cancel_a_call_by_its_id(mcp, tokens):
    gate_name, gate = new_gate()
    running = asyncio.ensure_future(post_jsonrpc(mcp.url, call("echo_gated", {"gate": gate_name}, request_id=7),
                                                 tokens.admin))
    await within(gate.started.wait(), "the admin's call to start")
    # The agent guesses the id, as an int and as the string a client may echo.
    for guessed in (7, "7"):
        answer, _ = await post_jsonrpc(mcp.url, cancel(guessed), tokens.agent)
        assert answer.status_code == 202
    assert len(mcp.endpoint.calls) == 1
    gate.release.set()
    answer, messages = await within(running, "the admin's call to finish")
    assert answer.status_code == 200
    assert messages[-1]["id"] == 7 and messages[-1]["result"]["content"][0]["text"] == "done"


async def test_the_same_caller_cancels_its_call_by_a_posted_notification(mcp, tokens):
    gate_name, gate = new_gate()
    running = asyncio.ensure_future(post_jsonrpc(mcp.url, call("echo_gated", {"gate": gate_name}, request_id=8),
                                                 tokens.agent))
    await within(gate.started.wait(), "the call to start")
    answer, _ = await post_jsonrpc(mcp.url, cancel("8"), tokens.agent)
    assert answer.status_code == 202
    _, messages = await within(running, "the cancelled call's answer")
    # As the SDK answers a cancelled request on this wire: the stream must end with an answer for its id.
    assert messages[-1] == {"jsonrpc": "2.0", "id": 8, "error": {"code": -32800, "message": "Request cancelled"}}
    assert len(mcp.endpoint.calls) == 0


async def test_cancels_for_unknown_or_odd_ids_are_harmless(mcp, tokens):
    gate_name, gate = new_gate()
    running = asyncio.ensure_future(post_jsonrpc(mcp.url, call("echo_gated", {"gate": gate_name}, request_id=9),
                                                 tokens.agent))
    await within(gate.started.wait(), "the call to start")
    for odd in (10, "nine", None, True, 9.0, {"id": 9}, [9], "9" * 5000, -1, 2 ** 80):
        answer, _ = await post_jsonrpc(mcp.url, cancel(odd), tokens.agent)
        assert answer.status_code == 202, odd
    for malformed in ({"jsonrpc": "2.0", "method": "notifications/cancelled"},
                      {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": [9]},
                      {"jsonrpc": "1.0", "method": "notifications/cancelled", "params": {"requestId": 9}}):
        answer, _ = await post_jsonrpc(mcp.url, malformed, tokens.agent)
        assert answer.status_code in (202, 400), malformed
    # Unauthenticated, a cancel is refused before anything reads it.
    answer, _ = await post_jsonrpc(mcp.url, cancel(9), None)
    assert answer.status_code == 401
    gate.release.set()
    _, messages = await within(running, "the call to finish")
    assert messages[-1]["result"]["content"][0]["text"] == "done"


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_malformed_bodies_are_refused_and_run_nothing(mcp, tokens, era):
    counted = call("echo_counted", {"n": 1}, era)
    deep = b"[" * 20_000 + b"]" * 20_000  # far deeper than any parser recurses, under max_message_bytes
    bodies: list[bytes | dict[str, Any] | list[Any]] = [
        b"{not json",
        b"\xff\xfe\x00{",
        b"",
        b"null",
        json.dumps(counted).encode()[:-1],  # cut short
        [counted, counted],  # batches were removed from MCP in 2025-06-18
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo_counted","arguments":{"n":'
        + deep + b"}}}",
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":' + deep + b"}}",
        call("echo_counted", [1], era), call("echo_counted", "n=1", era), call("echo_counted", 5, era),
        *({**counted, "id": odd} for odd in (True, 1.5, {"a": 1}, [1], None)),
    ]
    for body in bodies:
        answer, messages = await post_jsonrpc(mcp.url, body, tokens.agent, era)
        shown = body[:80] if isinstance(body, bytes) else body
        # Refused outright (400), an error on the call's stream (200), or taken for a notification (202).
        assert answer.status_code in (200, 202, 400), (shown, answer.text)
        assert all("result" not in message for message in messages), (shown, messages)
        assert answer.status_code != 200 or messages[-1]["error"]["code"] == -32602, (shown, messages)
    # Every one of them was refused before the tool: a well-formed call shows the tool was there to run.
    assert CALLS == []
    _, messages = await post_jsonrpc(mcp.url, counted, tokens.agent, era)
    assert messages[-1]["result"]["content"][0]["text"] == "counted" and len(CALLS) == 1
    CALLS.clear()


async def test_a_body_over_max_message_bytes_is_413_whether_declared_or_streamed(mcp, tokens):
    padded = json.dumps(call("echo_counted", {"pad": "x" * MAX_BODY})).encode()

    async def streamed() -> Any:
        for start in range(0, len(padded), 4096):
            yield padded[start:start + 4096]

    headers = {**jsonrpc_headers("legacy"), **bearer(tokens.agent)}
    async with httpx.AsyncClient() as client:
        declared = await client.post(mcp.url, content=padded, headers=headers)
        chunked = await client.post(mcp.url, content=streamed(), headers=headers)
    assert declared.status_code == chunked.status_code == 413
    assert CALLS == []


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_secrets_in_output_and_failures_are_redacted(mcp, tokens, era):
    for name in ("echo_leaky", "echo_failing", "echo_crashing"):
        answer, messages = await post_jsonrpc(mcp.url, call(name, {}, era), tokens.agent, era)
        assert answer.status_code == 200 and messages, name
        assert SECRET not in answer.text, name
        result = messages[-1]["result"]
        assert result["isError"] is (name != "echo_leaky")
        assert "password=" in result["content"][0]["text"] or name == "echo_crashing", result


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_hidden_tool_is_answered_byte_for_byte_as_a_missing_one(mcp, server, tokens, tmp_path, era):
    hidden_call = call("secret_tool", {"name": "x"}, era, request_id=5)
    _, visible_to_admin = await post_jsonrpc(mcp.url, hidden_call, tokens.admin, era)
    assert visible_to_admin[-1]["result"]["isError"] is False  # it exists, and runs for a caller who sees it
    hidden, hidden_messages = await post_jsonrpc(mcp.url, hidden_call, tokens.agent, era)
    (tmp_path / "catalog" / "secret_tool.yaml").unlink()
    assert (await server.toolhost.reload(ANONYMOUS, "test")).success
    missing, _ = await post_jsonrpc(mcp.url, hidden_call, tokens.agent, era)
    assert (hidden.status_code, hidden.content) == (missing.status_code, missing.content)
    assert hidden_messages[-1]["error"]["code"] == -32602


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_hidden_tool_names_never_leak_in_lists_errors_or_suggestions(mcp, tokens, era):
    listing, _ = await post_jsonrpc(mcp.url, request("tools/list", {}, era), tokens.agent, era)
    assert listing.status_code == 200 and "echo_gated" in listing.text
    for hidden in ("secret_tool", "gen_000"):
        assert hidden not in listing.text
    _, near_visible = await post_jsonrpc(mcp.url, call("echo_gate", {}, era), tokens.agent, era)
    assert "echo_gated" in near_visible[-1]["error"]["message"]  # suggestions are made, from visible tools
    for near_hidden in ("secret_too", "secret_tool_", "gen_00", "gen_0000"):
        _, messages = await post_jsonrpc(mcp.url, call(near_hidden, {}, era), tokens.agent, era)
        message = messages[-1]["error"]["message"]
        assert "secret_tool" not in message.replace(near_hidden, "") and "gen_0" not in message.replace(
            near_hidden, ""), message


async def test_a_cursor_of_another_callers_listing_is_refused(mcp, tokens):
    async with mcp_client(mcp.url, tokens.admin, era="legacy") as admin:
        cursor = (await admin.list_tools()).next_cursor
    assert cursor
    _, messages = await post_jsonrpc(mcp.url, request("tools/list", {"cursor": cursor}, "legacy"), tokens.agent)
    assert messages[-1]["error"]["code"] == -32602
    assert "gen_" not in json.dumps(messages)


@pytest.mark.parametrize("authorization", [
    "Basic YWRtaW46YWRtaW4=", "Bearer", "bearer", "Bearer " + "a" * 20_000, "Bearer \u00ff\u00fe",
    "Bearer x, Bearer y",
])
async def test_odd_authorization_headers_are_401_never_a_crash(mcp, authorization):
    async with httpx.AsyncClient() as client:
        answer = await client.post(mcp.url, content=json.dumps(request("tools/list", {}, "legacy")).encode(),
                                   headers={**jsonrpc_headers("legacy"),
                                            "Authorization": authorization.encode("latin-1")})
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"].startswith('Bearer realm="toolhost"')
    assert authorization[7:27] not in answer.text or not authorization[7:27].strip()


@pytest.mark.parametrize("era", ERAS)
async def test_the_browser_guard_stands_in_front_of_mcp(mcp, tokens, era):
    """A page a browser opens cannot reach /mcp: not by DNS rebinding (its Host), not from another origin, not
    with a form or text body that needs no CORS preflight; all refused before authentication."""
    listing = json.dumps(request("tools/list", {}, "legacy")).encode()
    cases = [
        ({"Host": f"attacker.example:{mcp.port}"}, 403),
        ({"Origin": "https://attacker.example"}, 403),
        ({"Origin": "null"}, 403),
        ({"Content-Type": "application/x-www-form-urlencoded"}, 415),
        ({"Content-Type": "text/plain"}, 415),
    ]
    async with httpx.AsyncClient() as client:
        for extra, status in cases:
            for token in (tokens.admin, None):
                answer = await client.post(mcp.url, content=listing,
                                           headers={**jsonrpc_headers("legacy"), **bearer(token), **extra})
                assert answer.status_code == status, (extra, token is not None, answer.text)
        allowed = await client.post(mcp.url, content=listing,
                                    headers={**jsonrpc_headers("legacy"), **bearer(tokens.admin)})
    assert allowed.status_code == 200


# --- Review fixes (issue 23): bodies before authentication, cancels across machines, listen floods ----------

async def test_an_unauthenticated_chunked_body_is_answered_401_before_any_of_it_is_read(mcp):
    """One chunk, then nothing: a guard or endpoint that read the body before authenticating would wait for the
    rest (holding the memory of whatever was sent), and hang this test."""
    head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{mcp.port}\r\nContent-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
    answer = await raw_request(mcp.port, head, chunk(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"'))
    assert answer.status == 401 and b'"unauthenticated"' in answer.body
    assert b"connection: close" in answer.head.lower()  # nothing more of the body is read


async def post_from(address: str, url: str, body: dict[str, Any], token: str) -> tuple[int, list[dict[str, Any]]]:
    """post_jsonrpc from the local `address` (another loopback address stands for another machine)."""
    transport = httpx.AsyncHTTPTransport(local_address=address)
    async with httpx.AsyncClient(transport=transport, timeout=HANG_GUARD_SECONDS) as client:
        answer = await client.post(url, json=body, headers={**jsonrpc_headers("legacy"), **bearer(token)})
    return answer.status_code, messages_of(answer)


async def test_a_cancel_from_another_address_with_the_same_token_reaches_nothing(mcp, tokens):
    """Two hosts with one agent token, both counting request ids from 1: the host on another machine (here
    127.0.0.2) cancels only its own calls. The same machine with the same token still can: documented."""
    gate_name, gate = new_gate()
    running = asyncio.ensure_future(post_from("127.0.0.1", mcp.url, call("echo_gated", {"gate": gate_name},
                                                                           request_id=1), tokens.agent))
    await within(gate.started.wait(), "the call to start")
    status, _ = await post_from("127.0.0.2", mcp.url, cancel(1), tokens.agent)
    assert status == 202
    assert len(mcp.endpoint.calls) == 1
    gate.release.set()
    status, messages = await within(running, "the call to finish")
    assert status == 200 and messages[-1]["result"]["content"][0]["text"] == "done"
    # The call's own address with the same token does cancel (stateless, nothing tells two clients there apart).
    gate_name, gate = new_gate()
    running = asyncio.ensure_future(post_from("127.0.0.2", mcp.url, call("echo_gated", {"gate": gate_name},
                                                                           request_id=2), tokens.agent))
    await within(gate.started.wait(), "the second call to start")
    await post_from("127.0.0.2", mcp.url, cancel(2), tokens.agent)
    _, messages = await within(running, "the cancelled call's answer")
    assert messages[-1]["error"]["code"] == -32800


async def listen_refusal(url: str, token: str) -> MCPError:
    """The error a subscriptions/listen from a fresh client is refused with."""
    async with mcp_client(url, token) as client:
        with pytest.raises(MCPError) as refused:
            async with client.listen(tools_list_changed=True):
                pass
    return refused.value


async def test_listen_streams_are_bounded_per_caller_and_per_server(mcp, tokens):
    """Each stream holds a connection and a registry watcher: one token must not open them until the process
    runs out of descriptors. Refused before the acknowledgement, with what to do; a closed stream frees its
    place."""
    mcp.endpoint.listen_streams = ListenStreams(total=3, per_owner=2)
    async with AsyncExitStack() as streams:
        for _ in range(2):
            client = await streams.enter_async_context(mcp_client(mcp.url, tokens.admin))
            await streams.enter_async_context(client.listen(tools_list_changed=True))
        per_caller = await listen_refusal(mcp.url, tokens.admin)
        # Another caller still has room, up to the server's bound.
        agent = await streams.enter_async_context(mcp_client(mcp.url, tokens.agent))
        await streams.enter_async_context(agent.listen(tools_list_changed=True))
        per_server = await listen_refusal(mcp.url, tokens.viewer)
        assert len(mcp.endpoint.listen_streams) == 3
    assert per_caller.error.code == per_server.error.code == types.INTERNAL_ERROR
    assert "close one before opening another" in per_caller.error.message
    assert "retry later, or on another replica" in per_server.error.message
    await eventually(lambda: len(mcp.endpoint.listen_streams) == 0, "the closed streams to give their places back")
    async with mcp_client(mcp.url, tokens.admin) as client, client.listen(tools_list_changed=True):
        assert len(mcp.endpoint.listen_streams) == 1


@pytest.mark.parametrize("scheme", ["https", "http"])
def test_certificate_verified_comes_from_the_listener_never_from_the_requests_scheme(scheme):
    """A client CA admits HTTP callers by the handshake only when the listener is TLS requiring client
    certificates. A plaintext listener with a client CA (which the config refuses today) must admit nobody on
    the strength of a scheme that an X-Forwarded-Proto header could once set."""
    plaintext = Config(tls_client_ca_file="/etc/toolhost/client-ca.pem")
    toolhost = SimpleNamespace(config=plaintext, authenticator=Authenticator(client_ca=True))
    with pytest.raises(UnauthenticatedError):
        HttpAuthentication.of(toolhost).caller({"type": "http", "scheme": scheme, "headers": []})  # type: ignore[arg-type]
    mutual = dataclasses.replace(plaintext, tls_cert_file="/etc/toolhost/tls.crt", tls_key_file="/etc/toolhost/tls.key")
    toolhost = SimpleNamespace(config=mutual, authenticator=Authenticator(client_ca=True))
    caller = HttpAuthentication.of(toolhost).caller({"type": "http", "scheme": scheme, "headers": []})  # type: ignore[arg-type]
    assert caller.name == "client-certificate"
