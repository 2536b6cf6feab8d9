"""The soak harness (`make soak`, bench/soak.py) in short, so that `make test` covers it without its 20 minutes.

What it proves: the harness run for 0.2 minutes with a sample every 2 s starts a real server, gets every kind of
call of its mix back as designed (no failed call), reads live figures from /proc and /metrics at each sample, and
judges them by its documented rule: the largest of the last three samples against the first one after the
warm-up, under +5 %, and no failed call. Fed those real samples with a leak or a failed call added, the rule
fails them. The page's soak section shows the samples and the verdict.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.report import read_soak, write_markdown
from bench.soak import QUANTITIES, ROUND, judge

ROOT = Path(__file__).resolve().parent.parent


def growth_by_the_rule(samples: list[dict[str, Any]], warmup_minutes: float) -> dict[str, float]:
    """The documented rule, read independently of bench/soak.py: baseline the first sample at or after the
    warm-up, end the largest of the (up to) three samples after it that come last."""
    after = [sample for sample in samples if sample["minute"] >= warmup_minutes - 1e-9]
    baseline, last = after[0], after[1:][-3:]
    return {quantity: max(sample[quantity] for sample in last) / baseline[quantity] - 1 for quantity in QUANTITIES}


@pytest.fixture(scope="module")
def short_soak(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    results = tmp_path_factory.mktemp("soak")
    done = subprocess.run(
        [sys.executable, "-m", "bench.soak", "--minutes", "0.2", "--sample-seconds", "2", "--reload-seconds", "2",
         "--results", str(results)], cwd=ROOT, capture_output=True, text=True, timeout=110)
    quick = results / "soak-quick.json"
    assert quick.exists(), done.stderr[-3000:]
    assert not (results / "soak.json").exists()  # a smoke run never stands in for the full run's figures
    return done, json.loads(quick.read_text())


@pytest.mark.slow
def test_a_short_soak_samples_a_live_server_and_every_call_comes_back_as_designed(short_soak):
    done, document = short_soak
    samples = document["samples"]
    assert [sample["minute"] for sample in samples] == pytest.approx([i * 2 / 60 for i in range(7)], abs=1e-3)
    for sample in samples:
        assert sample["rss_bytes"] > 10 * 2**20 and sample["open_fds"] > 3 and sample["steady_threads"] >= 1
        assert sample["steady_threads"] + sample["grpc_surplus_threads"] == sample["threads"]
        assert sample["ring_bytes"] > 0
    assert samples[0]["calls"] == 0  # the idle server, before the load
    assert all(sample["calls"] > 0 for sample in samples[1:])
    calls = document["calls"]
    assert sum(sample["calls"] for sample in samples) == calls["total"]
    assert set(calls["by_kind"]) == {*ROUND, "reload"}
    assert document["failures"] == 0 and calls["failed_by_kind"] == {}, calls["failure_examples"]
    # The log ring filled: its record bound shrinks with a short run, and the ring's bytes stopped growing.
    assert document["settings"]["ring_records"] == 200
    assert samples[-1]["ring_bytes"] < 2 * samples[1]["ring_bytes"]
    # gRPC's surplus threads, left out of the judged count, ended once the load stopped.
    assert document["grpc_surplus_drained_seconds"] is not None
    assert done.returncode == (0 if document["verdict"] == "passed" else 1), done.stderr[-3000:]


@pytest.mark.slow
def test_the_verdict_applies_the_documented_rule_to_the_real_samples(short_soak):
    _, document = short_soak
    samples, warmup = document["samples"], document["settings"]["warmup_minutes"]
    expected = growth_by_the_rule(samples, warmup)
    for quantity in QUANTITIES:
        assert document["growth"][quantity]["growth"] == pytest.approx(expected[quantity])
        assert document["growth"][quantity]["ok"] == (expected[quantity] < 0.05)
    assert document["verdict"] == ("passed" if all(g < 0.05 for g in expected.values()) else "FAILED")
    assert judge(samples, warmup, 0) == {key: document[key] for key in ("rule", "growth", "failures", "verdict",
                                                                           "reasons")}


@pytest.mark.slow
@pytest.mark.parametrize("quantity", QUANTITIES)
def test_growth_in_any_late_sample_fails_even_when_the_last_one_dips(short_soak, quantity):
    _, document = short_soak
    warmup = document["settings"]["warmup_minutes"]
    leaking = copy.deepcopy(document["samples"])
    baseline = next(sample for sample in leaking if sample["minute"] >= warmup - 1e-9)[quantity]
    leaking[-2][quantity] = round(baseline * 1.06) + 1
    leaking[-1][quantity] = baseline  # a dip at the very end does not hide it
    verdict = judge(leaking, warmup, 0)
    assert verdict["verdict"] == "FAILED" and not verdict["growth"][quantity]["ok"]
    assert any(reason.startswith(f"{quantity} grew +") for reason in verdict["reasons"])


@pytest.mark.slow
def test_one_failed_call_or_a_problem_of_the_run_fails_the_verdict(short_soak):
    _, document = short_soak
    samples, warmup = document["samples"], document["settings"]["warmup_minutes"]
    verdict = judge(samples, warmup, 1)
    assert verdict["verdict"] == "FAILED" and "1 failed call(s)" in verdict["reasons"]
    verdict = judge(samples, warmup, 0, problems=["gRPC's threads stayed"])
    assert verdict["verdict"] == "FAILED" and "gRPC's threads stayed" in verdict["reasons"]


def test_too_few_samples_after_the_warm_up_are_no_verdict_of_passed():
    samples = [{"minute": 0.0, **dict.fromkeys(QUANTITIES, 10)}, {"minute": 1.0, **dict.fromkeys(QUANTITIES, 10)}]
    verdict = judge(samples, 1.0, 0)
    assert verdict["verdict"] == "FAILED" and "1 sample(s) at or after" in verdict["reasons"][0]


@pytest.mark.slow
def test_the_page_shows_the_soak_samples_and_verdict(short_soak, tmp_path):
    _, document = short_soak
    bench_document = {
        "written": "2026-01-01T00:00:00+00:00", "quick": False, "command": "make bench", "seconds": 1.0,
        "machine": {"cpu": "CPU", "cores": 2, "memory_gib": 24.0, "kernel": "6", "python": "3.11",
                    "packages": {}, "ghz": "", "commit": "abc"}, "groups": []}
    page = tmp_path / "benchmarks.md"
    write_markdown(bench_document, page, None, document)
    text = page.read_text()
    section = text[text.index("## Soak: 0.2 minutes of mixed calls"):]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| minute")]
    assert len(rows) == len(document["samples"])
    first = document["samples"][1]
    assert rows[1].startswith(f"| {first['minute']:g} | {first['rss_bytes'] / 2**20:.1f} | {first['open_fds']} | "
                              f"{first['threads']} ({first['grpc_surplus_threads']}) |")
    assert f"**Verdict: {document['verdict']}.**" in section
    assert f"{document['failures']} failed calls" in section


def test_make_bench_reads_the_full_soak_result_for_the_page_and_nothing_else(tmp_path):
    assert read_soak(tmp_path) is None
    (tmp_path / "soak-quick.json").write_text(json.dumps({"verdict": "passed"}))
    assert read_soak(tmp_path) is None  # a smoke run's figures never reach the page
    (tmp_path / "soak.json").write_text(json.dumps({"verdict": "FAILED"}))
    assert read_soak(tmp_path) == {"verdict": "FAILED"}
