"""Turns one YAML tool definition (the AI Tool Catalog's format plus `runner:`) into a ToolSpec.

Everything a definition can get wrong is reported here with the path to the value it is about (such as
("parameters", 2, "type")), so the caller can point at its line. Unknown keys are errors, with the closest
known key suggested: a typo such as `timeout_second` must not silently fall back to a default.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

import jsonschema_rs

from ..credentials.names import InvalidCredentialError, check_credential_name
from ..intent_patterns import IntentPatternError, compile_intent
from ..model import (
    NO_DEFAULT,
    PARAMETER_TYPES,
    Annotations,
    Example,
    ExampleExpectation,
    Intent,
    Parameter,
    ToolSource,
    ToolSpec,
)
from ..schema import check_schema, compile_validator, derive_input_schema

NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,127}$")

TOP_LEVEL_KEYS = frozenset(
    {
        "name", "display_name", "description", "category", "platform", "version", "source", "parameters",
        "input_schema", "output_schema", "timeout_seconds", "requires_admin", "tags", "examples", "runner",
        "credentials", "intents", "annotations", "implementation", "max_concurrency",
        "max_output_bytes",
    }
)
PARAMETER_KEYS = frozenset(
    {
        "name", "type", "description", "required", "default", "enum", "allow_leading_dash",
        "minimum", "maximum", "exclusive_minimum", "exclusive_maximum", "min_length", "max_length", "pattern",
        "format", "items", "min_items", "max_items",
    }
)
# YAML spells JSON Schema keywords in snake_case like the rest of the file.
_SCHEMA_KEYWORDS = {
    "minimum": "minimum", "maximum": "maximum", "exclusive_minimum": "exclusiveMinimum",
    "exclusive_maximum": "exclusiveMaximum", "min_length": "minLength", "max_length": "maxLength",
    "pattern": "pattern", "format": "format", "items": "items", "min_items": "minItems", "max_items": "maxItems",
}
ANNOTATION_KEYS = ("read_only", "destructive", "idempotent", "open_world")
INTENT_KEYS = frozenset({"pattern", "arguments"})
# An example: the sample call, and what `toolhost check` asks of it (`check: skip` leaves it out).
EXAMPLE_KEYS = frozenset({"description", "parameters", "arguments", "expect", "check"})
EXPECT_KEYS = frozenset({"success", "output_contains", "structured_subset"})


DocumentPath: TypeAlias = tuple[str | int, ...]
"""Where in a document: mapping keys and list indexes from the top, e.g. ("parameters", 2, "type")."""


class DefinitionError(Exception):
    """A definition is unusable. `path` leads to the value the problem is at (a top-level key may be given as
    a plain string), () when it is about the whole document; `at_key` points at the key itself rather than its
    value, as for an unknown key. The path may end where the document does not go, as for a missing key."""

    def __init__(self, reason: str, path: DocumentPath | str = (), *, at_key: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path: DocumentPath = (path,) if isinstance(path, str) and path else tuple(path)
        self.at_key = at_key


def parse_definition(data: Any, origin: str, source: ToolSource) -> ToolSpec:
    """A ToolSpec from a parsed YAML document. `runner` stays empty for `source: local` without `runner:`;
    the catalog resolves it to the built-in implementation the definition names."""
    if not isinstance(data, Mapping):
        raise DefinitionError("a tool definition must be a mapping of keys such as name, description, parameters")
    _reject_unknown(data, TOP_LEVEL_KEYS, "", ())
    name = _required_str(data, "name")
    if not NAME_PATTERN.match(name):
        raise DefinitionError(
            f"name {name!r} must start with a letter and hold only letters, digits, '_', '.' or '-' "
            "(at most 128 characters)", "name")
    description = _required_str(data, "description")

    parameters = _parameters(data.get("parameters"))
    input_schema = data.get("input_schema")
    if input_schema is not None:
        if parameters:
            raise DefinitionError("give either `parameters` or `input_schema`, not both", "input_schema")
        input_schema = _schema(input_schema, "input_schema")
        if input_schema.get("type") != "object":
            raise DefinitionError("input_schema must describe an object (`type: object`)", "input_schema")
    else:
        input_schema = derive_input_schema(parameters)
        check_defaults(parameters, ("parameters",))
    output_schema = data.get("output_schema")
    if output_schema is not None:
        output_schema = _schema(output_schema, "output_schema")

    runner = _runner(data, name)
    return ToolSpec(
        name=name,
        description=description,
        input_schema=input_schema,
        runner=runner,
        source=source,
        origin=origin,
        display_name=_optional_str(data, "display_name") or name.replace("_", " ").title(),
        category=_optional_str(data, "category") or "general",
        platform=_optional_str(data, "platform") or "cross-platform",
        version=_version(data.get("version")),
        parameters=parameters,
        output_schema=output_schema,
        timeout_seconds=_timeout(data.get("timeout_seconds")),
        requires_admin=_bool(data, "requires_admin"),
        max_concurrency=_whole_limit(data, "max_concurrency", "calls"),
        max_output_bytes=_whole_limit(data, "max_output_bytes", "bytes"),
        tags=_str_list(data, "tags"),
        examples=_examples(data.get("examples"), input_schema),
        annotations=_annotations(data.get("annotations")),
        credentials=_credential_names(data),
        intents=check_intents(data.get("intents"), input_schema),
    )


def _runner(data: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    source = data.get("source", "local")
    runner = data.get("runner")
    if source not in ("local", "pipeline"):
        raise DefinitionError(f"source must be 'local' or 'pipeline', not {source!r}", "source")
    if runner is not None:
        if not isinstance(runner, Mapping) or not isinstance(runner.get("type"), str):
            raise DefinitionError("runner must be a mapping with a `type` (python, process, script or remote)",
                                  ("runner", "type") if isinstance(runner, Mapping) else ("runner",))
        if source == "pipeline" and runner.get("type") != "remote":
            raise DefinitionError("source: pipeline runs on the pipeline toolhost; drop `runner:` or use "
                                  "`source: local`", ("runner", "type"))
        return dict(runner)
    if source == "pipeline":
        return {"type": "pipeline", "tool": name}
    implementation = data.get("implementation", name)
    if not isinstance(implementation, str):
        raise DefinitionError("implementation must be the name of a built-in tool", "implementation")
    return {"type": "builtin", "implementation": implementation}


def _reject_unknown(data: Mapping[str, Any], known: frozenset[str], where: str, path: DocumentPath) -> None:
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(sorted(known))}"
            # Quoted only when it looks like a key someone meant to write: a file that is no tool definition
            # at all (a password file's lines parse as keys) must not have its content copied into the report.
            shown = repr(key) if isinstance(key, str) and _KEY_LIKE.fullmatch(key) else "(not shown: no identifier)"
            raise DefinitionError(f"unknown key {shown}{where}{hint}", (*path, str(key)), at_key=True)


_KEY_LIKE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")


def _required_str(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise DefinitionError(f"`{key}` is required and must be a non-empty string", key)
    return value.strip()


def _optional_str(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DefinitionError(f"`{key}` must be a string", key)
    return value


def _bool(data: Mapping[str, Any], key: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise DefinitionError(f"`{key}` must be true or false", key)
    return value


def _version(value: Any) -> str:
    if value is None:
        return "1.0.0"
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)
    raise DefinitionError("version must be a string such as '1.0.0'", "version")


def _timeout(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:  # NaN fails too
        raise DefinitionError("timeout_seconds must be a positive, finite number of seconds", "timeout_seconds")
    return float(value)


def _whole_limit(data: Mapping[str, Any], key: str, unit: str) -> int | None:
    """An optional limit that must be a whole number of `unit`, at least 1."""
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DefinitionError(f"{key} must be a whole number of {unit}, at least 1", key)
    return value


def _str_list(data: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = data.get(key)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise DefinitionError(f"`{key}` must be a list of non-empty strings", key)
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item:
            raise DefinitionError(f"`{key}` must be a list of non-empty strings", (key, index))
    return tuple(value)


def _credential_names(data: Mapping[str, Any]) -> tuple[str, ...]:
    names = _str_list(data, "credentials")
    for index, name in enumerate(names):
        try:
            check_credential_name(name)
        except InvalidCredentialError as exc:
            raise DefinitionError(str(exc), ("credentials", index)) from None
    return names


def _schema(value: Any, key: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise DefinitionError(f"`{key}` must be a JSON Schema object", key)
    problem = check_schema(value)
    if problem:
        raise DefinitionError(f"`{key}` is {problem}", key)
    return dict(value)


def _parameters(value: Any) -> tuple[Parameter, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise DefinitionError("parameters must be a list of mappings with name, type, description", "parameters")
    seen: set[str] = set()
    result = []
    for index, item in enumerate(value):
        at: DocumentPath = ("parameters", index)
        if not isinstance(item, Mapping):
            raise DefinitionError(f"parameter #{index + 1} must be a mapping", at)
        _reject_unknown(item, PARAMETER_KEYS, f" in parameter #{index + 1}", at)
        pname = item.get("name")
        if not isinstance(pname, str) or not pname:
            raise DefinitionError(f"parameter #{index + 1} needs a `name`", (*at, "name"))
        if pname in seen:
            raise DefinitionError(f"parameter {pname!r} is declared twice", (*at, "name"))
        seen.add(pname)
        ptype = item.get("type", "string")
        if not isinstance(ptype, str) or ptype not in PARAMETER_TYPES:  # a list or mapping is unhashable
            raise DefinitionError(
                f"parameter {pname!r} has type {ptype!r}; use one of {', '.join(sorted(PARAMETER_TYPES))}",
                (*at, "type"))
        enum = item.get("enum", [])
        if not isinstance(enum, list):
            raise DefinitionError(f"parameter {pname!r}: enum must be a list", (*at, "enum"))
        for flag in ("required", "allow_leading_dash"):
            if not isinstance(item.get(flag, False), bool):
                raise DefinitionError(f"parameter {pname!r}: {flag} must be true or false", (*at, flag))
        description = item.get("description", "")
        if not isinstance(description, str):
            raise DefinitionError(f"parameter {pname!r}: description must be a string", (*at, "description"))
        result.append(
            Parameter(
                name=pname,
                type=ptype,
                description=description,
                required=bool(item.get("required", False)),
                default=item.get("default", NO_DEFAULT),
                enum=tuple(enum),
                schema={_SCHEMA_KEYWORDS[k]: v for k, v in item.items() if k in _SCHEMA_KEYWORDS},
                allow_leading_dash=bool(item.get("allow_leading_dash", False)),
            )
        )
        # Checked here, where the problem can point at the parameter's line, not when the tool's validator is
        # compiled; the validator's own regex engine judges `pattern`.
        problem = check_schema(derive_input_schema((result[-1],)))
        if problem is not None:
            raise DefinitionError(f"parameter {pname!r} is {problem}", at)
    return tuple(result)


def check_defaults(parameters: tuple[Parameter, ...], path: DocumentPath = ()) -> None:
    """A default must itself be a valid value, or every call that relies on it would fail. `path` is where
    the list of parameters is in the document."""
    for index, p in enumerate(parameters):
        if not p.has_default:
            continue
        single = derive_input_schema((Parameter(p.name, p.type, enum=p.enum, schema=p.schema),))
        validator = jsonschema_rs.validator_for(single)
        error = next(iter(validator.iter_errors({p.name: p.default})), None)
        if error is not None:
            # instance_path starts with the parameter's own name, then leads into the default's value.
            raise DefinitionError(f"parameter {p.name!r}: default {p.default!r} is invalid: {error.message}",
                                  (*path, index, "default", *error.instance_path[1:]))


def _examples(value: Any, input_schema: Mapping[str, Any]) -> tuple[Example, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise DefinitionError("examples must be a list of {description, parameters}", "examples")
    result = []
    arguments_paths: list[DocumentPath] = []
    for index, item in enumerate(value):
        at: DocumentPath = ("examples", index)
        if not isinstance(item, Mapping):
            raise DefinitionError(f"example #{index + 1} must be a mapping", at)
        _reject_unknown(item, EXAMPLE_KEYS, f" in example #{index + 1}", at)
        if "arguments" in item and "parameters" in item:
            raise DefinitionError(f"example #{index + 1}: give either `parameters` or `arguments`, not both",
                                  (*at, "arguments"), at_key=True)
        # The seed's catalog calls them `parameters`; `arguments` matches the API.
        arguments_path: DocumentPath = (*at, "arguments" if "arguments" in item else "parameters")
        arguments = item.get(arguments_path[-1], {})
        if not isinstance(arguments, Mapping):
            raise DefinitionError(f"example #{index + 1}: parameters must be a mapping", arguments_path)
        result.append(Example(description=str(item.get("description", "")), arguments=dict(arguments),
                              expect=_expectation(item.get("expect"), index), skip_check=_skip_check(item, index)))
        arguments_paths.append(arguments_path)
    check_examples(tuple(result), input_schema, arguments_paths)
    return tuple(result)


def _expectation(value: Any, index: int) -> ExampleExpectation:
    """An example's `expect:`, what `toolhost check` asks of its call; unset: that it succeeds."""
    at: DocumentPath = ("examples", index, "expect")
    if value is None:
        return ExampleExpectation()
    if not isinstance(value, Mapping):
        raise DefinitionError(f"example #{index + 1}: expect must be a mapping of "
                              f"{', '.join(sorted(EXPECT_KEYS))}", at)
    _reject_unknown(value, EXPECT_KEYS, f" in example #{index + 1}'s expect", at)
    success = value.get("success", True)
    output_contains = value.get("output_contains", "")
    if not isinstance(success, bool):
        raise DefinitionError(f"example #{index + 1}: expect.success must be true or false", (*at, "success"))
    if not isinstance(output_contains, str):
        raise DefinitionError(f"example #{index + 1}: expect.output_contains must be a string (quote it)",
                              (*at, "output_contains"))
    return ExampleExpectation(success=success, output_contains=output_contains,
                              structured_subset=value.get("structured_subset", NO_DEFAULT))


def _skip_check(item: Mapping[str, Any], index: int) -> bool:
    value = item.get("check")
    if value is None:
        return False
    if value != "skip":
        raise DefinitionError(f"example #{index + 1}: check must be `skip` (leaves the example out of "
                              "`toolhost check`), or left out", ("examples", index, "check"))
    return True


def check_examples(examples: tuple[Example, ...], input_schema: Mapping[str, Any],
                   arguments_paths: Sequence[DocumentPath] = ()) -> None:
    """An example a model copies must be a valid call, and what `toolhost check` expects of it must be
    something a call can give. `arguments_paths` says where each example's arguments are in the document."""
    if not examples:
        return
    validator = compile_validator(input_schema)
    for index, example in enumerate(examples):
        where = arguments_paths[index] if index < len(arguments_paths) else ()
        error = next(iter(validator.iter_errors(dict(example.arguments))), None)
        if error is not None:
            raise DefinitionError(f"example #{index + 1} does not fit the parameters: {error.message}",
                                  (*where, *error.instance_path))
        expect = example.expect
        # A Python tool builds its Example by hand: its types are checked here, as a YAML file's are on reading.
        expect_at: DocumentPath = (*where[:-1], "expect") if where else ()
        if not isinstance(expect, ExampleExpectation) or not isinstance(expect.success, bool) \
                or not isinstance(expect.output_contains, str) or not isinstance(example.skip_check, bool):
            raise DefinitionError(f"example #{index + 1}: expect must be an ExampleExpectation (success a bool, "
                                  "output_contains a str) and skip_check a bool", expect_at)
        if expect.structured_subset is not NO_DEFAULT:
            problem = _json_problem(expect.structured_subset, _MAX_SUBSET_DEPTH)
            if problem:
                raise DefinitionError(f"example #{index + 1}: expect.structured_subset {problem}",
                                      (*expect_at, "structured_subset") if expect_at else ())


# Deeper than any structured output a tool may return (Python tools' outputs are cut at depth 32).
_MAX_SUBSET_DEPTH = 32


def _json_problem(value: Any, depth: int) -> str:
    """Why `value` is no JSON value a structured output could hold ("" when it is one)."""
    if depth < 0:
        return f"nests deeper than {_MAX_SUBSET_DEPTH} levels"
    if value is None or isinstance(value, (bool, int, str)):
        return ""
    if isinstance(value, float):
        return "" if math.isfinite(value) else "holds NaN or an infinity, which JSON has no number for"
    if isinstance(value, list):
        return next((p for p in (_json_problem(v, depth - 1) for v in value) if p), "")
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            return "has a key that is not a string; quote it"
        return next((p for p in (_json_problem(v, depth - 1) for v in value.values()) if p), "")
    return f"holds a {type(value).__name__}, which is no JSON value (quote a date or time as a string)"


def _annotations(value: Any) -> Annotations:
    if value is None:
        return Annotations()
    if not isinstance(value, Mapping):
        raise DefinitionError("annotations must be a mapping of read_only, destructive, idempotent, open_world",
                              "annotations")
    _reject_unknown(value, frozenset(ANNOTATION_KEYS), " in annotations", ("annotations",))
    flags = {}
    for key in ANNOTATION_KEYS:
        flag = value.get(key, False)
        if not isinstance(flag, bool):
            raise DefinitionError(f"annotations.{key} must be true or false", ("annotations", key))
        flags[key] = flag
    return Annotations(**flags)


def check_intents(value: Any, input_schema: Mapping[str, Any]) -> tuple[Intent, ...]:
    """The intents of a definition, each a regular expression or {pattern, arguments} (an Intent, from Python);
    their named groups and constant arguments must be properties of `input_schema`."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise DefinitionError("intents must be a list, each a regular expression or {pattern, arguments}",
                              "intents")
    properties = input_schema.get("properties")
    names = frozenset(properties) if isinstance(properties, Mapping) else frozenset()
    return tuple(_intent(item, input_schema, names, index) for index, item in enumerate(value))


def _intent(item: Any, input_schema: Mapping[str, Any], names: frozenset[str], index: int) -> Intent:
    at: DocumentPath = ("intents", index)
    pattern_at = at
    pattern: Any
    if isinstance(item, Intent):
        pattern, arguments = item.pattern, item.arguments
    elif isinstance(item, str):
        pattern, arguments = item, {}
    elif isinstance(item, Mapping):
        _reject_unknown(item, INTENT_KEYS, f" in intent #{index + 1}", at)
        pattern, arguments, pattern_at = item.get("pattern"), item.get("arguments", {}), (*at, "pattern")
        if not isinstance(arguments, Mapping):
            raise DefinitionError("an intent's arguments must be a mapping of parameter names to values",
                                  (*at, "arguments"))
    else:
        raise DefinitionError("an intent is a regular expression or a mapping {pattern, arguments}", at)
    if not isinstance(pattern, str) or not pattern:
        raise DefinitionError("an intent needs a `pattern`: a regular expression the whole query must match",
                              pattern_at)
    try:
        compiled = compile_intent(pattern)
    except IntentPatternError as exc:
        raise DefinitionError(str(exc), pattern_at) from exc
    known = ", ".join(sorted(names)) or "none"
    for group in compiled.group_names:
        if group not in names:
            raise DefinitionError(f"intent {pattern!r} captures (?P<{group}>...), but {group!r} is not a parameter "
                                  f"of the tool; name each group after a parameter (the parameters: {known})",
                                  pattern_at)
    for key in arguments:
        if key not in names:
            raise DefinitionError(f"intent argument {key!r} is not a parameter of the tool (the parameters: "
                                  f"{known})", (*at, "arguments", str(key)), at_key=True)
    if not compiled.group_names:  # its arguments are all constants: they must be a whole valid call now
        error = next(iter(compile_validator(input_schema).iter_errors(dict(arguments))), None)
        if error is not None:
            raise DefinitionError(f"intent {pattern!r} has no named groups, so its arguments must be a whole "
                                  f"valid call: {error.message}", (*at, "arguments", *error.instance_path))
    return Intent(pattern, dict(arguments))
