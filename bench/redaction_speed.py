"""Redaction throughput in MB/s, against json.dumps of the same data as the baseline.

Redacts a ~1 MB nested structure and a ~1 MB text, each without secrets and with a few, through a
per-call Redactor (one known value added with `with_values`, as the pipeline does). MB are the bytes of
the structure's JSON text, or the text's UTF-8 bytes. Reports the best of several rounds.

    .venv/bin/python bench/redaction_speed.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import time
from collections.abc import Callable
from typing import Any

from toolhost_server.sanitize import RedactionResult, Redactor

KNOWN = "s3cr3t-canary-value"
WORDS = [
    "status", "ready", "primary", "index", "value", "count", "result", "item", "name", "user", "email",
    "description", "latency", "http", "response", "server", "client", "request", "the", "quick", "brown",
    "fox", "jumps", "over", "lazy", "dog", "ok", "error", "warning", "info", "debug", "cache", "hit", "miss",
    "region", "zone", "node", "pod", "container", "image", "tag", "deploy", "build",
]


def structure(rng: random.Random, records: int, secrets: bool) -> list[dict[str, Any]]:
    """Tool output as an AI tool server sees it: records with counts, ids, texts, nested metadata."""
    data = []
    for i in range(records):
        record: dict[str, Any] = {
            "id": i,
            "name": f"{rng.choice(WORDS)}-{i}",
            "status": rng.choice(WORDS),
            "max_tokens": 1024,
            "token_count": rng.randrange(5000),
            "description": " ".join(rng.choice(WORDS) for _ in range(10)),
            "tags": [rng.choice(WORDS) for _ in range(3)],
            "metadata": {"primary_key": i, "sort_key": f"k{i:06d}", "score": round(rng.random(), 4),
                         "enabled": i % 2 == 0, "owner": None},
        }
        if secrets and i % 200 == 0:
            record["metadata"]["DB_PASSWORD"] = "hunter2hunter2"
            record["description"] += f" connect with postgres://app:pw{i}@db/app using {KNOWN}"
        data.append(record)
    return data


def text(rng: random.Random, size: int, secrets: bool) -> str:
    lines = []
    total = 0
    i = 0
    while total < size:
        line = f"2025-01-01T00:00:{i % 60:02d}Z INFO " + " ".join(rng.choice(WORDS) for _ in range(12))
        if secrets and i % 500 == 0:
            line += f" Authorization: Bearer abc{i}def456ghi789 token={KNOWN}"
        lines.append(line)
        total += len(line) + 1
        i += 1
    return "\n".join(lines)


def best_seconds(action: Callable[[], object], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - started)
    return best


def compare(baseline: Callable[[], object], redaction: Callable[[], object], rounds: int) -> tuple[float, float]:
    """Best seconds of each, measured alternately so that noise on a busy machine hits both alike."""
    baseline_best = redaction_best = float("inf")
    for _ in range(rounds):
        baseline_best = min(baseline_best, best_seconds(baseline, 1))
        redaction_best = min(redaction_best, best_seconds(redaction, 1))
    return baseline_best, redaction_best


def report(label: str, size_mb: float, baseline: Callable[[], object],
           redaction: Callable[[], RedactionResult[Any]], rounds: int) -> None:
    baseline_seconds, seconds = compare(baseline, redaction, rounds)
    print(f"{label:<28}{size_mb:>6.2f}{size_mb / seconds:>9.0f}{size_mb / baseline_seconds:>17.0f}"
          f"{baseline_seconds / seconds:>7.2f}  {redaction().redacted}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    rng = random.Random(7)
    redactor = Redactor().with_values([KNOWN])

    print(f"{'case':<28}{'MB':>6}{'MB/s':>9}{'json.dumps MB/s':>17}{'ratio':>7}  redacted")
    for secrets in (False, True):
        data = structure(rng, 3300, secrets)
        report(f"structure, {'some secrets' if secrets else 'no secrets'}", len(json.dumps(data).encode()) / 1e6,
               functools.partial(json.dumps, data), functools.partial(redactor.redact_value, data), args.rounds)
    for secrets in (False, True):
        sample = text(rng, 1_000_000, secrets)
        report(f"text, {'some secrets' if secrets else 'no secrets'}", len(sample.encode()) / 1e6,
               functools.partial(json.dumps, sample), functools.partial(redactor.redact_text, sample), args.rounds)
    derive = best_seconds(functools.partial(redactor.with_values, ["another-credential-1"]), args.rounds)
    print(f"with_values (one new value): {derive * 1e6:.0f} µs")


if __name__ == "__main__":
    main()
