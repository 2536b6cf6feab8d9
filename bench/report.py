"""docs/benchmarks.md and its plot, written from the document bench/run.py saves as bench/results/latest.json.

The page is generated; what is written by hand lives in bench/findings/<group>.md (profiles, fixes with their
before/after figures, why a target is out of reach), included under each group's table, and in
bench/findings/summary.md (the missed targets at a glance), included at the top. The soak (`make soak`,
bench/soak.py) keeps its own result, bench/results/soak.json; its section comes last, with bench/findings/soak.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.harness import BENCH

FINDINGS = BENCH / "findings"
# The soak's results, next to latest.json: a full run's (on the page) and a shorter smoke run's (not).
SOAK_RESULTS = "soak.json"
SOAK_QUICK_RESULTS = "soak-quick.json"
SOAK_QUANTITIES = {"rss_bytes": "RSS", "open_fds": "open descriptors",
                   "steady_threads": "threads (gRPC's surplus left out)", "ring_bytes": "log ring bytes"}
TITLES = {
    "call_stages": "Where a CallTool's server time goes",
    "call_path": "CallTool against a bare grpc.aio server",
    "mcp_compare": "toolhost against the MCP Python SDK",
    "catalog_scale": "The catalog at scale",
    "local_costs": "Process runner, log reader, redaction",
    "workspace_tools": "Workspace tools: grep, glob, read",
    "file_search": "File search index: build, search, recent_files, new files",
    "user_tools": "User tools: propagation between replicas, CreateUserTool",
    "assets": "Asset inventory: asset_count, asset_search, windows_list_directory",
}


def _number(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _spread(spread: dict[str, Any]) -> str:
    return f"{_number(spread['median'])} ({_number(spread['low'])}–{_number(spread['high'])})"


def _ratio(spread: dict[str, Any]) -> str:
    return f"{_times(spread['median'])}× ({_times(spread['low'])}–{_times(spread['high'])})"


def _times(value: float) -> str:
    # Two decimals, but two significant digits below 0.01, where two decimals would show 0.00.
    return f"{value:.2f}" if value == 0 or abs(value) >= 0.01 else f"{value:.2g}"


def figure_row(figure: dict[str, Any]) -> str:
    target = figure["target"]["text"] if figure["target"] else "report"
    verdict = {"met": "met", "MISSED": "**missed**", "reported": "reported"}[figure["verdict"]]
    cells = [
        f"{figure['title']} <br>`{figure['key']}`",
        f"{_spread(figure['measured'])} {figure['unit']}",
        f"{figure['baseline_name']}: {_spread(figure['baseline'])} {figure['unit']}",
        _ratio(figure["ratio"]),
        target,
        verdict,
        f"`{figure['command']}`",
    ]
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def read_soak(results: Path) -> dict[str, Any] | None:
    """The full soak's result document in the `results` directory, None when there is none (or it is unreadable)."""
    try:
        document: dict[str, Any] = json.loads((results / SOAK_RESULTS).read_text())
    except (OSError, ValueError):
        return None
    return document


def _percent(change: float) -> str:
    return f"{change:+.1%}" if abs(change) >= 0.0005 else "0.0%"


def soak_lines(soak: dict[str, Any]) -> list[str]:
    """The soak's section: its samples a row each, the growth after the warm-up, the verdict, the findings."""
    settings = soak["settings"]
    calls = soak["calls"]
    kinds = ", ".join(f"{count:,} {kind}" for kind, count in calls["by_kind"].items())
    reached = calls["total"] / (settings["minutes"] * 60)
    lines = [
        f"## Soak: {settings['minutes']:g} minutes of mixed calls",
        "",
        f"`{soak['command']}` (bench/soak.py), written {soak['written']} at commit `{soak['machine']['commit']}`: "
        f"{settings['clients']} clients paced at up to {settings['calls_per_second']:g} calls/s ({reached:.0f} "
        f"reached) against one `toolhost serve` keeping {settings['ring_records']:,} log records in memory, and a "
        f"catalog edit with a Reload every {settings['reload_seconds']:g} s; {calls['total']:,} calls in all "
        f"({kinds}). Every {settings['sample_seconds']:g} s the load pauses until no call is in flight and the "
        "server's /proc and `/metrics` are read; the calls and failures of a row are those since the previous row.",
        "",
        "| minute | RSS (MiB) | open fds | threads (gRPC surplus) | log ring (KiB) | calls | failures |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [f"| {sample['minute']:g} | {sample['rss_bytes'] / 2**20:.1f} | {sample['open_fds']} | "
              f"{sample['threads']} ({sample['grpc_surplus_threads']}) | {sample['ring_bytes'] / 1024:,.0f} | "
              f"{sample['calls']:,} | {sample['failures']} |" for sample in soak["samples"]]
    growth = []
    for quantity, name in SOAK_QUANTITIES.items():
        judged = soak["growth"].get(quantity)
        if judged:
            change = "from nothing" if judged["growth"] is None else _percent(judged["growth"])
            growth.append(f"{name} {change}" + ("" if judged["ok"] else " (**over the limit**)"))
    drained = soak["grpc_surplus_drained_seconds"]
    lines += ["", f"Growth after the warm-up ({soak['rule']}): {', '.join(growth) or 'not judged'}; "
              f"{soak['failures']} failed calls. gRPC's event-engine pool was back to the idle server's "
              f"{soak['grpc_reserve_threads']} threads "
              + (f"{drained:g} s after the load." if drained is not None else "**not** within 40 s after the load.")
              + f" **Verdict: {soak['verdict']}.**", ""]
    lines += [f"- {reason}" for reason in soak["reasons"]]
    lines += [f"- a failed {example['kind']} at minute {example['minute']:g}: `{example['error']}`"
              for example in calls["failure_examples"][:5]]
    findings = FINDINGS / "soak.md"
    if findings.exists():
        lines += [*([""] if lines[-1] else []), findings.read_text().strip(), ""]
    return lines


def write_markdown(document: dict[str, Any], path: Path, plot: Path | None,
                   soak: dict[str, Any] | None = None) -> None:
    machine = document["machine"]
    packages = ", ".join(f"{name} {version}" for name, version in machine["packages"].items() if version)
    figures = [figure for group in document["groups"] for figure in group["figures"]]
    met = sum(figure["verdict"] == "met" for figure in figures)
    judged = sum(figure["verdict"] != "reported" for figure in figures)
    lines = [
        "# Benchmarks",
        "",
        "Generated by `make bench` (bench/run.py) from `bench/results/latest.json`; edit `bench/findings/*.md`, "
        "not this page.",
        "",
        "Every figure is measured against a baseline in the same run, in alternating rounds (A, B, B, A, ...) "
        "because this small machine is noisy. Each cell shows the median over the rounds and, in brackets, the "
        "lowest and highest round; the ratio is taken round by round (measured / baseline) and its median is what "
        "a ratio target is judged on. A target in the figure's own unit is judged on the measured median.",
        "",
        f"Written {document['written']} at commit `{machine['commit']}`; the groups took "
        f"{sum(group['seconds'] for group in document['groups']):.0f} s on "
        f"{machine['cores']} cores ({machine['cpu']}), {machine['memory_gib']} GiB, Linux {machine['kernel']}, "
        f"Python {machine['python']}; {packages}; {machine['ghz'] or 'ghz'}.",
        "",
        f"**{met} of {judged} targets met.** Reproduce everything with `make bench` (under 10 minutes from a fresh "
        "clone), one group with the command in its row.",
        "",
    ]
    summary = FINDINGS / "summary.md"  # what stands in the way of the missed targets, written by hand
    if summary.exists():
        lines += [summary.read_text().strip(), ""]
    if plot is not None:
        lines += [f"![scaling curves]({plot.relative_to(path.parent).as_posix()})", ""]
    for group in document["groups"]:
        name = group["group"]
        lines += [f"## {TITLES.get(name, name)}", ""]
        if "error" in group:
            lines += [f"The group failed after {group['seconds']} s: `{group['error']}`", ""]
        if group["figures"]:
            lines += ["| figure | toolhost | baseline | ratio | target | verdict | reproduce |",
                      "|---|---|---|---|---|---|---|"]
            lines += [figure_row(figure) for figure in group["figures"]]
            lines += [""]
            lines += [f"- `{figure['key']}`: {figure['note']}" for figure in group["figures"] if figure["note"]]
            lines += ["", f"The group took {group['seconds']} s.", ""]
        findings = FINDINGS / f"{name}.md"
        if findings.exists():
            lines += [findings.read_text().strip(), ""]
    if soak is not None:
        lines += soak_lines(soak)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines).rstrip() + "\n")


def write_plot(document: dict[str, Any], path: Path) -> Path | None:
    """One panel per figure that carries a curve (extra["curve"]), toolhost against its baseline; None when
    matplotlib is not installed (`make bench` installs it) or no figure has a curve."""
    curves = [figure for group in document["groups"] for figure in group["figures"]
              if isinstance(figure.get("extra", {}).get("curve"), dict)]
    if not curves:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    figure_, axes = plt.subplots(1, len(curves), figsize=(4.2 * len(curves), 3.4), squeeze=False)
    for axis, figure in zip(axes[0], curves, strict=True):
        curve = figure["extra"]["curve"]
        axis.plot(curve["x"], curve["toolhost"], marker="o", label="toolhost")
        axis.plot(curve["x"], curve["baseline"], marker="s", linestyle="--", label=figure["baseline_name"][:40])
        axis.set_title(figure["key"], fontsize=9)
        axis.set_xlabel(curve.get("x_label", ""), fontsize=8)
        axis.set_ylabel(curve.get("y_label", figure["unit"]), fontsize=8)
        if curve.get("log_x"):
            axis.set_xscale("log")
        axis.tick_params(labelsize=7)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
    figure_.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    # Fixed metadata: the PNG changes only when the figures do.
    figure_.savefig(path, dpi=90, metadata={"Software": None})
    plt.close(figure_)
    return path

