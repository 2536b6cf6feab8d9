"""Catalog files a test writes for its server: tools of each runner, and a ConfigMap-style directory."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_tool(directory: Path, name: str, body: str = "", filename: str | None = None) -> Path:
    """Write a catalog file for a python-runner echo-like tool called `name` (or with the given body)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (filename or f"{name}.yaml")
    path.write_text(body or (
        f"name: {name}\n"
        f"description: Test tool {name}.\n"
        "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:greet'}\n"
        "parameters:\n"
        "  - {name: name, type: string, required: true}\n"
    ))
    return path


def tool_yaml(name: str, runner: dict[str, Any], parameters: str = "", extra: str = "") -> str:
    """A catalog file; the runner mapping is written as JSON (valid YAML) to keep the quoting exact."""
    return (f"name: {name}\ndescription: Test tool {name}.\nrunner: {json.dumps(runner)}\n{extra}"
            + (f"parameters:\n{parameters}" if parameters else ""))


def add_tool(directory: Path, name: str, runner: dict[str, Any], parameters: str = "", extra: str = "") -> None:
    """Write the catalog file of tool_yaml(...) into `directory`."""
    write_tool(directory, name, tool_yaml(name, runner, parameters, extra))


def remote_tool(name: str, target: str, remote_name: str, timeout: float | None = None) -> str:
    """A catalog file for a tool forwarding its calls to `remote_name` on the toolhost at `target`."""
    limit = f"timeout_seconds: {timeout}\n" if timeout else ""
    return (f"name: {name}\ndescription: Forwards to {remote_name} on {target}.\n{limit}"
            f"runner: {{type: remote, target: '{target}', tool: {remote_name}}}\n"
            "input_schema: {type: object}\n")


def versioned_tool(version: int, module: str = "toolhost_server.tools.samples") -> str:
    """A catalog file for `versioned`, whose answer marks which catalog served the call: "Hello, v<version>."."""
    return ("name: versioned\ndescription: Answers with the catalog version.\n"
            f"runner: {{type: python, entrypoint: '{module}:greet'}}\n"
            f"parameters: [{{name: name, type: string, default: v{version}}}]\n")


def make_configmap(root: Path, version: int, files: dict[str, str]) -> None:
    """Lay out files the way the kubelet does: ..<timestamp>/ holds them, ..data points at it, and each
    visible name is a symlink through ..data. Updates swap ..data atomically with a rename."""
    data_dir = root / f"..2026_11_22_00_00_0{version}.000000001"
    data_dir.mkdir(parents=True)
    for name, text in files.items():
        (data_dir / name).write_text(text)
    tmp_link = root / "..data_tmp"
    tmp_link.symlink_to(data_dir.name)
    os.replace(tmp_link, root / "..data")
    for name in files:
        visible = root / name
        if not visible.is_symlink():
            visible.symlink_to(f"..data/{name}")
