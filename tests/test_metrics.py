"""Prometheus metrics at /metrics, served by the embedded HTTP app, scraped and parsed like Prometheus would."""

from __future__ import annotations

import dataclasses
import logging
import secrets
import ssl

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import toolhost
from toolhost_server.config import Config
from toolhost_server.telemetry.metrics import ToolhostMetrics
from toolhost_server.web.app import create_http_app
from toolhost_server.web.server import HttpServer, create_http_server

from helpers.catalogs import write_tool
from helpers.certificates import CertificateAuthority
from helpers.servers import ServerProcess


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


async def test_the_http_app_serves_metrics_and_health():
    metrics = ToolhostMetrics()
    ready = [True]
    server = HttpServer(create_http_app(metrics, lambda: ready[0]), "127.0.0.1:0")
    port = await server.start()
    try:
        metrics.call_started("echo")
        metrics.call_released("echo")
        metrics.call_finished("echo", "OK", 0.002, truncated=False, redacted=True)
        metrics.observe_rpc("/toolhost.v1.ToolService/CallTool", "OK", 0.003)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            scraped = await client.get("/metrics")
            live = await client.get("/healthz")
            ready_answer = await client.get("/readyz")
            ready[0] = False
            draining = await client.get("/readyz")
    finally:
        await server.stop()
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    values = samples(scraped.text)
    assert values[("toolhost_tool_calls_total", (("outcome", "OK"), ("tool", "echo")))] == 1
    assert values[("toolhost_tool_output_redactions_total", (("tool", "echo"),))] == 1
    assert values[("toolhost_tool_calls_in_flight", (("tool", "echo"),))] == 0
    call_tool = "/toolhost.v1.ToolService/CallTool"
    assert values[("toolhost_rpc_requests_total", (("code", "OK"), ("method", call_tool)))] == 1
    assert ("ai_tools_count", ()) in values and ("ai_tools_reload_total", ()) in values
    assert (live.status_code, ready_answer.status_code, draining.status_code) == (200, 200, 503)


async def test_prometheus_scrapes_over_tls_with_the_metrics_token_as_it_would_without(tmp_path):
    """What a scrape job with `scheme: https`, `authorization: {credentials_file: ...}` and `tls_config: {ca_file:
    ...}` gets: the same exposition as a plaintext scrape."""
    authority = CertificateAuthority(tmp_path / "pki")
    server_pair = authority.issue_server("server")
    token = secrets.token_urlsafe(32)
    (tmp_path / "token").write_text(f"{token}\n")
    metrics = ToolhostMetrics()
    metrics.call_finished("echo", "TIMEOUT", 0.5, truncated=True, redacted=False)
    config = dataclasses.replace(Config(), http_address="127.0.0.1:0", metrics_token_file=str(tmp_path / "token"),
                                 tls_cert_file=str(server_pair.certificate), tls_key_file=str(server_pair.key))
    protected = create_http_server(config, metrics, lambda: True)
    plain = HttpServer(create_http_app(metrics, lambda: True), "127.0.0.1:0")
    protected_port, plain_port = await protected.start(), await plain.start()
    try:
        verify = ssl.create_default_context(cafile=str(authority.certificate))
        async with httpx.AsyncClient(verify=verify, headers={"authorization": f"Bearer {token}"}) as scraper:
            scraped = await scraper.get(f"https://127.0.0.1:{protected_port}/metrics")
        async with httpx.AsyncClient() as scraper:
            reference = await scraper.get(f"http://127.0.0.1:{plain_port}/metrics")
    finally:
        await protected.stop()
        await plain.stop()
    assert scraped.status_code == 200 and scraped.headers["content-type"] == reference.headers["content-type"]
    assert samples(scraped.text) == samples(reference.text)
    assert samples(scraped.text)[("toolhost_tool_calls_total", (("outcome", "TIMEOUT"), ("tool", "echo")))] == 1


async def test_a_busy_http_port_fails_the_start_with_the_setting_to_change():
    first = HttpServer(create_http_app(ToolhostMetrics(), lambda: True), "127.0.0.1:0")
    port = await first.start()
    try:
        second = HttpServer(create_http_app(ToolhostMetrics(), lambda: True), f"127.0.0.1:{port}")
        with pytest.raises(OSError, match="http_address"):
            await second.start()
    finally:
        await first.stop()


@pytest.mark.server
async def test_a_served_toolhost_counts_its_calls_reloads_and_rpcs(tmp_path):
    catalog = tmp_path / "catalog"
    write_tool(catalog, "greet_someone")
    write_tool(catalog, "fails", "name: fails\ndescription: Exits 3.\n"
               "runner: {type: script, script: \"#!/bin/sh\\nexit 3\\n\"}\n")
    write_tool(catalog, "chatty", "name: chatty\ndescription: Says more than it may.\nmax_output_bytes: 10\n"
               "runner: {type: script, script: \"#!/bin/sh\\necho one two three four five\\n\"}\n")
    server = ServerProcess("--catalog-dir", str(catalog), "--watch-catalog", "false", "--process-user", "root")
    await server.start()
    try:
        http_port = int((await server.wait_for_log(rb"serving HTTP .* on 127\.0\.0\.1:(\d+)")).group(1))
        async with toolhost.AsyncClient(server.target, timeout=30) as client:
            for _ in range(3):
                await client.call_tool("echo", text="hi")
            await client.call_tool("fails")
            assert (await client.call_tool("echo", text="password=hunter2hunter2")).redacted
            assert (await client.call_tool("chatty")).truncated
            with pytest.raises(toolhost.InvalidArgumentError):
                await client.call_tool("echo", text=5)
            with pytest.raises(toolhost.NotFoundError):
                await client.call_tool("no_such_tool")
            await client.reload()
            listed = [tool.name async for tool in client.list_tools()]
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{http_port}") as http:
            values = samples((await http.get("/metrics")).text)
            ready = await http.get("/readyz")
    finally:
        await server.stop()
    assert ready.status_code == 200
    assert values[("ai_tools_count", ())] == len(listed) and "fails" in listed
    assert values[("ai_tools_loaded_total", ())] == len(listed)  # all at start; the reload changed nothing
    assert values[("ai_tools_reload_total", ())] == 2  # start and the Reload RPC
    assert values[("ai_tools_reload_errors_total", ())] == 0
    assert values[("toolhost_tool_calls_total", (("outcome", "OK"), ("tool", "echo")))] == 4
    assert values[("toolhost_tool_calls_total", (("outcome", "INVALID_ARGUMENTS"), ("tool", "echo")))] == 1
    assert values[("toolhost_tool_calls_total", (("outcome", "NON_ZERO_EXIT"), ("tool", "fails")))] == 1
    assert values[("toolhost_tool_call_duration_seconds_count", (("tool", "echo"),))] == 5
    assert values[("toolhost_tool_output_redactions_total", (("tool", "echo"),))] == 1
    assert values.get(("toolhost_tool_output_truncations_total", (("tool", "echo"),)), 0) == 0
    assert values[("toolhost_tool_output_truncations_total", (("tool", "chatty"),))] == 1
    assert values[("toolhost_tool_calls_in_flight", (("tool", "echo"),))] == 0
    # A name nobody serves is no label (it would let callers grow the metrics without bound); its RPC counts.
    assert not any(dict(labels).get("tool") == "no_such_tool" for _, labels in values)
    call_tool = "toolhost.v1.ToolService/CallTool"
    assert values[("toolhost_rpc_requests_total", (("code", "OK"), ("method", call_tool)))] == 6
    assert values[("toolhost_rpc_requests_total", (("code", "INVALID_ARGUMENT"), ("method", call_tool)))] == 1
    assert values[("toolhost_rpc_requests_total", (("code", "NOT_FOUND"), ("method", call_tool)))] == 1
    assert values[("toolhost_rpc_requests_total", (("code", "OK"), ("method", "toolhost.v1.ToolService/Reload")))] == 1
    assert values[("toolhost_rpc_duration_seconds_count", (("code", "NOT_FOUND"), ("method", call_tool)))] == 1
    assert 0 < values[("toolhost_log_ring_bytes", ())] <= 64 * 2**20  # the audit lines of the calls, at least


async def test_the_log_ring_gauge_follows_what_the_ring_holds_up_to_log_memory_bytes(start_server):
    bound = 100_000
    server = await start_server(log_memory_bytes=bound)
    metrics = server.toolhost.metrics

    def ring_bytes() -> float:
        return samples(metrics.render().decode())[("toolhost_log_ring_bytes", ())]

    big_line = "x" * 20_000
    before = ring_bytes()
    logging.getLogger("toolhost.test").warning("%s", big_line)
    after = ring_bytes()
    # The line is counted; unless the ring was already near its bound (the server's own start-up lines and
    # whatever else this process logged), when older records made room for it.
    assert after >= before + len(big_line) or after > bound - 2 * len(big_line), (before, after)
    for _ in range(2 * bound // len(big_line)):
        logging.getLogger("toolhost.test").warning("%s", big_line)
    # Full: the oldest records went, and what is left is within one record of the bound.
    assert bound - 2 * len(big_line) < ring_bytes() <= bound
