"""`make bench`: runs every benchmark group, then writes bench/results/latest.json and docs/benchmarks.md.

    .venv/bin/python -m bench.run [--only call_path,local_costs] [--quick] [--no-docs]

Each group is a module of bench/ with `run(quick) -> list[Figure]`. A group that fails is reported as failed
(with its error) and the others still run; the exit status is 1 then. --only writes the figures of the groups
it ran into latest.json and keeps the other groups' figures from the previous latest.json, so one group can be
re-measured without the rest. --quick is a smoke run (fewer rounds, smaller inputs): its figures are not
comparable with a full run's, so it writes to bench/results/quick.json and leaves the docs alone.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.harness import BENCH, ROOT, Figure
from bench.report import read_soak, write_markdown, write_plot

# In the order they run: the in-process groups first (they need a quiet machine least), the servers after.
GROUPS = ("local_costs", "catalog_scale", "workspace_tools", "file_search", "user_tools", "assets", "tool_search",
          "call_stages", "call_path", "mcp_compare")
RESULTS = BENCH / "results"


def machine() -> dict[str, Any]:
    cpu = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.partition(":")[2].strip()
            break
    versions = {name: _version(name) for name in ("grpcio", "protobuf", "opentelemetry-sdk", "mcp", "uvicorn")}
    ghz = os.environ.get("GHZ", "")
    return {
        "cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(os.sysconf("SC_PAGE_SIZE")
                                                                 * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "kernel": platform.release(), "python": platform.python_version(), "packages": versions,
        "ghz": Path(ghz).name if ghz else "", "commit": _commit(),
        # Another server measured with this harness (a before/after run): see bench/harness.py quiet_env.
        "server_path": os.environ.get("BENCH_SERVER_PATH", ""),
    }


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ""


def _commit() -> str:
    try:
        found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                               check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""
    return found.stdout.strip() + ("+changes" if dirty else "")


def run_group(name: str, quick: bool) -> dict[str, Any]:
    # Writes still on their way to the disk (the venv and tools `make bench` just installed, the previous group's
    # 1 GiB log or 10,000 catalog files) go out first, so that their writeback does not land in this group's
    # rounds: the process runner's temporary directory, for one, is journal work that contends with it.
    os.sync()
    started = time.monotonic()
    print(f"bench: {name}...", file=sys.stderr, flush=True)
    try:
        module = importlib.import_module(f"bench.{name}")
        figures: list[Figure] = module.run(quick)
    except Exception as exc:
        traceback.print_exc()
        return {"group": name, "seconds": round(time.monotonic() - started, 1), "error": f"{type(exc).__name__}: "
                f"{exc}", "figures": []}
    seconds = round(time.monotonic() - started, 1)
    for figure in figures:
        print(f"  {figure.key}: {figure.measured.median:.4g} {figure.unit} vs {figure.baseline.median:.4g}, "
              f"ratio {figure.ratio.median:.3g} -> {figure.verdict}", file=sys.stderr, flush=True)
    print(f"bench: {name} took {seconds} s", file=sys.stderr, flush=True)
    return {"group": name, "seconds": seconds, "figures": [figure.as_json() for figure in figures]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--only", default="", help="comma-separated groups: " + ", ".join(GROUPS))
    parser.add_argument("--quick", action="store_true", help="a short smoke run, written to results/quick.json")
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite docs/benchmarks.md and the plot")
    parser.add_argument("--results", type=Path, default=RESULTS, help="where latest.json / quick.json go")
    args = parser.parse_args(argv)
    chosen = [name.strip() for name in args.only.split(",") if name.strip()] or list(GROUPS)
    unknown = sorted(set(chosen) - set(GROUPS))
    if unknown:
        parser.error(f"unknown group(s) {', '.join(unknown)}; the groups are {', '.join(GROUPS)}")

    started = time.monotonic()
    results = [run_group(name, args.quick) for name in chosen]
    args.results.mkdir(parents=True, exist_ok=True)
    out = args.results / ("quick.json" if args.quick else "latest.json")
    previous = _previous_groups(out) if args.only else {}
    merged = {**previous, **{result["group"]: result for result in results}}
    document = {
        "written": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": args.quick,
        "command": "make bench" + (f' BENCH_ARGS="{" ".join(sys.argv[1:])}"' if sys.argv[1:] else ""),
        "seconds": round(time.monotonic() - started, 1),
        "machine": machine(),
        "groups": [merged[name] for name in GROUPS if name in merged],
    }
    out.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    print(f"bench: wrote {out}", file=sys.stderr)
    if not args.quick and not args.no_docs:
        plot = write_plot(document, ROOT / "docs" / "benchmarks.png")
        # The soak's section stays, from the last `make soak` (bench/soak.py).
        write_markdown(document, ROOT / "docs" / "benchmarks.md", plot, read_soak(args.results))
        print("bench: wrote docs/benchmarks.md", file=sys.stderr)
    failed = [result["group"] for result in results if "error" in result]
    if failed:
        print(f"bench: FAILED groups: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def _previous_groups(path: Path) -> dict[str, Any]:
    try:
        return {group["group"]: group for group in json.loads(path.read_text())["groups"]}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


if __name__ == "__main__":
    sys.exit(main())
