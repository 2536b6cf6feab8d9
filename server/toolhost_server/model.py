"""The domain model: what a tool is, independent of where it was defined or how it runs."""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final


class ToolSource(enum.Enum):
    """Where a definition came from (mirrors toolhost.v1.ToolSource)."""

    BUILTIN = "builtin"
    CATALOG = "catalog"
    USER = "user"
    REMOTE = "remote"


class _NoDefault:
    """Marks a parameter without a default; distinct from a default of None (JSON null)."""

    _instance: _NoDefault | None = None

    def __new__(cls) -> _NoDefault:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Final = _NoDefault()

PARAMETER_TYPES: Final = frozenset({"string", "integer", "number", "boolean", "array", "object"})


@dataclass(frozen=True, slots=True)
class Parameter:
    """One named argument of a tool.

    `schema` holds further JSON Schema keywords for the argument (minimum, maximum, pattern, items, ...).
    `allow_leading_dash` lets a process tool receive a value starting with "-", which is refused by default
    because a program would read it as an option.
    """

    name: str
    type: str
    description: str = ""
    required: bool = False
    default: Any = NO_DEFAULT
    enum: tuple[Any, ...] = ()
    schema: Mapping[str, Any] = field(default_factory=dict)
    allow_leading_dash: bool = False

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT


@dataclass(frozen=True, slots=True)
class ExampleExpectation:
    """What `toolhost check` expects of a sample call; every part must hold. `structured_subset` is a value the
    structured output must contain (NO_DEFAULT: nothing asked of it): an object's keys with matching values,
    recursively, an array's items in order, any other value equal."""

    success: bool = True
    output_contains: str = ""
    structured_subset: Any = NO_DEFAULT


@dataclass(frozen=True, slots=True)
class Example:
    """A sample call: what it shows and its arguments object; what `toolhost check` expects of it, or that it
    leaves it out (`skip_check`: one that needs a host, file or credential a checking machine lacks)."""

    description: str
    arguments: Mapping[str, Any]
    expect: ExampleExpectation = ExampleExpectation()
    skip_check: bool = False


@dataclass(frozen=True, slots=True)
class Intent:
    """A phrase a tool answers, for SearchTools: `pattern` must match the whole query, ignoring case; its named
    groups become arguments (typed by the tool's input schema), merged over the constant `arguments`."""

    pattern: str
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Annotations:
    """Behaviour hints in the Model Context Protocol's sense; not enforced."""

    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A complete, validated tool definition. Immutable: a reload builds new specs, never edits these.

    `runner` is the runner configuration (a mapping with at least "type"); the registry turns it into a Runner.
    `input_schema` is always set: derived from `parameters` when the definition gave none.

    Slotted, its two hashes computed on first use into slots of their own: a catalog holds thousands of specs,
    and an instance dictionary (grown by a cached_property) cost over a kilobyte each.
    """

    name: str
    description: str
    input_schema: Mapping[str, Any]
    runner: Mapping[str, Any]
    source: ToolSource
    origin: str
    display_name: str = ""
    category: str = "general"
    platform: str = "cross-platform"
    version: str = "1.0.0"
    parameters: tuple[Parameter, ...] = ()
    output_schema: Mapping[str, Any] | None = None
    timeout_seconds: float | None = None
    requires_admin: bool = False
    # How many calls of this tool may run at once; None: only the server-wide limit applies.
    max_concurrency: int | None = None
    # Bytes of output kept per stream; None: the server's max_output_bytes.
    max_output_bytes: int | None = None
    tags: tuple[str, ...] = ()
    examples: tuple[Example, ...] = ()
    annotations: Annotations = Annotations()
    credentials: tuple[str, ...] = ()
    intents: tuple[Intent, ...] = ()
    # Another name of the tool `alias_of` (drowcoder's `load` for `read`): a registry entry of its own over the
    # same code, with its target's category and rights; a grant of the target's name grants the alias too.
    alias_of: str = ""
    # Granted only by its exact name (or its target's, for an alias), never by a glob or a category: `bash`.
    # Callers without authentication (a loopback server) and client certificates keep every tool.
    grant_by_name_only: bool = False
    # Longer instructions for an agent than the description (PocketDev's system_prompt), written into the
    # instructions block (instructions.py); user tools have one, other tools may leave it empty.
    system_prompt: str = ""

    _fingerprint: str | None = field(default=None, init=False, repr=False, compare=False)
    _content_hash: str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def fingerprint(self) -> str:
        """Hash of what a model sees of the tool: name, description and schemas."""
        value = self._fingerprint
        if value is None:
            value = _sha256_of([self.name, self.description, self.input_schema, self.output_schema])
            object.__setattr__(self, "_fingerprint", value)
        return value

    @property
    def content_hash(self) -> str:
        """Hash of the whole definition, origin excluded: equal hashes mean the same tool."""
        value = self._content_hash
        if value is None:
            value = _sha256_of(
                [
                    self.fingerprint,
                    self.display_name,
                    self.category,
                    self.platform,
                    self.version,
                    self.source.value,
                    [_parameter_key(p) for p in self.parameters],
                    self.runner,
                    self.timeout_seconds,
                    self.requires_admin,
                    self.max_concurrency,
                    self.max_output_bytes,
                    self.tags,
                    [_example_key(e) for e in self.examples],
                    [
                        self.annotations.read_only,
                        self.annotations.destructive,
                        self.annotations.idempotent,
                        self.annotations.open_world,
                    ],
                    self.credentials,
                    [[i.pattern, dict(i.arguments)] for i in self.intents],
                    self.alias_of,
                    self.grant_by_name_only,
                    self.system_prompt,
                ]
            )
            object.__setattr__(self, "_content_hash", value)
        return value


def _example_key(e: Example) -> list[Any]:
    # All of it: a reload that changed only an example's `expect:` must still serve the new one.
    subset = None if e.expect.structured_subset is NO_DEFAULT else ["subset", e.expect.structured_subset]
    return [e.description, e.arguments, e.expect.success, e.expect.output_contains, subset, e.skip_check]


def _parameter_key(p: Parameter) -> list[Any]:
    default = None if p.default is NO_DEFAULT else ["default", p.default]
    return [p.name, p.type, p.description, p.required, default, p.enum, p.schema, p.allow_leading_dash]


def _sha256_of(value: Any) -> str:
    encoded = json.dumps(value, sort_keys=True, separators=(",", ":"), default=list).encode()
    return hashlib.sha256(encoded).hexdigest()
