"""The in-process runner: calls a Tool subclass or a plain function named by `module:attribute`."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from ..model import ToolSpec
from ..tools.base import Tool, ToolContext, ToolOutput, ToolRaisedFailure
from .base import Invocation, Runner, RunnerConfigError, RunnerSettings, RunOutcome, ToolFailure

logger = logging.getLogger("toolhost.runners.python")


def resolve_entrypoint(entrypoint: str) -> Any:
    """The object `module.path:attribute` names, or RunnerConfigError saying what is missing."""
    module_name, sep, attribute = entrypoint.partition(":")
    if not sep or not module_name or not attribute:
        raise RunnerConfigError(f"entrypoint {entrypoint!r} must look like 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise RunnerConfigError(f"entrypoint module {module_name!r} cannot be imported: {exc}") from exc
    target: Any = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise RunnerConfigError(f"module {module_name!r} has no attribute {attribute!r}") from None
    return target


class PythonRunner(Runner):
    """Runs a Python callable in the server's process.

    A sync callable runs in a worker thread so it cannot stall the event loop. A thread cannot be killed: on
    timeout the call returns TIMEOUT at once, but the thread runs on until the function returns.
    """

    kind = "python"

    def __init__(self, call: Callable[[Mapping[str, Any], ToolContext], Any], is_async: bool) -> None:
        self._call = call
        self._is_async = is_async

    @classmethod
    def from_config(cls, config: Mapping[str, Any], tool: ToolSpec, settings: RunnerSettings) -> PythonRunner:
        entrypoint = config.get("entrypoint")
        if not isinstance(entrypoint, str):
            raise RunnerConfigError("a python runner needs `entrypoint: package.module:function`")
        target = resolve_entrypoint(entrypoint)
        if isinstance(target, type) and issubclass(target, Tool):
            instance = target()
            return cls(instance.run, inspect.iscoroutinefunction(instance.run))
        if not callable(target):
            raise RunnerConfigError(f"entrypoint {entrypoint!r} is not callable")

        def call_with_keywords(arguments: Mapping[str, Any], context: ToolContext) -> Any:
            return target(**arguments)

        if inspect.iscoroutinefunction(target):

            async def acall_with_keywords(arguments: Mapping[str, Any], context: ToolContext) -> Any:
                return await target(**arguments)

            return cls(acall_with_keywords, True)
        return cls(call_with_keywords, False)

    async def run(self, invocation: Invocation) -> RunOutcome:
        context = ToolContext(
            call_id=invocation.call_id,
            tool_name=invocation.tool.name,
            timeout_seconds=invocation.timeout_seconds,
            logger=logging.getLogger(f"toolhost.tool.{invocation.tool.name}"),
        )
        arguments = dict(invocation.arguments)
        try:
            if self._is_async:
                result = await self._call(arguments, context)
            else:
                result = await asyncio.to_thread(self._call, arguments, context)
        except ToolRaisedFailure as exc:
            return RunOutcome(failure=ToolFailure(exc.code, exc.message))
        except Exception as exc:  # a tool's own bug is its failure, reported to the caller, not a server crash
            logger.info("tool %s raised %s", invocation.tool.name, type(exc).__name__, exc_info=True)
            return RunOutcome(failure=ToolFailure("TOOL_EXCEPTION", f"{type(exc).__name__}: {exc}"))
        return _outcome_of(result)


def _outcome_of(result: Any) -> RunOutcome:
    if isinstance(result, ToolOutput):
        return RunOutcome(output=result.text, structured=result.structured)
    if isinstance(result, str):
        return RunOutcome(output=result)
    if result is None:
        return RunOutcome()
    try:
        text = json.dumps(result, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        return RunOutcome(failure=ToolFailure("INVALID_OUTPUT", f"the tool returned a value that is not JSON: {exc}"))
    return RunOutcome(output=text, structured=json.loads(text))
