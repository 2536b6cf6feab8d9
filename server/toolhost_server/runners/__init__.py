"""Runners carry out tool calls. Each module here defines Runner subclasses; they are found by their `kind`."""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Mapping

from ..model import ToolSpec
from .base import Invocation, Runner, RunnerConfigError, RunnerSettings, RunOutcome, ToolFailure

__all__ = [
    "Invocation",
    "RunOutcome",
    "Runner",
    "RunnerConfigError",
    "RunnerSettings",
    "ToolFailure",
    "build_runner",
    "runner_kinds",
]


@functools.cache
def runner_kinds() -> Mapping[str, type[Runner]]:
    """Every Runner subclass defined in this package, by the `runner.type` it implements."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    kinds: dict[str, type[Runner]] = {}
    pending = list(Runner.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if "kind" in cls.__dict__:
            kinds[cls.kind] = cls
    return kinds


def build_runner(tool: ToolSpec, settings: RunnerSettings) -> Runner:
    """The runner `tool.runner` describes, or RunnerConfigError."""
    config = tool.runner
    kind = config.get("type")
    if kind == "pipeline":
        if not settings.pipeline_target:
            raise RunnerConfigError(
                "source: pipeline needs the pipeline toolhost's address: set TOOLHOST_PIPELINE_TARGET "
                "(or --pipeline-target), or give the tool a `runner:`")
        config = {"type": "remote", "target": settings.pipeline_target, "tool": config.get("tool", tool.name)}
        kind = "remote"
    cls = runner_kinds().get(str(kind))
    if cls is None:
        known = ", ".join(sorted(runner_kinds()))
        raise RunnerConfigError(f"unknown runner type {kind!r}; use one of: {known}")
    return cls.from_config(config, tool, settings)
