"""The in-process runner: calls a Tool subclass or a plain function named by `module:attribute`."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from ..daemon_threads import run_in_daemon_thread
from ..errors import InvalidArgumentsError, OverCapacityError, ToolhostError
from ..model import ToolSpec
from ..tools.base import NO_SERVICES, Tool, ToolContext, ToolOutput, ToolRaisedFailure, ToolServices
from .base import Invocation, Runner, RunnerConfigError, RunnerSettings, RunOutcome, ToolFailure

logger = logging.getLogger("toolhost.runners.python")


def split_entrypoint(entrypoint: str) -> tuple[str, str]:
    """The module name and the attribute path of `module.path:attribute`, or RunnerConfigError."""
    module_name, sep, attribute = entrypoint.partition(":")
    if not sep or not module_name or not attribute:
        raise RunnerConfigError(f"entrypoint {entrypoint!r} must look like 'package.module:function'")
    return module_name, attribute


def resolve_entrypoint(entrypoint: str) -> Any:
    """The object `module.path:attribute` names, or RunnerConfigError saying what is missing. It imports the
    module, running its code: which modules a catalog file may name is for catalog.entrypoints to decide first."""
    module_name, attribute = split_entrypoint(entrypoint)
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

    def __init__(
        self, call: Callable[[Mapping[str, Any], ToolContext], Any], is_async: bool, slots: threading.Semaphore,
        max_output_bytes: int, services: ToolServices = NO_SERVICES,
    ) -> None:
        self._call = call
        self._is_async = is_async
        self._slots = slots
        self._max_output_bytes = max_output_bytes
        self._services = services

    async def _run_in_thread(self, invocation: Invocation, arguments: dict[str, Any], context: ToolContext) -> Any:
        # A thread holds its slot until the function returns, even after the call timed out and was answered.
        if not self._slots.acquire(blocking=False):
            raise OverCapacityError(
                f"every thread for blocking tools is busy (some may be stuck past their timeout); retry "
                f"{invocation.tool.name!r} later")

        def call_and_release() -> Any:
            try:
                return self._call(arguments, context)
            finally:
                self._slots.release()

        return await run_in_daemon_thread(call_and_release, name=f"tool-{invocation.tool.name}")

    @classmethod
    def from_config(cls, config: Mapping[str, Any], tool: ToolSpec, settings: RunnerSettings) -> PythonRunner:
        entrypoint = config.get("entrypoint")
        if not isinstance(entrypoint, str):
            raise RunnerConfigError("a python runner needs `entrypoint: package.module:function`")
        target = resolve_entrypoint(entrypoint)
        limit = tool.max_output_bytes or settings.max_output_bytes
        services = settings.tool_services or NO_SERVICES
        if isinstance(target, type) and issubclass(target, Tool):
            instance = target()
            return cls(instance.run, inspect.iscoroutinefunction(instance.run), settings.sync_tool_slots, limit,
                       services)
        if not callable(target):
            raise RunnerConfigError(f"entrypoint {entrypoint!r} is not callable")
        # A function gets its arguments as keywords, and the credentials its tool declares as `credentials=`.
        wants_credentials = bool(tool.credentials)
        if wants_credentials:
            _check_takes_credentials(entrypoint, target)

        def keywords(arguments: Mapping[str, Any], context: ToolContext) -> Mapping[str, Any]:
            return {**arguments, "credentials": context.credentials} if wants_credentials else arguments

        def call_with_keywords(arguments: Mapping[str, Any], context: ToolContext) -> Any:
            return target(**keywords(arguments, context))

        if inspect.iscoroutinefunction(target):

            async def acall_with_keywords(arguments: Mapping[str, Any], context: ToolContext) -> Any:
                return await target(**keywords(arguments, context))

            return cls(acall_with_keywords, True, settings.sync_tool_slots, limit, services)
        return cls(call_with_keywords, False, settings.sync_tool_slots, limit, services)

    async def run(self, invocation: Invocation) -> RunOutcome:
        context = ToolContext(
            call_id=invocation.call_id,
            tool_name=invocation.tool.name,
            timeout_seconds=invocation.timeout_seconds,
            logger=logging.getLogger(f"toolhost.tool.{invocation.tool.name}"),
            events=invocation.events,
            credentials=invocation.credentials,
            services=self._services,
            authenticated_caller=invocation.caller,
        )
        arguments = dict(invocation.arguments)
        try:
            if self._is_async:
                result = await self._call(arguments, context)
            else:
                result = await self._run_in_thread(invocation, arguments, context)
        except ToolRaisedFailure as exc:
            return _capped(_failed(exc), self._max_output_bytes)
        except InvalidArgumentsError as exc:  # a refused argument the tool found, e.g. a path leaving its workspace
            if exc.tool:
                raise
            raise exc.naming(invocation.tool.name) from None
        except ToolhostError:
            raise  # the server's own refusal (no free thread), not the tool's failure
        except Exception:  # a tool's own bug is its failure, reported to the caller, not a server crash
            # The exception's text may hold anything (paths, hosts, data): it goes to the log, which is redacted,
            # and the caller gets the call id to find it there.
            logger.warning("tool %s raised an exception in call %s", invocation.tool.name, invocation.call_id,
                           exc_info=True)
            return RunOutcome(failure=ToolFailure("TOOL_EXCEPTION", (
                f"tool {invocation.tool.name!r} failed with an unexpected error; the server log has the detail "
                f"under call id {invocation.call_id}")))
        return _capped(_outcome_of(result), self._max_output_bytes)


def _failed(exc: ToolRaisedFailure) -> RunOutcome:
    """The failure a tool raised, with the output it gave along (checked as a result is)."""
    failure = ToolFailure(exc.code, exc.message)
    if exc.output is None:
        return RunOutcome(failure=failure, exit_code=exc.exit_code)
    produced = _outcome_of(exc.output)
    if produced.failure is not None:  # the output is not JSON: the failure stays, the output goes
        return RunOutcome(failure=failure, exit_code=exc.exit_code)
    return dataclasses.replace(produced, failure=failure, exit_code=exc.exit_code)


def _capped(outcome: RunOutcome, limit: int) -> RunOutcome:
    """The text output cut at `limit` bytes like a process's stdout; a structured output that large is refused
    (cut, it would no longer be the value the tool returned). Lone surrogates (what decoding a file name's bytes
    with errors="surrogateescape" leaves) become U+FFFD: a response cannot carry them."""
    if outcome.structured is not None:
        text = json.dumps(outcome.structured, ensure_ascii=False)
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            outcome = dataclasses.replace(outcome, structured=_valid_unicode(outcome.structured))
            size = len(json.dumps(outcome.structured, ensure_ascii=False).encode("utf-8"))
        if size > limit:
            return RunOutcome(failure=ToolFailure("INVALID_OUTPUT", (
                f"the tool returned {size} bytes of structured output, more than its limit of {limit} "
                "(max_output_bytes)")))
    try:
        data = outcome.output.encode("utf-8")
    except UnicodeEncodeError:
        outcome = dataclasses.replace(outcome, output=_valid_unicode(outcome.output))
        data = outcome.output.encode("utf-8")
    if len(data) <= limit:
        return outcome
    # A character cut in two at the limit is dropped, as for a process.
    kept = data[:limit].decode("utf-8", errors="ignore")
    return RunOutcome(output=kept, structured=outcome.structured, failure=outcome.failure, truncated=True,
                      original_size_bytes=len(data), cut_streams=frozenset({"stdout"}),
                      exit_code=outcome.exit_code)


def _valid_unicode(value: Any) -> Any:
    """`value` with every lone surrogate in its strings (object keys included) replaced by U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    if isinstance(value, list):
        return [_valid_unicode(item) for item in value]
    if isinstance(value, dict):
        return {_valid_unicode(key): _valid_unicode(item) for key, item in value.items()}
    return value


def _check_takes_credentials(entrypoint: str, function: Callable[..., Any]) -> None:
    """A function whose tool declares credentials must accept them as the keyword `credentials`."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return  # a builtin without a signature: the call itself will tell
    if not any(p.name == "credentials" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        raise RunnerConfigError(
            f"the tool declares credentials, so {entrypoint} must take a `credentials` keyword parameter "
            "(a ResolvedCredentials: credentials['name']['key'])")


def _outcome_of(result: Any) -> RunOutcome:
    if isinstance(result, ToolOutput):
        if result.structured is None:
            return RunOutcome(output=result.text)
        try:
            structured = json.loads(json.dumps(result.structured, allow_nan=False))
        except (TypeError, ValueError, RecursionError) as exc:
            return RunOutcome(failure=ToolFailure(
                "INVALID_OUTPUT", f"the tool returned structured output that is not JSON: {_why(exc)}"))
        return _checked_depth(RunOutcome(output=result.text, structured=structured))
    if isinstance(result, str):
        return RunOutcome(output=result)
    if result is None:
        return RunOutcome()
    try:
        text = json.dumps(result, sort_keys=True, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        return RunOutcome(failure=ToolFailure(
            "INVALID_OUTPUT", f"the tool returned a value that is not JSON: {_why(exc)}"))
    return _checked_depth(RunOutcome(output=text, structured=json.loads(text)))


# A structured output travels as a google.protobuf.Value, two messages per JSON level, inside the response;
# protobuf refuses more than 100 levels of messages, so a deeper value could not be sent at all.
MAX_STRUCTURED_DEPTH = 32


def _checked_depth(outcome: RunOutcome) -> RunOutcome:
    pending = [(outcome.structured, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict | list):
            if depth > MAX_STRUCTURED_DEPTH:
                return RunOutcome(failure=ToolFailure("INVALID_OUTPUT", (
                    f"the tool returned structured output nested more than {MAX_STRUCTURED_DEPTH} levels deep, "
                    "more than a response can carry")))
            items = value.values() if isinstance(value, dict) else value
            pending.extend((item, depth + 1) for item in items)
    return outcome


def _why(exc: Exception) -> str:
    if isinstance(exc, RecursionError):
        return "it is nested too deep to encode"
    if isinstance(exc, ValueError) and "Out of range float" in str(exc):
        return "it holds NaN or an infinity, which JSON has no value for"
    return str(exc)
