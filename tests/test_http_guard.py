"""The HTTP app's browser guard (web/guard.py, issue 23): every route but /healthz, /readyz and (with a metrics
token) /metrics answers only the Hosts of http_allowed_hosts (default: loopback names and the bound address, with
the bound port) and the Origins of http_allowed_origins (default none), takes only JSON bodies and at most
max_message_bytes of them. The attacks are in tests/security/test_security_http_guard.py."""

from __future__ import annotations

import logging
import secrets

import httpx
import pytest

from toolhost_server.config import ConfigError, load_config
from toolhost_server.telemetry.metrics import ToolhostMetrics
from toolhost_server.web.app import create_http_app
from toolhost_server.web.guard_rules import GuardSettings, default_allowed_hosts
from toolhost_server.web.server import HttpServer

from helpers.guarded_http import chunk, guarded_server, raw_request
from helpers.waiting import HANG_GUARD_SECONDS

JSON = {"content-type": "application/json"}


async def post(url: str, host: str | None = None, headers: dict[str, str] | None = None,
               body: bytes = b"{}", method: str = "POST", path: str = "/echo") -> httpx.Response:
    sent = {**JSON, **(headers or {})}
    if host is not None:
        sent["host"] = host
    async with httpx.AsyncClient(timeout=HANG_GUARD_SECONDS) as client:
        return await client.request(method, url + path, headers=sent, content=body)


async def test_the_loopback_names_with_the_bound_port_reach_the_routes():
    async with guarded_server() as server:
        port = server.port
        answers = [await post(server.url, host) for host in
                   (None, f"localhost:{port}", f"LOCALHOST:{port}", f"LocalHost:{port}", f"[::1]:{port}")]
    assert [answer.status_code for answer in answers] == [200] * 5
    assert answers[0].json() == {"bytes": 2} and server.bodies == [2] * 5


async def test_a_host_of_another_name_or_port_is_refused_but_the_health_probes_answer_it():
    """Kubelet probes dial the pod's IP: health answers any Host. /metrics without a metrics token is the
    loopback development case, where the Host check keeps a rebinding page from reading tool names."""
    async with guarded_server() as server:
        rebound = f"attacker.example:{server.port}"
        refused = await post(server.url, rebound)
        other_port = await post(server.url, f"127.0.0.1:{server.port + 1 if server.port < 65535 else 1}")
        async with httpx.AsyncClient(timeout=HANG_GUARD_SECONDS, headers={"host": rebound}) as client:
            probes = {path: (await client.get(server.url + path)).status_code
                      for path in ("/healthz", "/readyz", "/metrics")}
    assert (refused.status_code, other_port.status_code) == (403, 403)
    assert refused.headers["content-type"] == "application/json"
    assert refused.json()["error"] == "host_not_allowed"
    message = refused.json()["message"]
    assert "http_allowed_hosts" in message and "TOOLHOST_HTTP_ALLOWED_HOSTS" in message
    assert probes == {"/healthz": 200, "/readyz": 200, "/metrics": 403}
    assert server.bodies == []


async def test_with_a_metrics_token_metrics_answers_any_host_to_the_token_alone(tmp_path):
    """Scrapers dial the pod's IP; beyond loopback they send the token, which no rebinding page has."""
    token = secrets.token_urlsafe(32)
    (tmp_path / "metrics-token").write_text(token + "\n")
    async with guarded_server(metrics_token_file=str(tmp_path / "metrics-token")) as server:
        headers = {"host": f"10.1.2.3:{server.port}"}
        async with httpx.AsyncClient(timeout=HANG_GUARD_SECONDS) as client:
            without = await client.get(server.url + "/metrics", headers=headers)
            scraped = await client.get(server.url + "/metrics",
                                       headers={**headers, "authorization": f"Bearer {token}"})
    assert (without.status_code, scraped.status_code) == (401, 200)


async def test_a_request_without_host_is_refused():
    async with guarded_server() as server:
        answer = await raw_request(server.port, "POST /echo HTTP/1.0\r\nContent-Type: application/json\r\n"
                                   "Content-Length: 2\r\n\r\n{}")
        probe = await raw_request(server.port, "GET /healthz HTTP/1.0\r\n\r\n")
    assert answer.status == 403 and b'"missing_host"' in answer.body
    assert probe.status == 200
    assert server.bodies == []


async def test_configured_hosts_replace_the_defaults():
    hosts = ("toolhost.tools.svc:*", "mcp.example.com", "10.1.2.3:8010")
    async with guarded_server(http_allowed_hosts=hosts) as server:
        allowed = [await post(server.url, host) for host in
                   ("toolhost.tools.svc", "toolhost.tools.svc:8443", "Toolhost.Tools.Svc:80", "mcp.example.com",
                    "10.1.2.3:8010")]
        refused = [await post(server.url, host) for host in
                   (f"127.0.0.1:{server.port}", f"localhost:{server.port}", "mcp.example.com:443",
                    "10.1.2.3:8011", "10.1.2.3", "tools.svc:80", "toolhost.tools.svc.evil.example",
                    "toolhost.tools.svc:x")]
    assert [answer.status_code for answer in allowed] == [200] * 5
    assert [answer.status_code for answer in refused] == [403] * 8


async def test_a_star_answers_any_host_and_the_start_warns(caplog):
    caplog.set_level(logging.INFO, logger="toolhost.http")
    async with guarded_server(http_allowed_hosts=("*",)) as server:
        answer = await post(server.url, "anything.example:1")
        protection = server.http.protection
    assert answer.status_code == 200
    assert "any Host" in protection
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "http_allowed_hosts is '*'" in r.message]
    assert len(warnings) == 1 and "DNS rebinding" in warnings[0].message


async def test_a_wildcard_bind_answers_loopback_names_and_says_how_to_allow_others(caplog):
    caplog.set_level(logging.INFO, logger="toolhost.http")
    async with guarded_server(http_address="0.0.0.0:0") as server:
        loopback = await post(server.url)
        by_the_bind = await post(server.url, f"0.0.0.0:{server.port}")
    assert (loopback.status_code, by_the_bind.status_code) == (200, 403)
    said = [r.message for r in caplog.records if "listens on every address" in r.message]
    assert len(said) == 1 and "TOOLHOST_HTTP_ALLOWED_HOSTS" in said[0] and f"localhost:{server.port}" in said[0]


async def test_the_bound_address_is_allowed_with_its_port():
    async with guarded_server(http_address="127.0.0.2:0") as server:
        async with httpx.AsyncClient(timeout=HANG_GUARD_SECONDS) as client:
            bound = await client.post(f"http://127.0.0.2:{server.port}/echo", headers=JSON, content=b"{}")
            neighbour = await client.post(f"http://127.0.0.2:{server.port}/echo", content=b"{}",
                                          headers={**JSON, "host": f"127.0.0.3:{server.port}"})
        protection = server.http.protection
    assert (bound.status_code, neighbour.status_code) == (200, 403)
    assert f"127.0.0.2:{server.port}" in protection and f"localhost:{server.port}" in protection


def test_the_defaults_write_an_ipv6_bind_in_brackets_and_leave_wildcards_out():
    assert default_allowed_hosts("fd00::5", 8010)[0] == "[fd00::5]:8010"
    assert default_allowed_hosts("[FD00::5]", 8010)[0] == "[fd00::5]:8010"
    loopback = ("localhost:8010", "127.0.0.1:8010", "[::1]:8010")
    for wildcard in ("0.0.0.0", "::", "[::]", ""):
        assert default_allowed_hosts(wildcard, 8010) == loopback
    assert default_allowed_hosts("::1", 8010) == loopback and default_allowed_hosts("LOCALHOST", 8010) == loopback


async def test_a_server_built_without_settings_is_guarded_by_the_defaults():
    """tests and embeddings build HttpServer(create_http_app(...)) directly: the guard is there too."""
    http = HttpServer(create_http_app(ToolhostMetrics(), lambda: True), "127.0.0.1:0")
    port = await http.start()
    try:
        async with httpx.AsyncClient(timeout=HANG_GUARD_SECONDS) as client:
            # A route the app does not have: the guard answers before the router would say 404.
            rebound = await client.get(f"http://127.0.0.1:{port}/nothing", headers={"host": f"evil.example:{port}"})
            local = await client.get(f"http://127.0.0.1:{port}/nothing")
    finally:
        await http.stop()
    assert (rebound.status_code, local.status_code) == (403, 404)


async def test_an_allowed_origin_passes_and_any_other_is_refused():
    async with guarded_server(http_allowed_origins=("https://app.example.com", "http://localhost:6274")) as server:
        allowed = [await post(server.url, headers={"origin": origin})
                   for origin in ("https://app.example.com", "http://localhost:6274", "HTTPS://APP.EXAMPLE.COM")]
        refused = [await post(server.url, headers={"origin": origin})
                   for origin in ("https://evil.example", "null", "http://app.example.com", "http://localhost:6275")]
        without = await post(server.url)
    assert [answer.status_code for answer in allowed] == [200] * 3
    assert [answer.status_code for answer in refused] == [403] * 4
    assert {answer.json()["error"] for answer in refused} == {"origin_not_allowed"}
    assert "http_allowed_origins" in refused[0].json()["message"]
    assert without.status_code == 200


async def test_no_origin_is_allowed_by_default():
    async with guarded_server() as server:
        page = await post(server.url, headers={"origin": f"http://127.0.0.1:{server.port}"})
        probe = await post(server.url, headers={"origin": "https://evil.example"}, method="GET", path="/healthz",
                           body=b"")
    assert page.status_code == 403 and probe.status_code == 200


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8",
                                          "Application/JSON;charset=UTF-8", "application/json ; x=y"])
async def test_json_bodies_pass_whatever_their_parameters(content_type):
    async with guarded_server() as server:
        answers = [await post(server.url, headers={"content-type": content_type}, method=method)
                   for method in ("POST", "PUT", "PATCH")]
    assert [answer.status_code for answer in answers] == [200] * 3


@pytest.mark.parametrize("content_type", ["text/plain", "application/jsonx", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", "text/json", "", "json"])
async def test_other_bodies_are_refused_with_415(content_type):
    async with guarded_server() as server:
        answers = [await post(server.url, headers={"content-type": content_type}, method=method)
                   for method in ("POST", "PUT", "PATCH")]
    assert [answer.status_code for answer in answers] == [415] * 3
    assert answers[0].json()["error"] == "unsupported_media_type"
    assert "Content-Type: application/json" in answers[0].json()["message"]
    assert server.bodies == []


async def test_a_post_without_content_type_is_refused_and_a_get_needs_none():
    async with guarded_server() as server:
        untyped = await raw_request(server.port, f"POST /echo HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                                    "Content-Length: 2\r\nConnection: close\r\n\r\n{}")
        got = await raw_request(server.port, f"GET /echo HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                                "Connection: close\r\n\r\n")
    assert (untyped.status, got.status) == (415, 200)


@pytest.mark.parametrize("length", ["", "Content-Length: 0\r\n"])
async def test_a_post_with_no_body_at_all_needs_no_content_type(length):
    # `curl -X POST http://localhost:8010/ai/tools/reload`, as the seed writes it, sends neither header.
    async with guarded_server() as server:
        bare = await raw_request(server.port, f"POST /echo HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                                 f"{length}Connection: close\r\n\r\n")
        chunked = await raw_request(server.port, f"POST /echo HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                                    "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n")
    assert bare.status == 200
    assert server.bodies == [0]
    # A chunked body may turn out empty, but the guard cannot know before reading it: it needs its type.
    assert chunked.status == 415


async def test_a_body_up_to_max_message_bytes_passes_and_one_byte_more_is_413():
    async with guarded_server(max_message_bytes=1000) as server:
        at_limit = await post(server.url, body=b"x" * 1000)
        over = await post(server.url, body=b"x" * 1001)
    assert at_limit.status_code == 200 and at_limit.json() == {"bytes": 1000}
    assert over.status_code == 413 and over.json()["error"] == "body_too_large"
    assert "max_message_bytes" in over.json()["message"] and "1000" in over.json()["message"]
    assert server.bodies == [1000]


async def test_a_chunked_body_reaches_the_route_whole_when_it_stays_under_the_limit():
    async with guarded_server(max_message_bytes=1000) as server:
        head = (f"POST /echo HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
                "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
        under = await raw_request(server.port, head, chunk(b"x" * 400), chunk(b"y" * 600), b"0\r\n\r\n")
        over = await raw_request(server.port, head, chunk(b"x" * 400), chunk(b"y" * 601), b"0\r\n\r\n")
    assert under.status == 200 and b'{"bytes":1000}' in under.body
    assert over.status == 413 and b'"body_too_large"' in over.body
    assert server.bodies == [1000]


async def test_the_start_up_line_names_what_the_routes_answer():
    settings = {"http_allowed_hosts": ("toolhost.example:*",), "http_allowed_origins": ("https://app.example",)}
    async with guarded_server(**settings) as server:
        protection = server.http.protection
    assert "Host toolhost.example:* (http_allowed_hosts)" in protection
    assert "Origin https://app.example (http_allowed_origins)" in protection


def test_the_settings_load_from_the_environment_normalized():
    config = load_config(environ={
        "TOOLHOST_HTTP_ALLOWED_HOSTS": " Toolhost.Tools.Svc:* , mcp.example.com:08443,[FD00::5]:8010",
        "TOOLHOST_HTTP_ALLOWED_ORIGINS": "HTTPS://App.Example.com:443,http://localhost:6274"})
    assert config.http_allowed_hosts == ("toolhost.tools.svc:*", "mcp.example.com:8443", "[fd00::5]:8010")
    # Browsers leave the scheme's default port out of Origin, so an entry with it would never match.
    assert config.http_allowed_origins == ("https://app.example.com", "http://localhost:6274")
    assert GuardSettings.of(config).allowed_hosts == config.http_allowed_hosts
    assert load_config(flags={"http_allowed_hosts": "a.example:1"}).http_allowed_hosts == ("a.example:1",)


@pytest.mark.parametrize(("value", "says"), [
    ("http://toolhost.example:8010/mcp", "toolhost.example:8010"),
    ("*.example.com", "names take no wildcards"),
    ("*,localhost:8010", "give '*' alone"),
    ("::1:8010", "brackets"),
    ("[::1", "brackets"),
    ("[zz::1]:80", "not an IPv6 address"),
    ("localhost:0", "1 to 65535"),
    ("localhost:70000", "1 to 65535"),
    ("localhost:80a", "1 to 65535"),
    ("user@host:80", "host, host:port or host:*"),
    ("host name:80", "host, host:port or host:*"),
])
def test_a_wrong_host_entry_stops_the_load_saying_how_to_write_it(value, says):
    with pytest.raises(ConfigError) as raised:
        load_config(environ={"TOOLHOST_HTTP_ALLOWED_HOSTS": value})
    assert "TOOLHOST_HTTP_ALLOWED_HOSTS" in str(raised.value) and says in str(raised.value)


@pytest.mark.parametrize(("value", "says"), [
    ("null", "sandboxed frames"),
    ("*", "every web page"),
    ("app.example.com", "scheme://host[:port]"),
    ("https://app.example.com/", "no trailing slash"),
    ("https://app.example.com/path", "https://app.example.com"),
    ("https://user@app.example.com", "no user"),
    ("https://app.example.com:*", "origins are exact"),
    ("https://*.example.com", "names take no wildcards"),
])
def test_a_wrong_origin_entry_stops_the_load_saying_how_to_write_it(value, says):
    with pytest.raises(ConfigError) as raised:
        load_config(environ={"TOOLHOST_HTTP_ALLOWED_ORIGINS": value})
    assert "TOOLHOST_HTTP_ALLOWED_ORIGINS" in str(raised.value) and says in str(raised.value)
