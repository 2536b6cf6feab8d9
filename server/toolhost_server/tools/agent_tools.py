"""drowcoder's agent tools that touch no file: `todo` (task lists kept in the store, per caller identity and
session) and `attempt_completion` (the agent's final answer, handed back as structured output)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..errors import FieldViolation, InvalidArgumentsError
from ..model import Annotations, Example, Parameter
from ..store.errors import StoreCommitUnknownError, StoreError
from .base import Tool, ToolContext, ToolOutput, ToolRaisedFailure, ToolServices

if TYPE_CHECKING:
    from ..store.todo_table import TodoList, TodoTable

T = TypeVar("T")

TODO_ACTIONS = ("add", "update", "list", "clear")
TODO_STATUSES = ("pending", "in_progress", "completed")
MAX_TODO_CONTENT_CHARS = 4000
MAX_TODO_ITEMS = 500
MAX_TODO_LISTS = 100  # per caller identity: a caller cannot fill the database by inventing sessions
MAX_SESSION_CHARS = 128
MAX_OWNER_CHARS = 256  # the todos.owner column: the caller's method and name
MAX_COMPLETION_CHARS = 100_000
MAX_COMMAND_CHARS = 4000

_CHECKBOXES = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}
# What each action takes besides `action` and `session`: an argument another action takes is refused, so that a
# mistaken call (an id given to add) is told rather than half done.
_ACTION_ARGUMENTS = {"add": {"content", "status"}, "update": {"id", "content", "status"}, "list": set(),
                     "clear": set()}

_TIME = {"type": "string", "description": "ISO 8601, UTC."}
_ITEM_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer", "description": "The item's number in its list."},
        "content": {"type": "string"},
        "status": {"type": "string", "enum": list(TODO_STATUSES)},
        "created_at": _TIME,
        "updated_at": _TIME,
    },
    "required": ["id", "content", "status", "created_at", "updated_at"],
}


class Todo(Tool):
    name = "todo"
    display_name = "Todo"
    description = (
        "Keeps the agent's task list: add an item, update one's status or content, list them, or clear the list. "
        "Items have an id (its number in the list), content, and a status: pending, in_progress or completed. "
        "Lists are kept on the server per caller and per `session` (a name you choose; default \"default\"), so "
        f"they survive restarts and no other caller sees them. At most {MAX_TODO_ITEMS} items per list and "
        f"{MAX_TODO_LISTS} lists per caller. Returns the list after the action.")
    category = "agent"
    tags = ("agent", "planning", "drowcoder")
    parameters = (
        Parameter("action", "string", "What to do: add an item, update one, list them, or clear the list.",
                  required=True, enum=TODO_ACTIONS),
        Parameter("session", "string", "The list to work on, by a name you choose (no control characters).",
                  default="default",
                  schema={"minLength": 1, "maxLength": MAX_SESSION_CHARS, "pattern": "^[^\\x00-\\x1f\\x7f]*$"}),
        Parameter("content", "string", "The item's text: required by add, optional for update.",
                  schema={"minLength": 1, "maxLength": MAX_TODO_CONTENT_CHARS, "pattern": "^[^\\x00]*$"}),
        Parameter("status", "string", "The item's status: for add (default pending) and update.",
                  enum=TODO_STATUSES),
        Parameter("id", "integer", "The item to update (its id in the list).",
                  schema={"minimum": 1, "maximum": 2**31 - 1}),
    )
    output_schema: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "session": {"type": "string"},
            "items": {"type": "array", "items": _ITEM_SCHEMA, "description": "The list after the action, by id."},
            "item": {"anyOf": [_ITEM_SCHEMA, {"type": "null"}],
                     "description": "The item added or updated; null for list and clear."},
            "cleared": {"type": "integer", "description": "How many items clear removed (else 0)."},
        },
        "required": ["session", "items", "item", "cleared"],
    }
    examples = (
        Example("Add an item", {"action": "add", "content": "Write the migration test"}),
        Example("Start on item 1", {"action": "update", "id": 1, "status": "in_progress"}),
        Example("Show the list of a session", {"action": "list", "session": "refactor-auth"}),
    )
    annotations = Annotations(destructive=True)

    @classmethod
    def unserved_because(cls, services: ToolServices) -> str:
        return "" if services.todos is not None else "no store to keep todo lists in"

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        action: str = arguments["action"]
        session: str = arguments["session"]
        _check_arguments_of(action, arguments, context.tool_name)
        table = _todo_table(context)
        owner = _owner(context)
        change: Callable[[], TodoList]
        if action == "add":
            change = partial(table.add, owner, session, arguments["content"], arguments.get("status", "pending"),
                             max_items=MAX_TODO_ITEMS, max_lists=MAX_TODO_LISTS)
        elif action == "update":
            change = partial(table.update, owner, session, arguments["id"], content=arguments.get("content"),
                             status=arguments.get("status"))
        elif action == "clear":
            change = partial(table.clear, owner, session)
        else:
            change = partial(table.read, owner, session)
        todo_list = await _in_store(change, context)
        return ToolOutput(text=_as_text(action, session, todo_list), structured={
            "session": session,
            "items": [item.as_dict() for item in todo_list.items],
            "item": todo_list.changed.as_dict() if todo_list.changed is not None else None,
            "cleared": todo_list.cleared,
        })


class AttemptCompletion(Tool):
    name = "attempt_completion"
    display_name = "Attempt Completion"
    description = (
        "Presents the result of your task to the user when you believe it is done: `result` says what was "
        "accomplished, and `command` (optional) is a command the user may run to see it (say, `make test`). The "
        "server never runs the command; it returns both as structured output {result, command}.")
    category = "agent"
    tags = ("agent", "drowcoder")
    parameters = (
        Parameter("result", "string", "What was accomplished, as the user should read it.", required=True,
                  schema={"minLength": 1, "maxLength": MAX_COMPLETION_CHARS}),
        Parameter("command", "string", "A command the user may run to see the result; never run by the server.",
                  schema={"maxLength": MAX_COMMAND_CHARS}),
    )
    output_schema: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {"result": {"type": "string"}, "command": {"type": ["string", "null"]}},
        "required": ["result", "command"],
    }
    examples = (Example("Report a finished task",
                        {"result": "The parser now accepts empty files; tests added.", "command": "make test"}),)
    annotations = Annotations(read_only=True, idempotent=True)

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        result: str = arguments["result"]
        command: str | None = arguments.get("command") or None
        text = result if command is None else f"{result}\n\nTo see the result, run: {command}"
        return ToolOutput(text=text, structured={"result": result, "command": command})


def _check_arguments_of(action: str, arguments: Mapping[str, Any], tool: str) -> None:
    """INVALID_ARGUMENT for what `action` lacks or does not take."""
    violations = [FieldViolation(f"/{name}", f"action {action!r} takes no {name}")
                  for name in ("content", "status", "id")
                  if name in arguments and name not in _ACTION_ARGUMENTS[action]]
    if action == "add" and "content" not in arguments:
        violations.append(FieldViolation("/content", "action 'add' needs the item's content"))
    if action == "update":
        if "id" not in arguments:
            violations.append(FieldViolation("/id", "action 'update' needs the id of the item to change"))
        if "content" not in arguments and "status" not in arguments:
            violations.append(FieldViolation("/status", "action 'update' needs a new status, content, or both"))
    if violations:
        raise InvalidArgumentsError(tool, violations)


def _todo_table(context: ToolContext) -> TodoTable:
    table = context.services.todos
    if table is None:  # the tool is not served then; only a direct run (a test) can get here
        raise RuntimeError(f"{context.tool_name} was run by a server without a store")
    return table


def _owner(context: ToolContext) -> str:
    """Whose lists the call works on: `method:name` (token:alice), as the store can keep it. The name alone
    would let a token and a client certificate both named alice, or an auth-file entry named anonymous and
    every unauthenticated caller, share lists. A method holds no ":", so the key splits one way only."""
    if not context.caller or not context.caller_method:  # the pipeline names both; only a direct run can get here
        raise RuntimeError(f"{context.tool_name} was run without a caller identity")
    owner = f"{context.caller_method}:{context.caller}"
    if len(owner) > MAX_OWNER_CHARS or "\x00" in owner:
        # Cut or escaped, two identities could share lists; such a name (a client certificate's) is refused.
        raise ToolRaisedFailure(
            f"your identity (the name the server authenticated you as) is longer than "
            f"{MAX_OWNER_CHARS - len(context.caller_method) - 1} characters or holds a NUL, so no todo list can be "
            "kept for it; ask the operator to name you in the auth file", "CALLER_NAME_UNUSABLE")
    return owner


async def _in_store(change: Callable[[], T], context: ToolContext) -> T:
    """`change()` in a thread, committed before the call answers; the store's failures as the tool's own."""
    from ..store.todo_table import TodoLimitReached, TodoNotFound

    try:
        return await asyncio.to_thread(change)
    except TodoNotFound as exc:
        raise ToolRaisedFailure(f"{exc}; list the session to see its items and their ids", "TODO_NOT_FOUND") \
            from None
    except TodoLimitReached as exc:
        raise ToolRaisedFailure(str(exc), exc.code) from None
    except StoreCommitUnknownError:
        context.logger.warning("the todo store lost its connection while committing call %s", context.call_id,
                               exc_info=True)
        raise ToolRaisedFailure(
            "the connection to the server's database broke while the change was committed, so whether it was "
            "kept is unknown; list the session to see, then retry if it is missing", "STORE_OUTCOME_UNKNOWN") \
            from None
    except StoreError:
        # Where the store is (a path, a URL) is for the operator's log, not for the caller.
        context.logger.warning("the todo store failed in call %s", context.call_id, exc_info=True)
        raise ToolRaisedFailure(
            f"the server's database cannot be used now; retry later (the server log has the detail under call id "
            f"{context.call_id})", "STORE_UNAVAILABLE") from None


def _as_text(action: str, session: str, todo_list: TodoList) -> str:
    """The list as a checklist a model reads at a glance, after a line saying what the action did."""
    counts = {status: sum(item.status == status for item in todo_list.items) for status in TODO_STATUSES}
    lines = [f"todo list {session!r}: {_items(len(todo_list.items))} ({counts['pending']} pending, "
             f"{counts['in_progress']} in progress, {counts['completed']} completed)"]
    if action == "clear":
        lines.append(f"cleared {_items(todo_list.cleared)}")
    elif todo_list.changed is not None:
        lines.append(f"{'added' if action == 'add' else 'updated'} item {todo_list.changed.id}")
    lines.extend(f"{_CHECKBOXES.get(item.status, '[?]')} {item.id}. {item.content}" for item in todo_list.items)
    return "\n".join(lines)


def _items(count: int) -> str:
    return "1 item" if count == 1 else f"{count} items"
