"""The REST API (/ai/tools/*) from an attacker's side, against a real server with an auth file: hostile and huge
bodies run nothing and get a short answer that quotes none of them; odd trace ids are refused before they reach a
log line or a row; a hidden tool's name never leaks, and a hidden tool is answered exactly as a missing one;
secrets stay redacted in outputs, errors and the audit log; reload wants the admin right; the browser guard
stands in front."""

from __future__ import annotations

import asyncio
import json
import logging
import shlex
from typing import Any

import pytest

from toolhost_server.store.audit_table import AuditTable
from toolhost_server.store.database import Store
from toolhost_server.tools.base import ToolRaisedFailure

from helpers.auth import GREET, Tokens, auth_file_text
from helpers.auth import write_catalog as write_role_catalog
from helpers.catalogs import write_tool
from helpers.rest_http import rest_client, serving_rest

SECRET = "hunter2hunter2"  # hidden by the redactor after `password=`
MAX_BODY = 256 * 1024
CALLS: list[dict[str, Any]] = []  # every call of the `counted` tool, by any test
EXECUTE = "/ai/tools/execute"
JSON = {"Content-Type": "application/json"}
# An answer to a refused body is a sentence or two, whatever the body was.
SHORT_ANSWER = 2048


def count_call(**arguments: Any) -> str:
    CALLS.append(arguments)
    return "counted"


def leak_password() -> str:
    return f"connected with password={SECRET}"


def fail_with_password() -> str:
    raise ToolRaisedFailure(f"login refused for password={SECRET}", "LOGIN_FAILED")


@pytest.fixture
def tokens() -> Tokens:
    return Tokens.generate()


@pytest.fixture
async def server(start_server, tmp_path, tokens):
    catalog = write_role_catalog(tmp_path / "catalog")
    write_tool(catalog, "echo_counted", "name: echo_counted\ndescription: Counts its calls.\ncategory: testing\n"
               "runner: {type: python, entrypoint: 'test_security_rest:count_call'}\n"
               "input_schema: {type: object}\n")
    write_tool(catalog, "echo_leaky", "name: echo_leaky\ndescription: Leaks.\ncategory: testing\n"
               "runner: {type: python, entrypoint: 'test_security_rest:leak_password'}\n")
    write_tool(catalog, "echo_failing", "name: echo_failing\ndescription: Fails.\ncategory: testing\n"
               "runner: {type: python, entrypoint: 'test_security_rest:fail_with_password'}\n")
    auth_file = tmp_path / "auth.yaml"
    auth_file.write_text(auth_file_text(tokens))
    return await start_server(catalog_dirs=[catalog], auth_file=str(auth_file), max_message_bytes=MAX_BODY)


@pytest.fixture
async def rest(server):
    async with serving_rest(server) as serving:
        yield serving


@pytest.fixture
async def admin(rest, tokens):
    async with rest_client(rest, tokens.admin) as client:
        yield client


@pytest.fixture
async def agent(rest, tokens):
    async with rest_client(rest, tokens.agent) as client:
        yield client


@pytest.mark.parametrize("body", [
    pytest.param(b"not json", id="not-json"),
    pytest.param(b"[" * 100_000, id="nested-arrays"),
    pytest.param(b'{"name": "echo_counted", "params": {"n": ' + b"9" * 5000 + b"}}", id="number-of-5000-digits"),
    pytest.param(b'{"name": "echo_counted", "params": {"t": "\xff\xfe"}}', id="not-utf8"),
    pytest.param(b'["echo_counted"]', id="array"),
    pytest.param(b'"echo_counted"', id="string"),
    pytest.param(b'{"name": "echo_counted", "params": {"n": NaN}}', id="nan"),
    pytest.param(b'{"name": "echo_counted", "params": ' + b'{"a": ' * 100 + b"1" + b"}" * 100 + b"}", id="deep-params"),
    pytest.param(b'{"name": "echo_counted\\u0000"}', id="nul-in-name"),
    pytest.param(b'{"name": "echo_counted\\ud800"}', id="lone-surrogate-in-name"),
    pytest.param(b'{"name": "echo_counted", "params": {"\\u001b[31m": 1}}', id="escape-in-key"),
    pytest.param(b'{"name": "echo_counted", "params": {"k": "\\udfff"}}', id="lone-surrogate-in-value"),
    pytest.param(b'{"name": {"$ne": null}}', id="name-not-a-string"),
    pytest.param(b"{" + b",".join(b'"k%d": 1' % i for i in range(20_000)) + b', "name": "echo_counted"}',
                 id="twenty-thousand-unknown-keys"),
    pytest.param(b'{"name": "secret_tool", "name": "echo_counted"}', id="name-twice"),
    pytest.param(b'{"name": "echo_counted", "params": {"host": "allowed", "host": "forbidden"}}',
                 id="argument-twice"),
    pytest.param(b'{"name": "echo_counted", "params": {"a": {"k": 1, "k": 2}}}', id="nested-key-twice"),
    pytest.param(json.dumps({"name": "echo_counted"}).encode("utf-16"), id="utf-16-with-bom"),
    pytest.param(json.dumps({"name": "echo_counted"}).encode("utf-16-le"), id="utf-16-without-bom"),
    pytest.param(json.dumps({"name": "echo_counted"}).encode("utf-32"), id="utf-32"),
    pytest.param(b'{"name": "echo_counted", "params": {"t": "\xc0\xaf"}}', id="overlong-utf8"),
    pytest.param(b'{"name": "echo_counted", "params": {"t": "\xed\xa0\x80"}}', id="encoded-surrogate"),
])
async def test_a_hostile_body_runs_nothing_and_gets_a_short_400_quoting_none_of_it(admin, body):
    before = len(CALLS)
    response = await admin.post(EXECUTE, content=body, headers=JSON)
    assert response.status_code == 400, response.text
    assert len(response.content) < SHORT_ANSWER
    assert response.json()["success"] is False
    assert b"\\u001b[31m" not in response.content and b"9999999999" not in response.content
    assert len(CALLS) == before
    # Still serving.
    assert (await admin.post(EXECUTE, json={"name": "echo_counted"})).json()["output"] == "counted"


@pytest.mark.parametrize(("body", "named"), [
    (b'{"name": "secret_tool", "name": "echo_counted"}', '"name"'),
    (b'{"name": "echo_counted", "params": {"host": "a", "host": "b"}}', '"host"'),
    (b'{"name": "echo_counted", "params": {"\\u001b[2J": 1, "\\u001b[2J": 2}}', '"\\u001b[2J"'),
    (b'{"name": "echo_counted", "params": {"' + b"k" * 100 + b'": 1, "' + b"k" * 100 + b'": 2}}',
     '"' + "k" * 64 + '..."'),
])
async def test_a_key_twice_in_one_object_is_400_naming_it(admin, body, named):
    # A gateway that reads the first `name` (or `host`) would check another value than the one toolhost uses.
    before = len(CALLS)
    response = await admin.post(EXECUTE, content=body, headers=JSON)
    assert response.status_code == 400
    message = response.json()["error_message"]
    assert f"the key {named} appears more than once" in message, message
    assert "\x1b" not in response.text and len(CALLS) == before


async def test_a_body_not_in_utf8_is_400_saying_so(admin):
    response = await admin.post(EXECUTE, content=json.dumps({"name": "echo_counted"}).encode("utf-16"),
                                headers=JSON)
    assert response.status_code == 400
    assert response.json()["error_message"] == "the body is not UTF-8 (byte 0); send JSON encoded as UTF-8"


async def test_many_argument_keys_are_refused_before_any_record_keeps_them(admin):
    params = {f"key_{index}": index for index in range(5000)}
    before = len(CALLS)
    response = await admin.post(EXECUTE, json={"name": "echo_counted", "params": params})
    assert response.status_code == 400 and len(response.content) < SHORT_ANSWER
    assert len(CALLS) == before


async def test_a_huge_argument_is_capped_in_the_output_it_comes_back_in(start_server):
    server = await start_server(max_output_bytes=64 * 1024)
    async with serving_rest(server) as rest, rest_client(rest) as client:
        response = await client.post(EXECUTE, json={"name": "echo", "params": {"text": "x" * (1024 * 1024)}})
    body = response.json()
    assert body["truncated"] is True and len(body["output"]) <= 64 * 1024
    assert body["original_size_bytes"] == 1024 * 1024


async def test_a_body_over_the_limit_is_413_and_text_plain_is_415_before_anything_runs(admin):
    before = len(CALLS)
    big = json.dumps({"name": "echo_counted", "params": {"pad": "x" * MAX_BODY}}).encode()
    assert (await admin.post(EXECUTE, content=big, headers=JSON)).status_code == 413
    plain = await admin.post(EXECUTE, content=b'{"name": "echo_counted"}', headers={"Content-Type": "text/plain"})
    assert plain.status_code == 415
    form = await admin.post(EXECUTE, content=b"name=echo_counted",
                            headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert form.status_code == 415
    assert len(CALLS) == before


@pytest.mark.parametrize("trace_id", [
    pytest.param("a" * 129, id="too-long"),
    pytest.param("line\nforged", id="newline"),
    pytest.param("tab\there", id="tab"),
    pytest.param("nul\x00", id="nul"),
    pytest.param("caf\u00e9", id="non-ascii"),
    pytest.param("\u202etxt.exe", id="bidi-override"),
    pytest.param("\x1b]52;c;ZXZpbA==\x07", id="osc-52"),
    pytest.param(["list"], id="not-a-string"),
])
async def test_an_odd_trace_id_is_400_and_the_call_never_runs(admin, trace_id, caplog):
    before = len(CALLS)
    with caplog.at_level(logging.INFO, logger="toolhost.audit"):
        response = await admin.post(EXECUTE, json={"name": "echo_counted", "trace_id": trace_id})
    assert response.status_code == 400
    assert [v["field"] for v in response.json()["violations"]] == ["/trace_id"]
    assert len(response.content) < SHORT_ANSWER
    assert len(CALLS) == before
    assert not [record for record in caplog.records if hasattr(record, "audit")]


@pytest.mark.parametrize(("trace_id", "w3c"), [
    pytest.param("a" * 128, False, id="128-characters"),
    pytest.param("0" * 32, False, id="all-zero-is-no-w3c-id"),
    pytest.param("4BF92F3577B34DA6A3CE929D0E0E4736", False, id="upper-case-is-no-w3c-id"),
    pytest.param("' OR 1=1; -- <script>", False, id="sql-and-html"),
    pytest.param("4bf92f3577b34da6a3ce929d0e0e4736", True, id="w3c"),
])
async def test_a_printable_trace_id_is_kept_as_it_is_and_only_a_w3c_one_becomes_the_trace(admin, trace_id, w3c,
                                                                                         caplog):
    with caplog.at_level(logging.INFO, logger="toolhost.audit"):
        response = await admin.post(EXECUTE, json={"name": "echo_counted", "trace_id": trace_id})
    assert response.json()["trace_id"] == trace_id
    [audit] = [record.audit for record in caplog.records if hasattr(record, "audit")]
    assert (response.headers["x-trace-id"] == trace_id) == w3c
    assert audit["client_trace_id"] == ("" if w3c else trace_id)
    assert audit["trace_id"] == response.headers["x-trace-id"]


async def test_a_secret_in_a_client_trace_id_is_redacted_in_the_audit_log(admin, caplog):
    with caplog.at_level(logging.INFO, logger="toolhost.audit"):
        response = await admin.post(EXECUTE, json={"name": "echo_counted", "trace_id": f"password={SECRET}"})
    assert response.status_code == 200
    [record] = [record for record in caplog.records if hasattr(record, "audit")]
    assert SECRET not in record.getMessage() and SECRET not in json.dumps(record.audit)
    assert "[REDACTED]" in record.audit["client_trace_id"]


@pytest.mark.parametrize("trace_id", ['x" level="CRITICAL', "x caller=admin outcome=OK", "a\\b=c", "two  spaces"])
async def test_a_client_trace_id_adds_no_field_to_the_audit_line(admin, trace_id, caplog):
    # A logfmt reader (Loki, Vector) would take `client_trace_id=x caller=admin` as two fields.
    with caplog.at_level(logging.INFO, logger="toolhost.audit"):
        response = await admin.post(EXECUTE, json={"name": "echo_counted", "trace_id": trace_id})
    assert response.json()["trace_id"] == trace_id
    [record] = [record for record in caplog.records if hasattr(record, "audit")]
    words = shlex.split(record.getMessage())
    assert words[0] == "call"
    fields = [word.split("=", 1) for word in words[1:]]
    assert [key for key, _ in fields] == ["tool", "caller", "outcome", "duration_ms", "call_id", "argument_keys",
                                          "client_trace_id"]
    assert dict(fields)["client_trace_id"] == trace_id and dict(fields)["caller"] == "admin-token"


@pytest.mark.parametrize("trace_id", [f"password={SECRET}", "Bearer sk-live-abcdef0123456789"])
async def test_a_secret_in_a_client_trace_id_is_stored_redacted_and_echoed_only_to_its_caller(admin, server,
                                                                                              trace_id):
    response = await admin.post(EXECUTE, json={"name": "echo_counted", "trace_id": trace_id})
    assert response.json()["trace_id"] == trace_id  # the caller's own text, back to it alone
    await server.toolhost.audit.close()  # writes what is waiting
    table = AuditTable(Store.from_config(server.toolhost.config))
    try:
        stored = await asyncio.to_thread(table.latest, 10)
    finally:
        table.store.close()
    [kept] = [record.client_trace_id for record in stored if record.client_trace_id]
    secret = trace_id.split("=")[-1].split(" ")[-1]
    assert secret not in kept and "[REDACTED]" in kept


async def test_secrets_stay_out_of_outputs_and_error_messages(admin):
    leaked = (await admin.post(EXECUTE, json={"name": "echo_leaky"})).json()
    failed = (await admin.post(EXECUTE, json={"name": "echo_failing"})).json()
    assert leaked["success"] is True and leaked["redacted"] is True
    assert (failed["success"], failed["error"], failed["redacted"]) == (False, "LOGIN_FAILED", True)
    assert "password=" in failed["error_message"] and "password=" in leaked["output"]
    assert SECRET not in json.dumps(leaked) + json.dumps(failed)


async def test_a_hidden_tool_is_answered_byte_for_byte_as_a_missing_one_and_never_named(rest, agent, admin,
                                                                                       tmp_path):
    listed = [tool["name"] for tool in (await agent.get("/ai/tools/list")).json()["tools"]]
    assert "secret_tool" not in listed
    hidden = await agent.post(EXECUTE, json={"name": "secret_tool", "params": {"name": "x"}})
    close = await agent.post(EXECUTE, json={"name": "secret_tol"})
    found = (await agent.get("/ai/tools/search", params={"q": "secret_tool test tool", "limit": "50"})).json()
    assert "secret_tool" not in [hit["tool"]["name"] for hit in found["results"]]
    assert "secret_tool" not in close.text
    (tmp_path / "catalog" / "secret_tool.yaml").unlink()
    assert (await admin.post("/ai/tools/reload")).json()["removed"] == ["secret_tool"]
    missing = await agent.post(EXECUTE, json={"name": "secret_tool", "params": {"name": "x"}})
    assert (hidden.status_code, hidden.content) == (missing.status_code, missing.content) == (404, missing.content)


async def test_a_hidden_tool_changes_no_byte_of_a_restricted_caller_s_search(agent, admin, tmp_path):
    # Ranking statistics (how many tools, their mean length, how many hold a word) over every tool would let a
    # caller count hidden tools and learn the words they use; over what the caller sees, they say nothing.
    queries = [{"q": "echo counts its calls test tool", "limit": "50"}, {"q": "test probe tool"},
               {"q": "echo", "tags": "none"}]
    before = [(await agent.get("/ai/tools/search", params=query)).content for query in queries]
    write_tool(tmp_path / "catalog", "payroll_export",
               "name: payroll_export\ndescription: Test tool echo counts its calls, echo probe tool echo.\n"
               "category: payroll\ntags: [echo, test]\n" + GREET)
    assert (await admin.post("/ai/tools/reload")).json()["added"] == ["payroll_export"]
    assert [(await agent.get("/ai/tools/search", params=query)).content for query in queries] == before
    assert b"echo_counted" in before[0]
    # Seen by the admin, it moves the scores of the others: the statistics do count what a caller sees.
    assert "payroll_export" in (await admin.get("/ai/tools/search", params=queries[0])).text


async def test_reload_without_the_admin_right_is_403_and_reloads_nothing(rest, server, tokens):
    reloader = server.toolhost.reloader
    before = reloader.reload_count
    for token in (tokens.agent, tokens.viewer):
        async with rest_client(rest, token) as client:
            response = await client.post("/ai/tools/reload")
        assert (response.status_code, response.json()["error"]) == (403, "PERMISSION_DENIED")
    async with rest_client(rest) as anonymous:
        assert (await anonymous.post("/ai/tools/reload")).status_code == 401
    assert reloader.reload_count == before


async def test_an_unauthenticated_request_is_401_and_runs_nothing(rest):
    before = len(CALLS)
    async with rest_client(rest) as anonymous:
        response = await anonymous.post(EXECUTE, json={"name": "echo_counted", "params": {"p": "x" * 100_000}})
    assert response.status_code == 401 and len(CALLS) == before


async def test_a_foreign_host_or_a_cross_site_origin_is_403_and_runs_nothing(admin):
    before = len(CALLS)
    rebound = await admin.post(EXECUTE, json={"name": "echo_counted"}, headers={"Host": "evil.example:80"})
    cross_site = await admin.post(EXECUTE, json={"name": "echo_counted"}, headers={"Origin": "https://evil.example"})
    bodiless = await admin.post("/ai/tools/reload", headers={"Origin": "https://evil.example"})
    assert (rebound.status_code, cross_site.status_code, bodiless.status_code) == (403, 403, 403)
    assert len(CALLS) == before
