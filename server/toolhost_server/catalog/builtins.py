"""Finds the built-in tools: Tool subclasses in `toolhost_server.tools`, in packages registered under the
`toolhost.tools` entry-point group, and the definitions packaged in `toolhost_server/tools/definitions/`."""

from __future__ import annotations

import importlib
import inspect
import logging
import pkgutil
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from .. import tools as builtin_tools_package
from ..model import ToolSource, ToolSpec
from ..schema import derive_input_schema
from ..tools.base import NO_SERVICES, Tool, ToolServices
from .definition import NAME_PATTERN, DefinitionError, check_defaults, check_examples, check_intents, parse_definition

logger = logging.getLogger("toolhost.catalog")

ENTRY_POINT_GROUP = "toolhost.tools"
PACKAGED_DEFINITIONS = Path(builtin_tools_package.__file__).parent / "definitions"


def spec_from_tool_class(cls: type[Tool]) -> ToolSpec:
    """The ToolSpec a Tool subclass declares; DefinitionError when its declaration is incomplete."""
    name = getattr(cls, "name", None)
    description = getattr(cls, "description", None)
    where = f"{cls.__module__}.{cls.__qualname__}"
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise DefinitionError(f"{where} needs a `name` of letters, digits, '_', '.' or '-'")
    if not isinstance(description, str) or not description.strip():
        raise DefinitionError(f"{where} needs a `description`")
    check_defaults(cls.parameters)
    input_schema = derive_input_schema(cls.parameters)
    check_examples(cls.examples, input_schema)
    return ToolSpec(
        name=name,
        description=inspect.cleandoc(description),
        input_schema=input_schema,
        runner={"type": "python", "entrypoint": f"{cls.__module__}:{cls.__qualname__}"},
        source=ToolSource.BUILTIN,
        origin=f"python:{where}",
        display_name=cls.display_name or name.replace("_", " ").title(),
        category=cls.category,
        platform=cls.platform,
        version=cls.version,
        parameters=cls.parameters,
        output_schema=cls.output_schema,
        timeout_seconds=cls.timeout_seconds,
        requires_admin=cls.requires_admin,
        max_concurrency=cls.max_concurrency,
        max_output_bytes=cls.max_output_bytes,
        tags=cls.tags,
        examples=cls.examples,
        annotations=cls.annotations,
        credentials=cls.credentials,
        intents=check_intents(list(cls.intents), input_schema),
        alias_of=cls.alias_of,
        grant_by_name_only=cls.grant_by_name_only,
    )


def discover_builtin_definitions(services: ToolServices = NO_SERVICES) -> Iterator[tuple[str, Any]]:
    """Yield (origin, ToolSpec or exception) for every built-in definition this server serves, in a stable
    order: a Tool class whose `unserved_because(services)` gives a reason is left out (unserved_builtins)."""
    for module in _builtin_modules():
        for cls in _tool_classes(module):
            if not cls.unserved_because(services):
                yield _spec_or_error(f"python:{cls.__module__}.{cls.__qualname__}", cls)
    for entry_point in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        origin = f"entry point {entry_point.name} = {entry_point.value}"
        try:
            loaded = entry_point.load()
        except Exception as exc:  # a broken third-party pack must not stop the server
            yield origin, DefinitionError(f"{origin} cannot be loaded: {exc}")
            continue
        if isinstance(loaded, ModuleType):
            for cls in _tool_classes(loaded):
                yield _spec_or_error(origin, cls)
        elif isinstance(loaded, type) and issubclass(loaded, Tool):
            yield _spec_or_error(origin, loaded)
        else:
            yield origin, DefinitionError(f"{origin} is neither a module nor a Tool subclass")
    for path in sorted(PACKAGED_DEFINITIONS.glob("*.yaml")):
        try:
            data = yaml.load(path.read_text("utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
            yield str(path), parse_definition(data, f"builtin:{path.name}", ToolSource.BUILTIN)
        except (OSError, yaml.YAMLError, DefinitionError) as exc:
            yield str(path), exc


def unserved_builtins(services: ToolServices) -> dict[str, list[str]]:
    """The built-in tools this server leaves out, by reason: {"no workspace is configured": ["edit", ...]}."""
    reasons: dict[str, list[str]] = {}
    for module in _builtin_modules():
        for cls in _tool_classes(module):
            reason = cls.unserved_because(services)
            if reason:
                reasons.setdefault(reason, []).append(cls.name)
    return {reason: sorted(names) for reason, names in reasons.items()}


def _spec_or_error(origin: str, cls: type[Tool]) -> tuple[str, Any]:
    try:
        return origin, spec_from_tool_class(cls)
    except DefinitionError as exc:
        return origin, exc


def _builtin_modules() -> Iterator[ModuleType]:
    for info in pkgutil.iter_modules(builtin_tools_package.__path__, builtin_tools_package.__name__ + "."):
        if info.name.rsplit(".", 1)[-1] != "base":
            yield importlib.import_module(info.name)


def _tool_classes(module: ModuleType) -> list[type[Tool]]:
    return [
        obj for _, obj in sorted(vars(module).items())
        if isinstance(obj, type) and issubclass(obj, Tool) and obj.__module__ == module.__name__
        and not inspect.isabstract(obj)
    ]
