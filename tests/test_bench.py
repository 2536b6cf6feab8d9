"""A smoke test of the benchmark harness (`make bench` itself is not run by `make test`).

The arithmetic every figure's verdict rests on, the page the figures become, and one real quick run of an
in-process group through bench/run.py, into a scratch directory.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.harness import BENCH, Figure, ServerProcess, Target, interleave
from bench.mcp_compare import MCP_READY, Mcp
from bench.mcp_load import (
    HANDSHAKE,
    MODERN,
    EchoCall,
    McpHttpTarget,
    echo_text,
    mcp_headers,
    mcp_request,
    reply_message,
)
from bench.report import write_markdown

ROOT = Path(__file__).resolve().parent.parent


def figure(measured: list[float], baseline: list[float], target: Target | None) -> Figure:
    return Figure.from_rounds(key="k", title="A figure", unit="ms", measured=measured, baseline=baseline,
                              baseline_name="the baseline", target=target, command="make bench", note="how")


def test_the_ratio_is_taken_round_by_round_and_judged_on_its_median():
    result = figure([2.0, 4.0, 9.0], [1.0, 4.0, 3.0], Target.ratio_at_most(2))
    assert result.ratio.samples == [2.0, 1.0, 3.0]
    assert (result.ratio.median, result.ratio.low, result.ratio.high) == (2.0, 1.0, 3.0)
    assert result.verdict == "met"
    assert figure([2.0, 4.0, 9.0], [1.0, 4.0, 3.0], Target.ratio_at_least(2.5)).verdict == "MISSED"


def test_a_value_target_reads_the_measured_median_not_the_ratio():
    # Measured median 5, ratio median 2.5: judged on the ratio, the ≤ 3 target would be met.
    assert figure([4.0, 5.0, 6.0], [2.0, 2.0, 2.0], Target.value_at_most(5)).verdict == "met"
    assert figure([4.0, 5.0, 6.0], [2.0, 2.0, 2.0], Target.value_at_most(3)).verdict == "MISSED"
    assert figure([4.0, 5.0, 6.0], [2.0, 2.0, 2.0], Target.value_at_least(5.5)).verdict == "MISSED"
    assert figure([4.0], [1.0], None).verdict == "reported"


def test_rounds_of_different_counts_are_refused():
    with pytest.raises(ValueError, match="2 measured rounds against 1"):
        figure([1.0, 2.0], [1.0], None)


def test_interleave_alternates_which_side_goes_first():
    order: list[str] = []
    interleave(4, lambda: order.append("A") or 1.0, lambda: order.append("B") or 1.0)
    assert order == ["A", "B", "B", "A", "A", "B", "B", "A"]


def test_the_page_shows_every_figure_with_its_baseline_spread_target_and_command(tmp_path):
    document = {
        "written": "2026-01-01T00:00:00+00:00", "quick": False, "command": "make bench", "seconds": 300.0,
        "machine": {"cpu": "CPU", "cores": 2, "memory_gib": 24.0, "kernel": "6", "python": "3.11",
                    "packages": {"grpcio": "1"}, "ghz": "ghz-v0", "commit": "abc"},
        "groups": [{"group": "call_path", "seconds": 12.0, "figures": [
            figure([2.0, 4.0, 9.0], [1.0, 4.0, 3.0], Target.ratio_at_least(0.8)).as_json()]},
            {"group": "catalog_scale", "seconds": 1.0, "error": "RuntimeError: no", "figures": []}],
    }
    page = tmp_path / "benchmarks.md"
    write_markdown(document, page, None)
    text = page.read_text()
    row = next(line for line in text.splitlines() if "`k`" in line)
    assert "4 (2–9) ms" in row and "the baseline: 3 (1–4) ms" in row
    assert "2.00× (1.00–3.00)" in row and "≥ 0.8×" in row and "met" in row and "`make bench`" in row
    assert "**1 of 1 targets met.**" in text
    assert "The group failed after 1.0 s: `RuntimeError: no`" in text
    # The hand-written summary of the missed targets comes right after the count, before the first group.
    assert text.index("### The targets missed") < text.index("## CallTool against a bare grpc.aio server")


@pytest.mark.slow
def test_a_quick_run_of_a_group_writes_its_figures(tmp_path):
    page = ROOT / "docs" / "benchmarks.md"
    committed_page = page.read_bytes()
    done = subprocess.run([sys.executable, "-m", "bench.run", "--only", "local_costs", "--quick", "--results",
                           str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads((tmp_path / "quick.json").read_text())
    [group] = document["groups"]
    keys = {f["key"] for f in group["figures"]}
    assert {"process_runner_true", "log_tail_1gib", "redaction_1mb"} <= keys
    for result in group["figures"]:
        assert result["measured"]["samples"] and result["baseline"]["samples"]
        assert result["verdict"] in ("met", "MISSED")
    # A quick run only smokes the harness: the committed page keeps the figures of a full run.
    assert page.read_bytes() == committed_page


# -- the /mcp figures' checks (bench/mcp_load.py): hey counts HTTP statuses only -------------------------------

def test_the_response_is_found_among_the_events_of_an_sse_reply():
    # A priming event without data and a progress notification come first; only the response has an id.
    body = (b"id: 0\nretry: 1000\n\n"
            b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}\n\n'
            b'event: message\r\ndata: {"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}],'
            b'"isError":false}}\r\n\r\n')
    assert echo_text(reply_message("text/event-stream", body)) == "hello"
    with pytest.raises(RuntimeError, match="no JSON-RPC response"):
        reply_message("text/event-stream", b"id: 0\n\n")
    with pytest.raises(RuntimeError, match="content type 'text/html"):
        reply_message("text/html; charset=utf-8", b"<html>")


def test_a_tool_error_inside_a_200_is_not_echo_text():
    failed = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "TOOL_FAILED: no"}],
                                                    "isError": True}}
    with pytest.raises(RuntimeError, match="failed"):
        echo_text(failed)


@pytest.mark.slow
def test_the_same_echo_call_reaches_the_sdk_server_in_both_eras_and_an_error_in_a_200_is_refused(tmp_path):
    with ServerProcess([sys.executable, str(BENCH / "mcp_server.py"), "--tools", "3"], cwd=ROOT,
                       ready=MCP_READY) as server:
        mcp = Mcp(server, tmp_path)
        for protocol in (MODERN, HANDSHAKE):
            endpoint = mcp.endpoint(EchoCall.at(protocol), tmp_path)
            endpoint.check_reply()
            assert endpoint.reply_content_type == "application/json"
            assert (tmp_path / f"sdk-echo-{protocol}.json").read_bytes() == EchoCall.at(protocol).body
        assert mcp.echo_counts().ok == 2
        # An unknown tool is an error inside a 200 (the SDK's MCPServer says isError, toolhost a JSON-RPC error):
        # what hey would count as a success.
        unknown = EchoCall(MODERN, mcp_headers(MODERN, "tools/call", "nope"), json.dumps(
            mcp_request("tools/call", {"name": "nope", "arguments": {"text": "hello"}})).encode())
        with pytest.raises(RuntimeError, match="Unknown tool: nope"):
            McpHttpTarget(server, mcp.url, unknown, tmp_path / "nope.json", mcp.echo_counts).check_reply()
        assert mcp.echo_counts().ok == 2
