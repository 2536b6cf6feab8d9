"""The remote runner: a call forwarded to a second toolhost, with its deadline, hop limit and failures."""

from __future__ import annotations

import json
import logging
import secrets
import socket

from toolhost.v1 import tool_service_pb2
from toolhost_server.api.remote_client import GrpcRemoteCaller
from toolhost_server.auth import hash_token
from toolhost_server.output_format import OutputFormat, ResultFormat
from toolhost_server.runners import Invocation
from toolhost_server.runners.remote import RemoteCall

from helpers.calls import call
from helpers.catalogs import remote_tool, write_tool
from helpers.certificates import CertificateAuthority


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_call_runs_on_the_remote_toolhost(start_server, tmp_path):
    worker_dir, front_dir = tmp_path / "worker", tmp_path / "front"
    write_tool(worker_dir, "sleepy", "name: sleepy\ndescription: Sleeps.\n"
               "runner: {type: python, entrypoint: 'catalog_functions:sleep_echo'}\n"
               "parameters: [{name: seconds, type: number, required: true}, {name: text, type: string}]\n")
    worker = await start_server(catalog_dirs=[worker_dir])
    write_tool(front_dir, "remote_echo", remote_tool("remote_echo", worker.target, "echo"))
    write_tool(front_dir, "remote_sleepy", remote_tool("remote_sleepy", worker.target, "sleepy", timeout=0.3))
    write_tool(front_dir, "remote_missing", remote_tool("remote_missing", worker.target, "nope"))
    front = await start_server(catalog_dirs=[front_dir])

    response = await front.stub.CallTool(tool_service_pb2.CallToolRequest(
        name="remote_echo", arguments_json=json.dumps({"text": "over there"}), call_id="trace-me"))
    assert response.success and response.output == "over there"
    assert response.tool == "remote_echo" and response.call_id == "trace-me"

    # The budget travels as the remote's deadline: the worker stops, the front reports TIMEOUT.
    response = await front.stub.CallTool(tool_service_pb2.CallToolRequest(
        name="remote_sleepy", arguments_json=json.dumps({"seconds": 3})))
    assert not response.success and response.error.code == "TIMEOUT"

    response = await front.stub.CallTool(tool_service_pb2.CallToolRequest(name="remote_missing"))
    assert not response.success and response.error.code == "REMOTE_ERROR"
    assert "NOT_FOUND" in response.error.message


async def test_the_bundled_remote_echo_forwards_to_this_server_wherever_it_listens(start_server, caplog):
    caplog.set_level(logging.INFO, logger="toolhost.audit")
    server = await start_server()  # the bundled catalog, on a port picked at start
    assert server.port != 50051
    response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(
        name="remote_echo", arguments_json=json.dumps({"text": "hello"}), call_id="round-trip"))
    assert response.success and response.output == "hello", response.error
    # The forwarded call (it keeps the call id) ran on this very server, not on whatever 127.0.0.1:50051 is.
    audited = [r.audit for r in caplog.records if r.name == "toolhost.audit" and hasattr(r, "audit")]
    assert sorted(r["tool"] for r in audited if r["call_id"] == "round-trip") == ["echo", "remote_echo"]


async def test_target_self_before_the_server_listens_is_a_tool_failure():
    caller = GrpcRemoteCaller()  # as create_toolhost makes it; the server tells it its address once bound
    outcome = await caller.call(RemoteCall(target="self", tool="echo", arguments={"text": "hi"}, call_id="early",
                                           timeout_seconds=1, hops=1))
    assert outcome.failure is not None and outcome.failure.code == "REMOTE_UNAVAILABLE"
    assert "not listening" in outcome.failure.message  # said at once, not found out by dialling a host "self"


async def test_an_unreachable_remote_is_a_tool_failure(start_server, tmp_path):
    write_tool(tmp_path, "gone", remote_tool("gone", f"127.0.0.1:{free_port()}", "echo", timeout=2))
    server = await start_server(catalog_dirs=[tmp_path])
    response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(name="gone"))
    assert not response.success and response.error.code == "REMOTE_UNAVAILABLE"


async def test_a_forwarding_loop_is_refused(start_server, tmp_path):
    server = await start_server(catalog_dirs=[tmp_path], max_hops=3)
    write_tool(tmp_path, "loop", remote_tool("loop", server.target, "loop", timeout=5))
    await server.stub.Reload(tool_service_pb2.ReloadRequest())
    response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(name="loop"))
    assert not response.success and response.error.code == "REMOTE_ERROR"
    assert "FAILED_PRECONDITION" in response.error.message and "forwarded 4 times" in response.error.message


async def test_a_remote_that_requires_tls_and_a_token_gets_them(start_server, tmp_path, monkeypatch):
    pki = CertificateAuthority(tmp_path / "pki")
    server_pair = pki.issue_server("worker")
    token = secrets.token_urlsafe(32)
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text("roles:\n  front:\n    call: {tools: [echo]}\n"
                         f"tokens:\n  - {{name: front-toolhost, sha256: {hash_token(token)}, roles: [front]}}\n")
    worker = await start_server(auth_file=auth_file, tls_cert_file=server_pair.certificate,
                                tls_key_file=server_pair.key)
    # The token is a credential of this (front) server, resolved per call and never shown.
    monkeypatch.setenv("TOOLHOST_CRED_WORKERS_TOKEN", token)
    front_dir = tmp_path / "front"
    tls = {"ca_file": str(pki.certificate), "server_name": "localhost"}
    for name, runner in {
        "with_token": {"type": "remote", "target": worker.target, "tool": "echo", "tls": tls,
                       "token_credential": "workers"},
        "without_token": {"type": "remote", "target": worker.target, "tool": "echo", "tls": tls},
        "plaintext": {"type": "remote", "target": worker.target, "tool": "echo"},
    }.items():
        write_tool(front_dir, name, f"name: {name}\ndescription: Forwards.\ncredentials: [workers]\n"
                   f"runner: {json.dumps(runner)}\nparameters: [{{name: text, type: string, required: true}}]\n")
    in_clear = {"type": "remote", "target": "workers.example:50051", "token_credential": "workers"}
    write_tool(front_dir, "token_in_clear", (
        "name: token_in_clear\ndescription: Refused at load.\ncredentials: [workers]\n"
        f"runner: {json.dumps(in_clear)}\n"))
    front = await start_server(catalog_dirs=[front_dir])
    report = await front.stub.Reload(tool_service_pb2.ReloadRequest())
    assert [("token_in_clear" in e.file, "plaintext" in e.reason) for e in report.errors] == [(True, True)]

    response = await call(front, "with_token", text="hi")
    assert response.success and response.output == "hi"
    response = await call(front, "without_token", text="hi")
    assert not response.success and response.error.code == "REMOTE_ERROR"
    assert "UNAUTHENTICATED" in response.error.message
    response = await call(front, "plaintext", text="hi")
    assert not response.success and response.error.code in ("REMOTE_UNAVAILABLE", "REMOTE_ERROR")
    for response in (await call(front, "with_token", text="hi"), await call(front, "without_token", text="hi")):
        assert token not in str(response)


async def test_the_output_format_and_filtering_are_forwarded_to_the_remote(start_server, tmp_path):
    worker_dir, front_dir = tmp_path / "worker", tmp_path / "front"
    write_tool(worker_dir, "report", "name: report\ndescription: Returns its arguments.\n"
               "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:return_arguments'}\n"
               "input_schema: {type: object}\n")
    worker = await start_server(catalog_dirs=[worker_dir])
    write_tool(front_dir, "remote_report", remote_tool("remote_report", worker.target, "report"))
    front = await start_server(catalog_dirs=[front_dir])
    data = {"name": "x", "gone": None, "nested": {"empty": [], "kept": 1}}
    pretty = json.dumps({"name": "x", "nested": {"kept": 1}}, indent=2, sort_keys=True)

    # The runner on its own, over the real transport: what comes back is the worker's rendering.
    runner = front.toolhost.registry.snapshot.get("remote_report").runner
    spec = front.toolhost.registry.snapshot.get("remote_report").spec
    outcome = await runner.run(Invocation(spec, data, "forwarded-format", 10, result_format=ResultFormat(
        OutputFormat.PRETTY, filter_empty_fields=True)))
    assert outcome.failure is None and outcome.output == pretty
    assert outcome.structured == {"name": "x", "nested": {"kept": 1}}
    outcome = await runner.run(Invocation(spec, data, "default-format", 10))
    assert outcome.output == json.dumps(data, sort_keys=True)  # the tool's own text, nothing filtered

    # And through the front server, as a caller sees it.
    response = await front.stub.CallTool(tool_service_pb2.CallToolRequest(
        name="remote_report", arguments_json=json.dumps(data), output_format=tool_service_pb2.OUTPUT_FORMAT_PRETTY,
        filter_empty_fields=True))
    assert response.success and response.output == pretty
