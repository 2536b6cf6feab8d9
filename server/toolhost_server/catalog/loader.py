"""Assembles the full tool set: built-ins first, then each catalog directory in order, later names winning."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model import ToolSource, ToolSpec
from ..registry import CatalogProblem, RegisteredTool
from ..runners import RunnerConfigError, RunnerSettings, build_runner
from ..runners.python import resolve_entrypoint
from ..schema import ArgumentValidator
from ..tools.base import NO_SERVICES, Tool
from .builtins import discover_builtin_definitions
from .definition import DefinitionError, parse_definition
from .directory_listing import CatalogDirectoryError
from .entrypoints import EntrypointPolicy, EntrypointRefusedError
from .inline_code import inline_code_warnings
from .yaml_files import YamlCatalogReader

logger = logging.getLogger("toolhost.registry")


@dataclass(frozen=True, slots=True)
class LoadResult:
    """The outcome of one load. `tools` is None when a catalog directory failed and nothing may change."""

    tools: dict[str, RegisteredTool] | None
    problems: list[CatalogProblem]
    missing_required: list[str]
    catalog_count: int = 0  # how many of `tools` come from catalog files


class ToolLoader:
    """Builds the tool set from built-ins and catalog directories. Not thread-safe: one load at a time.

    `entrypoints` limits the Python entrypoints catalog files may name (None: EntrypointPolicy.default()); the
    built-in tools, found in installed code, are not catalog files and need no permission."""

    def __init__(
        self,
        catalog_dirs: Sequence[Path],
        required_tools: Sequence[str],
        runner_settings: RunnerSettings,
        entrypoints: EntrypointPolicy | None = None,
    ) -> None:
        self.catalog_dirs = list(catalog_dirs)
        self.required_tools = list(required_tools)
        self._runner_settings = runner_settings
        self.entrypoints = entrypoints or EntrypointPolicy.default()
        logger.info("catalog files may name Python entrypoints in: %s", self.entrypoints.describe())
        self._builtins: dict[str, RegisteredTool] = {}
        self._builtin_problems: list[CatalogProblem] = []
        for origin, found in discover_builtin_definitions(runner_settings.tool_services or NO_SERVICES):
            if isinstance(found, ToolSpec):
                try:
                    self._builtins[found.name] = self.compile(found)
                    continue
                except Exception as exc:  # reported like a bad catalog file; the others still load
                    found = exc
            problem = CatalogProblem(origin, 0, str(getattr(found, "reason", found)))
            logger.error("built-in tool at %s cannot be served: %s", origin, problem.reason)
            self._builtin_problems.append(problem)
        self._reader = YamlCatalogReader(self._compile_document)

    def load(self) -> LoadResult:
        """Read everything; on a directory failure return tools=None so the serving snapshot stays."""
        try:
            read = self._reader.read(self.catalog_dirs)
        except CatalogDirectoryError as exc:
            return LoadResult(None, [*self._builtin_problems, exc.problem], [])
        tools: dict[str, RegisteredTool] = dict(self._builtins)
        catalog = {tool.spec.name: tool for tool in read.tools}
        if len(catalog) < len(read.tools) or not catalog.keys().isdisjoint(self._builtins):
            # Some definitions replace others: one by one, so that each replacement is logged in order.
            for tool in read.tools:
                previous = tools.get(tool.spec.name)
                if previous is not None:
                    logger.warning("tool %r from %s replaces the one from %s (a later definition wins)",
                                   tool.spec.name, tool.spec.origin, previous.spec.origin)
                tools[tool.spec.name] = tool
        else:
            tools.update(catalog)  # the same order and result as the loop above, without a loop in Python
        missing = [name for name in self.required_tools if name not in tools]
        builtins_served = sum(1 for name, builtin in self._builtins.items() if tools.get(name) is builtin)
        return LoadResult(tools, [*self._builtin_problems, *read.problems], missing, len(tools) - builtins_served)

    def compile(self, spec: ToolSpec) -> RegisteredTool:
        """A servable tool from a spec: the runner built and the argument validator compiled."""
        if spec.runner.get("type") == "builtin":
            spec = self._with_builtin_runner(spec)
        elif _names_a_tool_granted_by_name_only(spec):
            # A catalog file serving a Tool class under another name (BashTool as `sh`) must not hand it to
            # whoever a `*` or category grant covers: the name-only grant comes with the class.
            spec = dataclasses.replace(spec, grant_by_name_only=True)
        return RegisteredTool(spec, build_runner(spec, self._runner_settings), ArgumentValidator(spec.input_schema))

    def _compile_document(self, data: Any, origin: str) -> RegisteredTool:
        spec = parse_definition(data, origin, ToolSource.CATALOG)
        try:
            if spec.runner.get("type") == "python" and isinstance(spec.runner.get("entrypoint"), str):
                # Before the runner imports anything: the file may name only what the policy allows.
                self.entrypoints.check(spec.runner["entrypoint"])
            tool = self.compile(spec)
        except EntrypointRefusedError as exc:
            raise DefinitionError(str(exc), ("runner", "entrypoint")) from None
        except RunnerConfigError as exc:
            # Point at the line that configured the runner.
            raise DefinitionError(str(exc), "runner" if "runner" in data else "source") from exc
        # Logged when the file is read (at start and after each change), not on every reload.
        for warning in inline_code_warnings(spec.runner):
            logger.warning("catalog file %s, tool %r: %s", origin, spec.name, warning.message)
        return tool

    def _with_builtin_runner(self, spec: ToolSpec) -> ToolSpec:
        implementation = str(spec.runner.get("implementation"))
        builtin = self._builtins.get(implementation)
        if builtin is None:
            known = ", ".join(sorted(self._builtins))
            raise DefinitionError(
                f"source: local without `runner:` must name a built-in tool, and there is no built-in "
                f"{implementation!r}; add a `runner:` or set `implementation:` to one of: {known}",
                "implementation" if implementation != spec.name else "source")
        # The built-in's name-only grant comes with its runner, whatever name the file gives it.
        return dataclasses.replace(spec, runner=builtin.spec.runner,
                                   grant_by_name_only=spec.grant_by_name_only or builtin.spec.grant_by_name_only)


def _names_a_tool_granted_by_name_only(spec: ToolSpec) -> bool:
    """Whether `spec` runs, through the python runner, a Tool class marked grant_by_name_only. The entrypoint
    has passed the catalog's policy by now (or is a built-in's); one that cannot be resolved is left for the
    runner to report."""
    entrypoint = spec.runner.get("entrypoint")
    if spec.runner.get("type") != "python" or not isinstance(entrypoint, str):
        return False
    try:
        target = resolve_entrypoint(entrypoint)
    except RunnerConfigError:
        return False
    return isinstance(target, type) and issubclass(target, Tool) and target.grant_by_name_only
