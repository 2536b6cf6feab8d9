"""PocketDev's tool-management tools: `tool_create`, `tool_update`, `tool_delete`, `tool_list`, `tool_show` and
`tool_run`, for an agent that makes its own tools. They ask the same core as UserToolService, for the caller of
the call, so they need the same right (admin or `manage_tools`); `tool_run` runs a user tool through the call
pipeline, with the caller's own right to call it, as CallTool would. A server that serves no user tools (they
would run as its own user: user_tools/identity.py) does not serve tool_create, tool_update and tool_run either."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..errors import FieldViolation, InvalidArgumentsError, ToolhostError
from ..model import Annotations, Example, Parameter
from ..store.errors import StoreError
from .base import Tool, ToolContext, ToolOutput, ToolRaisedFailure, ToolServices

if TYPE_CHECKING:
    from ..auth.caller import Caller
    from ..pipeline import CallResult
    from ..user_tools.records import UserToolRecord
    from ..user_tools.service import UserTools

T = TypeVar("T")

CATEGORY = "tool_management"
TAGS = ("tools", "pocketdev")
_SLUG = Parameter("slug", "string", "The user tool's slug: its name as a tool.", required=True,
                  schema={"pattern": "^[a-z][a-z0-9_]{0,63}$"})
# The fields a user tool has besides its slug, as tool_create and tool_update take them.
_FIELDS = (
    Parameter("description", "string", "What the tool does, for a person or a model deciding to call it."),
    Parameter("script", "string", "The bash script. Each argument reaches it as the environment variable "
              "TOOL_ARG_<NAME> (upper case), never spliced into its text."),
    Parameter("input_schema", "object", "The JSON Schema (draft 2020-12) of the tool's arguments object."),
    Parameter("name", "string", "The name a person reads (empty: the slug)."),
    Parameter("category", "string", "The tool's category (default custom)."),
    Parameter("system_prompt", "string", "The instructions a model gets for the tool (else the description)."),
    Parameter("timeout_seconds", "number", "The longest a call may run (0: the server's default).",
              schema={"minimum": 0}),
    Parameter("tags", "array", "Labels for filtering.", schema={"items": {"type": "string"}}),
    Parameter("credentials", "array", "Credentials the script gets as TOOL_CRED_*: only those your role may "
              "grant.", schema={"items": {"type": "string"}}),
)
_FIELD_NAMES = tuple(p.name for p in _FIELDS)
_CREATE_FIELDS = tuple(dataclasses.replace(p, required=p.name in ("description", "script")) for p in _FIELDS)
_TIME = {"type": "string", "description": "ISO 8601."}
_SUMMARY_PROPERTIES: dict[str, Any] = {
    "slug": {"type": "string"}, "name": {"type": "string"}, "description": {"type": "string"},
    "category": {"type": "string"}, "enabled": {"type": "boolean"}, "version": {"type": "integer"},
    "shadowed_by": {"type": "string", "description": "The source (catalog, builtin) of the tool that took the "
                    "name, when the user tool is not served because of it."},
}
_TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        **_SUMMARY_PROPERTIES,
        "system_prompt": {"type": "string"}, "input_schema": {"type": "object"}, "script": {"type": "string"},
        "timeout_seconds": {"type": ["number", "null"]}, "tags": {"type": "array", "items": {"type": "string"}},
        "credentials": {"type": "array", "items": {"type": "string"}}, "created_at": _TIME, "updated_at": _TIME,
    },
    "required": ["slug", "version", "enabled", "script", "input_schema"],
}


def _summary(record: UserToolRecord) -> dict[str, Any]:
    return {"slug": record.slug, "name": record.name, "description": record.description,
            "category": record.category, "enabled": record.enabled, "version": record.version,
            "shadowed_by": record.shadowed_by}


def _whole(record: UserToolRecord) -> dict[str, Any]:
    return {**_summary(record), "system_prompt": record.system_prompt, "input_schema": record.input_schema,
            "script": record.script, "timeout_seconds": record.timeout_seconds, "tags": list(record.tags),
            "credentials": list(record.credentials), "created_at": record.created_at.isoformat(),
            "updated_at": record.updated_at.isoformat()}


def _state(record: UserToolRecord) -> str:
    if record.shadowed_by:
        return f"not served: a {record.shadowed_by} tool has its name"
    return "enabled" if record.enabled else "disabled"


def _fields_of(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The user-tool fields among the arguments, in the core's types (0 seconds is the server's default)."""
    fields = {name: arguments[name] for name in _FIELD_NAMES if name in arguments}
    for name in ("tags", "credentials"):
        if name in fields:
            fields[name] = tuple(fields[name])
    if "timeout_seconds" in fields:
        fields["timeout_seconds"] = float(fields["timeout_seconds"]) or None
    return fields


class _ManagementTool(Tool):
    """What the six tools share: served only with the user tools, the caller of the call, and the core's
    refusals as the tool's failures, each with its reason as the code."""

    category = CATEGORY
    tags = TAGS

    @classmethod
    def unserved_because(cls, services: ToolServices) -> str:
        if services.user_tools is None:
            return "no store to keep user tools in"
        return ""

    @staticmethod
    def _core(context: ToolContext) -> tuple[UserTools, Caller]:
        user_tools, caller = context.services.user_tools, context.authenticated_caller
        if user_tools is None or caller is None:  # the pipeline sets both; only a direct run (a test) gets here
            raise RuntimeError(f"{context.tool_name} was run outside a server call")
        return user_tools(), caller

    @staticmethod
    async def _asked(request: Awaitable[T], context: ToolContext) -> T:
        """The core's answer; its refusal (no right, a taken slug, no such tool ...) as the tool's failure."""
        try:
            return await request
        except ToolhostError as exc:
            raise ToolRaisedFailure(exc.message, exc.reason) from None
        except StoreError:
            # Where the store is (a path, a URL) is for the operator's log, not for the caller.
            context.logger.warning("the user tools' store failed in call %s", context.call_id, exc_info=True)
            raise ToolRaisedFailure(
                f"the server's database cannot be used now; retry later (the server log has the detail under call "
                f"id {context.call_id})", "STORE_UNAVAILABLE") from None


class _ServingTool(_ManagementTool):
    """A tool that serves or runs a user tool: left out where user tools are not served."""

    @classmethod
    def unserved_because(cls, services: ToolServices) -> str:
        return services.user_tools_refusal or super().unserved_because(services)


class ToolCreate(_ServingTool):
    name = "tool_create"
    display_name = "Tool Create"
    description = (
        "Creates a user tool: a bash script served as a tool named by its slug, with an input schema whose "
        "arguments reach the script as the environment variables TOOL_ARG_<NAME>. It runs as the server's "
        "process user, under the server's limits. Returns the tool at version 1. Needs the admin role or the "
        "manage_tools right; a slug any tool has already is refused.")
    parameters = (_SLUG, *_CREATE_FIELDS)
    output_schema: ClassVar[Mapping[str, Any]] = _TOOL_SCHEMA
    examples = (Example("A tool that counts the lines of a file", {
        "slug": "line_count", "description": "Counts the lines of a file.", "script": 'wc -l < "$TOOL_ARG_PATH"',
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}),)
    annotations = Annotations(destructive=False)

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        from ..user_tools.records import DEFAULT_CATEGORY, UserToolRecord

        user_tools, caller = self._core(context)
        fields = {"name": "", "category": DEFAULT_CATEGORY, "system_prompt": "", "input_schema": {"type": "object"},
                  "timeout_seconds": None, "tags": (), "credentials": (), **_fields_of(arguments)}
        # The core sets the version, the times and `enabled` of a new tool: these are placeholders.
        now = datetime.now(UTC)
        record = UserToolRecord(slug=arguments["slug"], enabled=True, version=0, created_at=now, updated_at=now,
                                **fields)
        created = await self._asked(user_tools.create(caller, record), context)
        return ToolOutput(text=f"created user tool {created.slug}, version {created.version}",
                          structured=_whole(created))


class ToolUpdate(_ServingTool):
    name = "tool_update"
    display_name = "Tool Update"
    description = (
        "Changes a user tool: only the fields given, stored as a new version (tool_show shows the current one). "
        "The next call of the tool runs the new version. The slug cannot change. Needs the admin role or the "
        "manage_tools right.")
    parameters = (_SLUG, *_FIELDS)
    output_schema: ClassVar[Mapping[str, Any]] = _TOOL_SCHEMA
    examples = (Example("Replace a tool's script", {"slug": "line_count", "script": 'wc -l -- "$TOOL_ARG_PATH"'}),)
    annotations = Annotations(destructive=True)

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        user_tools, caller = self._core(context)
        changes = _fields_of(arguments)
        if not changes:
            raise InvalidArgumentsError(self.name, [FieldViolation(
                "/", f"give at least one field to change: {', '.join(_FIELD_NAMES)}")])
        updated = await self._asked(user_tools.update(caller, arguments["slug"], changes), context)
        return ToolOutput(text=f"updated user tool {updated.slug}, now version {updated.version}",
                          structured=_whole(updated))


class ToolDelete(_ManagementTool):
    name = "tool_delete"
    display_name = "Tool Delete"
    description = ("Deletes a user tool with all its versions and stops serving it. Returns the tool as it was. "
                   "Needs the admin role or the manage_tools right.")
    parameters = (_SLUG,)
    output_schema: ClassVar[Mapping[str, Any]] = _TOOL_SCHEMA
    annotations = Annotations(destructive=True)

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        user_tools, caller = self._core(context)
        deleted = await self._asked(user_tools.delete(caller, arguments["slug"]), context)
        return ToolOutput(text=f"deleted user tool {deleted.slug} (it was at version {deleted.version})",
                          structured=_whole(deleted))


class ToolList(_ManagementTool):
    name = "tool_list"
    display_name = "Tool List"
    description = (
        "Lists the user tools, sorted by slug: slug, name, description, category, whether each is enabled, its "
        "version, and what shadows it (a catalog tool that took its name). tool_show gives one with its script. "
        "Pages of `page_size` tools; pass the `next_page_token` back to continue. Needs the admin role or the "
        "manage_tools right.")
    parameters = (
        Parameter("page_size", "integer", "The most tools to return (default 100).", default=100,
                  schema={"minimum": 1, "maximum": 1000}),
        Parameter("page_token", "string", "The next_page_token of the previous page.", default=""),
    )
    output_schema: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "user_tools": {"type": "array", "items": {"type": "object", "properties": _SUMMARY_PROPERTIES}},
            "next_page_token": {"type": "string", "description": "Empty on the last page."},
        },
        "required": ["user_tools", "next_page_token"],
    }
    annotations = Annotations(read_only=True, idempotent=True)

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        user_tools, caller = self._core(context)
        records, token = await self._asked(
            user_tools.list(caller, arguments["page_size"], arguments["page_token"]), context)
        lines = [f"{r.slug} (v{r.version}, {_state(r)}): {' '.join(r.description.split())}" for r in records]
        if not lines:
            lines = ["no user tools (tool_create makes one)"]
        if token:
            lines.append(f"more: call tool_list with page_token {token}")
        return ToolOutput(text="\n".join(lines),
                          structured={"user_tools": [_summary(r) for r in records], "next_page_token": token})


class ToolShow(_ManagementTool):
    name = "tool_show"
    display_name = "Tool Show"
    description = ("Shows one user tool whole: its script, input schema, system prompt, state and version. Needs "
                   "the admin role or the manage_tools right.")
    parameters = (_SLUG,)
    output_schema: ClassVar[Mapping[str, Any]] = _TOOL_SCHEMA
    annotations = Annotations(read_only=True, idempotent=True)

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        user_tools, caller = self._core(context)
        record = await self._asked(user_tools.get(caller, arguments["slug"]), context)
        text = (f"{record.slug} (version {record.version}, {_state(record)}): {record.description}\n\n"
                f"script:\n{record.script}")
        return ToolOutput(text=text, structured=_whole(record))


class ToolRun(_ServingTool):
    name = "tool_run"
    display_name = "Tool Run"
    description = (
        "Runs a user tool by its slug with an arguments object, as calling the tool itself would: the same "
        "checks of the arguments, limits, redaction and audit, and your own right to call it. Returns its output; "
        "the tool's failure is this call's failure, with the same code. Needs the admin role or the manage_tools "
        "right; for other tools, call them directly.")
    parameters = (
        _SLUG,
        Parameter("arguments", "object", "The user tool's arguments (its input schema: tool_show shows it).",
                  default={}),
    )
    output_schema: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "tool": {"type": "string"}, "call_id": {"type": "string", "description": "The user tool's call."},
            "success": {"type": "boolean"}, "output": {"type": "string"}, "stderr": {"type": "string"},
            "exit_code": {"type": ["integer", "null"]}, "structured_output": {},
        },
        "required": ["tool", "call_id", "success", "output"],
    }
    examples = (Example("Count the lines of a file with a user tool",
                        {"slug": "line_count", "arguments": {"path": "/etc/hosts"}}),)
    annotations = Annotations(destructive=True, open_world=True)

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        from ..pipeline import CallRequest

        user_tools, caller = self._core(context)
        call_tool = context.services.call_tool
        if call_tool is None:
            raise RuntimeError(f"{context.tool_name} was run by a server without a call pipeline")
        slug: str = arguments["slug"]
        # A user tool by that slug, and the right to manage tools: else tool_run would be a second CallTool.
        record = await self._asked(user_tools.get(caller, slug), context)
        if record.shadowed_by or not record.enabled:
            raise ToolRaisedFailure(
                f"user tool {slug!r} is not served ({_state(record)}): enable it (SetUserToolEnabled, `toolhost "
                "user-tools enable`) or, when shadowed, create it again under another slug", "FAILED_PRECONDITION")
        request = CallRequest(name=slug, arguments=arguments["arguments"], caller=caller,
                              caller_timeout_seconds=context.timeout_seconds)
        result = await self._asked(call_tool(request), context)
        return _run_output(result)


def _run_output(result: CallResult) -> ToolOutput:
    """The user tool's result as tool_run's: its output, and its failure as tool_run's own."""
    outcome = result.outcome
    structured = {"tool": result.tool, "call_id": result.call_id, "success": result.success,
                  "output": outcome.output, "stderr": outcome.stderr, "exit_code": outcome.exit_code,
                  "structured_output": outcome.structured}
    output = ToolOutput(text=outcome.output, structured=structured)
    if outcome.failure is not None:
        raise ToolRaisedFailure(f"user tool {result.tool!r} failed: {outcome.failure.message}",
                                outcome.failure.code, output=output, exit_code=outcome.exit_code)
    return output

