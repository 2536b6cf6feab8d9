"""What makes a user tool acceptable, and the ToolSpec it is served as.

A user tool goes through the catalog's own checks (catalog/definition.py): it is turned into the definition a
catalog file would hold, with the script runner under bash, so that its schema, tags, credential names and
timeout are judged exactly as a catalog tool's. On top: the slug's form, size bounds, text that every database
can store, and credentials only those the creator's roles may grant.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Collection
from typing import Any

from ..catalog.definition import DefinitionError, parse_definition
from ..errors import InvalidRequestError
from ..model import ToolSource, ToolSpec
from .records import DEFAULT_CATEGORY, UserToolRecord

SLUG_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,63}")
# Bounds that keep one tool from filling the store or every ListTools response.
MAX_SCRIPT_BYTES = 256 * 1024
MAX_TEXT_BYTES = 64 * 1024  # description, system_prompt
MAX_SCHEMA_BYTES = 256 * 1024
MAX_NAME_CHARS = 256
MAX_CATEGORY_CHARS = 100
MAX_TAGS = 32
MAX_TAG_CHARS = 64
MAX_CREDENTIALS = 16
ORIGIN_PREFIX = "user:"


def check_slug(slug: str) -> None:
    if not SLUG_PATTERN.fullmatch(slug):
        raise InvalidRequestError(
            f"slug {_shown(slug)} must match ^[a-z][a-z0-9_]{{0,63}}$: a lower-case letter, then up to 63 lower-case "
            "letters, digits or '_' (for example disk_usage)")


def check_record(tool: UserToolRecord, grantable_credentials: Collection[str]) -> ToolSpec:
    """The ToolSpec `tool` is served as, or InvalidRequestError saying which field is wrong and how.

    Every credential it declares must be in `grantable_credentials` (the caller's roles' `manage_tools:
    {credentials: [...]}`): the script could print it otherwise."""
    check_slug(tool.slug)
    for field, value, limit in (("name", tool.name, MAX_NAME_CHARS), ("category", tool.category, MAX_CATEGORY_CHARS)):
        _check_text(field, value, limit * 4)
        if len(value) > limit:
            raise InvalidRequestError(f"{field} is {len(value)} characters long; at most {limit} are allowed")
    _check_text("description", tool.description, MAX_TEXT_BYTES)
    _check_text("system_prompt", tool.system_prompt, MAX_TEXT_BYTES)
    _check_text("script", tool.script, MAX_SCRIPT_BYTES)
    if not tool.script.strip():
        raise InvalidRequestError("script is required: the bash script the tool runs, e.g. 'echo \"$TOOL_ARG_NAME\"'")
    if len(tool.tags) > MAX_TAGS or any(len(tag) > MAX_TAG_CHARS for tag in tool.tags):
        raise InvalidRequestError(f"tags: at most {MAX_TAGS}, each at most {MAX_TAG_CHARS} characters")
    for tag in tool.tags:
        _check_text("tags", tag, MAX_TAG_CHARS * 4)
    if len(tool.credentials) > MAX_CREDENTIALS or len(set(tool.credentials)) < len(tool.credentials):
        raise InvalidRequestError(f"credentials: at most {MAX_CREDENTIALS} names, each once")
    timeout = tool.timeout_seconds
    if timeout is not None and not (0 < timeout < math.inf):  # NaN fails too
        raise InvalidRequestError("timeout_seconds must be a positive, finite number of seconds, or 0 for the "
                                  "server's default")
    _check_schema_size(tool.input_schema)
    try:
        spec = parse_definition(_definition(tool), ORIGIN_PREFIX + tool.slug, ToolSource.USER)
    except DefinitionError as exc:
        where = ".".join(str(step) for step in exc.path) or "the tool"
        raise InvalidRequestError(f"{where}: {exc.reason}") from None
    refused = sorted(set(tool.credentials) - set(grantable_credentials))
    if refused:
        raise InvalidRequestError(
            f"credentials {', '.join(refused)}: your roles may not give a user tool these credentials; a role "
            "needs them under `manage_tools: {credentials: [...]}` in the server's auth file")
    return spec


def served_spec(tool: UserToolRecord) -> ToolSpec:
    """The ToolSpec of a stored tool, checked when it was stored: a stored tool is served whoever reads it."""
    spec = parse_definition(_definition(tool), ORIGIN_PREFIX + tool.slug, ToolSource.USER)
    # Not a catalog key: the instructions block (instructions.py) shows it instead of the description.
    return dataclasses.replace(spec, system_prompt=tool.system_prompt)


def _definition(tool: UserToolRecord) -> dict[str, Any]:
    # interpreter: bash whatever the script's first line says; no run_as_server_user, no env, no cwd: the script
    # runs as the process user in the call's own directory, like any script tool of the catalog.
    definition: dict[str, Any] = {
        "name": tool.slug,
        "display_name": tool.name or tool.slug,
        "description": tool.description,
        "category": tool.category or DEFAULT_CATEGORY,
        "tags": list(tool.tags),
        "credentials": list(tool.credentials),
        "runner": {"type": "script", "script": tool.script, "interpreter": "bash"},
    }
    if tool.input_schema:
        definition["input_schema"] = tool.input_schema
    if tool.timeout_seconds is not None:
        definition["timeout_seconds"] = tool.timeout_seconds
    return definition


def _check_text(field: str, value: str, max_bytes: int) -> None:
    # PostgreSQL stores no NUL in text, and a lone surrogate (possible from JSON) is no UTF-8 at all.
    if "\0" in value:
        raise InvalidRequestError(f"{field} contains a NUL character; remove it")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidRequestError(f"{field} is not valid Unicode text (it holds a lone surrogate)") from None
    if size > max_bytes:
        raise InvalidRequestError(f"{field} is {size} bytes long; at most {max_bytes} are allowed")


def _check_schema_size(schema: Any) -> None:
    try:
        size = len(json.dumps(schema, ensure_ascii=False, allow_nan=False).encode("utf-8"))
    except RecursionError:
        raise InvalidRequestError("input_schema is nested too deeply; flatten it") from None
    except (ValueError, TypeError, UnicodeEncodeError):
        raise InvalidRequestError("input_schema must be a JSON object of finite numbers and valid text") from None
    if size > MAX_SCHEMA_BYTES:
        raise InvalidRequestError(f"input_schema is {size} bytes as JSON; at most {MAX_SCHEMA_BYTES} are allowed")
    if "\\u0000" in json.dumps(schema):
        raise InvalidRequestError("input_schema contains a NUL character; remove it")


def _shown(value: str) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:80]}..."
